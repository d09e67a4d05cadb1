"""What ``fmcluster burn-in`` checks when the flags leave it open: the queue's ``burn_in`` from the spec. Facts typed
by hand: the catalog's 2-node floor for p5.48xlarge is 389 GB/s (fmcluster/catalog/nccl_floors.yaml); there is none
for p6-b200.48xlarge (no published run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster.backends.burn_in.choice import choose
from fmcluster.errors import UsageError
from fmcluster.spec import load_spec


def _spec(tmp_path: Path, queues: str):
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: demo\nbackend: eks\nregion: us-east-1\nqueues:\n{queues}")
    return load_spec(path).spec


P5 = "  - name: gpu\n    instance_type: p5.48xlarge\n    nodes: 4\n"


def test_the_level_and_floor_come_from_the_spec_unless_a_flag_says_otherwise(tmp_path):
    written = P5 + "    burn_in: {level: long, floors: {2: 400}}\n"
    choice = choose(_spec(tmp_path, written), None, None)
    assert (choice.level, choice.pair_floor_gb_s, choice.floor_source) == ("long", 400.0, "spec")
    choice = choose(_spec(tmp_path, written), "gpu", "quick")
    assert (choice.level, choice.pair_floor_gb_s) == ("quick", None)
    choice = choose(_spec(tmp_path, P5), None, None)  # the default for a multi-node p5 queue: standard
    assert (choice.level, choice.pair_floor_gb_s, choice.floor_source) == ("standard", 389.0, "catalog")


def test_the_first_accelerated_queue_is_the_default_and_an_off_queue_says_how_to_run_anyway(tmp_path):
    spec = _spec(tmp_path, "  - name: cpu\n    instance_type: c5.xlarge\n    nodes: 1\n" + P5)
    assert choose(spec, None, None).expect.queue.name == "gpu"
    with pytest.raises(UsageError, match="queue cpu has burn_in off .*--level quick, standard or long"):
        choose(spec, "cpu", None)


def test_a_level_that_runs_all_reduce_on_a_type_without_a_floor_suggests_quick(tmp_path):
    spec = _spec(tmp_path, "  - name: b200\n    instance_type: p6-b200.48xlarge\n    nodes: 2\n")
    assert choose(spec, None, None).level == "quick"  # its default
    with pytest.raises(UsageError, match="no known 2-node all-reduce floor for p6-b200.48xlarge.*--level quick"):
        choose(spec, None, "standard")
    with pytest.raises(UsageError, match="unknown burn-in level 'deep'"):
        choose(spec, None, "deep")
