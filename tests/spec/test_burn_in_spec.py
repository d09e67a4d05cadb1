"""``queues[].burn_in`` (issue 37): each queue's default level, the floors it is judged against, and each refusal
at its field's position. Positions are 1-based, counted by hand in the spec text.

Hand-typed facts: the catalog's only 2-node floors are p5.48xlarge 389, p4de.24xlarge 62 and p4d.24xlarge 61 GB/s
(fmcluster/catalog/nccl_floors.yaml: 80% of published runs); no published run exists for p5en, p6 or Trainium. The
ceiling for 2x p5.48xlarge: EFA 3,200 Gbps = 400 GB/s per node (Amazon EC2 P5 instances page, "3,200 Gbps" of
EFA networking), times nccl-tests' busbw factor 2(n-1)/n for n = 16 ranks (NVIDIA/nccl-tests doc/PERFORMANCE.md:
1.875), over the 2(N-1)/N = 1 each of N = 2 nodes sends: 750 GB/s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.in_process import run_in_process

from fmcluster.errors import SpecError
from fmcluster.spec import load_spec
from fmcluster.spec.burn_in import burn_in


def _spec(tmp_path: Path, queue: str, backend: str = "parallelcluster") -> Path:
    """A one-queue spec; the queue's own lines start at line 4 (``  - name: q`` is line 4)."""
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: demo\nbackend: {backend}\nqueues:\n  - name: q\n{queue}")
    return path


def _choice(tmp_path: Path, queue: str) -> tuple[str, dict[int, float]]:
    level, floors = burn_in(load_spec(_spec(tmp_path, queue)).spec.queues[0])
    return level, floors


# --- defaults ---------------------------------------------------------------------------------------------------

DEFAULTS = [
    # a queue of GPUs that can hold 2 nodes, with the catalog's 2-node floor (389 GB/s)
    ("p5-multi-node", "    instance_type: p5.48xlarge\n    nodes: 4\n", "standard", {2: 389.0}),
    ("p5-dynamic", "    instance_type: p5.48xlarge\n    nodes: {min: 0, max: 4}\n", "standard", {2: 389.0}),
    ("p4d-pair", "    instance_type: p4d.24xlarge\n    nodes: 2\n", "standard", {2: 61.0}),
    # one node: no pair to judge, so no floor applies
    ("p5-single-node", "    instance_type: p5.48xlarge\n    nodes: 1\n", "quick", {}),
    # the floor was measured over EFA: without EFA it does not hold
    ("p5-efa-off", "    instance_type: p5.48xlarge\n    nodes: 4\n    efa: false\n", "quick", {}),
    # GPUs without a published 2-node run
    ("p5en-no-floor", "    instance_type: p5en.48xlarge\n    nodes: 4\n", "quick", {}),
    ("g5-single-gpu", "    instance_type: g5.xlarge\n    nodes: 2\n", "quick", {}),
    # Trainium: accelerated, and no published all-reduce floor
    ("trn2", "    instance_type: trn2.48xlarge\n    nodes: 4\n", "quick", {}),
    # no accelerators: nothing for DCGM to test
    ("c5-cpu", "    instance_type: c5.xlarge\n    nodes: 4\n", "off", {}),
    # the spec's own 2-node floor makes standard judgeable on a type the catalog has none for
    ("p5en-own-floor", "    instance_type: p5en.48xlarge\n    nodes: 4\n    burn_in: {floors: {2: 300}}\n",
     "standard", {2: 300.0}),
    # the spec's floor replaces the catalog's at that node count
    ("p5-own-floor", "    instance_type: p5.48xlarge\n    nodes: 4\n    burn_in: {floors: {2: 400, 4: 300}}\n",
     "standard", {2: 400.0, 4: 300.0}),
    # YAML 1.1 reads a bare `off` as false: it is the level off
    ("bare-off", "    instance_type: p5.48xlarge\n    nodes: 4\n    burn_in: off\n", "off", {2: 389.0}),
    ("written-long", "    instance_type: p5.48xlarge\n    nodes: 4\n    burn_in: long\n", "long", {2: 389.0}),
]


@pytest.mark.parametrize("case", DEFAULTS, ids=[c[0] for c in DEFAULTS])
def test_each_queue_gets_its_level_and_floors(tmp_path: Path, case) -> None:
    _, queue, level, floors = case
    assert _choice(tmp_path, queue) == (level, floors)


# --- refusals ---------------------------------------------------------------------------------------------------

REFUSED = [
    ("unknown-level", "    instance_type: p5.48xlarge\n    nodes: 4\n    burn_in: deep\n", 7, 14,
     "queues[0].burn_in", "expected a level (quick, standard, long or off)"),
    ("unknown-level-in-mapping", "    instance_type: p5.48xlarge\n    nodes: 4\n    burn_in: {level: deeper}\n", 7,
     22, "queues[0].burn_in.level", "must be 'quick', 'standard', 'long' or 'off', got 'deeper'"),
    ("floor-above-ceiling", "    instance_type: p5.48xlarge\n    nodes: 2\n    burn_in: {floors: {2: 800}}\n", 7, 27,
     "queues[0].burn_in.floors.2", "allows at most 750.0 GB/s"),
    ("floor-for-one-node", "    instance_type: p5.48xlarge\n    nodes: 4\n    burn_in: {floors: {1: 300}}\n", 7, 27,
     "queues[0].burn_in.floors.1", "an all-reduce crosses EFA only between two or more nodes"),
    ("floor-above-max-nodes", "    instance_type: p5.48xlarge\n    nodes: 4\n    burn_in: {floors: {8: 300}}\n", 7,
     27, "queues[0].burn_in.floors.8", "holds at most 4"),
    ("standard-without-floor", "    instance_type: p5en.48xlarge\n    nodes: 4\n    burn_in: standard\n", 7, 14,
     "queues[0].burn_in", "no known floor for p5en.48xlarge"),
    ("long-on-trainium", "    instance_type: trn2.48xlarge\n    nodes: 2\n    burn_in: {level: long}\n", 7, 22,
     "queues[0].burn_in.level", "or use level quick"),
    ("standard-without-efa", "    instance_type: p5.48xlarge\n    nodes: 4\n    efa: false\n    burn_in: standard\n",
     8, 14, "queues[0].burn_in", "this queue has efa: false"),
    ("quick-on-cpu", "    instance_type: c5.xlarge\n    nodes: 2\n    burn_in: quick\n", 7, 14,
     "queues[0].burn_in", "it would test nothing here; use off"),
    ("floors-with-quick",
     "    instance_type: p5.48xlarge\n    nodes: 4\n    burn_in: {level: quick, floors: {2: 300}}\n", 7, 37,
     "queues[0].burn_in.floors", "level quick runs none"),
    ("negative-floor", "    instance_type: p5.48xlarge\n    nodes: 4\n    burn_in: {floors: {2: -1}}\n", 7, 27,
     "queues[0].burn_in.floors.2", "greater than 0"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_at_the_field(tmp_path: Path, case) -> None:
    _, queue, line, column, path, fragment = case
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(tmp_path, queue))
    problems = [p for p in caught.value.problems if p.path == path]
    assert problems, caught.value.problems
    assert (problems[0].line, problems[0].column) == (line, column)
    assert fragment in problems[0].message, problems[0].message


def test_a_refused_level_exits_2_with_its_position_through_the_command(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "    instance_type: p5en.48xlarge\n    nodes: 4\n    burn_in: long\n")
    done = run_in_process(["plan", str(spec)], {"PATH": "/usr/bin:/bin", "FMCLUSTER_HOME": str(tmp_path / "home")})
    assert done.returncode == 2
    assert f"{spec}:7:14: queues[0].burn_in: burn-in level long runs an NCCL all-reduce" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
