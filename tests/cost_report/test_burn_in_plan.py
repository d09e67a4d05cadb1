"""`plan`'s burn-in figures per queue (issue 37): the level, its checks, its expected time, and its share of a
Capacity Block, in the text and in `plan --json` (docs/plan-json.md, ``queues[].burn_in``).

Expected times are typed from the sources fmcluster/catalog/burn_in_levels.py cites, summed by hand:
- DCGM (NVIDIA DCGM docs, dcgmi diag reference, --run): level 1 "normally lasting seconds" (1 to 59 s), level 2
  "approximately two minutes" (120 s), level 3 "approximately 15 minutes" (900 s).
- EFA loopback: fi_pingpong between two p4de.24xlarge printed 0.00 s per size (aws-samples/awsome-distributed-
  training, 1.architectures/efa-cheatsheet.md): 0 to 1 s.
- One all_reduce_perf iteration over every size on 2x p5.48xlarge: the out-of-place plus in-place time columns of
  the published run (aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md, commit
  0162aacd; tests/data/nccl-tests/aws-samples-2x-p5.48xlarge.txt), 278,058.2 µs; nccl-tests runs 20 timed
  iterations by default (NVIDIA/nccl-tests README, Arguments, -n), fmcluster's long 100: a run of `standard` is
  5.561164 s, of `long` 27.80582 s.
- The rounds of those runs on healthy nodes (counted by hand in tests/catalog/test_burn_in_rounds_count.py), fewest
  without the nodes' EC2 topology, most with it (p5.48xlarge has 3 network nodes, "Prerequisites for Amazon EC2
  topology"): 2 nodes 1 to 2, 4 nodes 3 to 7.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from fmcluster.cost_report.command import run_plan
from fmcluster.cost_report.figures import plan_report
from fmcluster.cost_report.report import render
from fmcluster.pricing.capacity_blocks import fetch_capacity_block_prices
from fmcluster.pricing.rates import LivePriceBook, PriceBook
from fmcluster.spec.loader import load_spec

P5_SWEEP_S = 0.2780582  # 278,058.2 µs, see above


def _write(tmp_path: Path, queues: list[dict], backend: str = "parallelcluster") -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "burn", "region": "us-east-1", "backend": backend,
                                    "queues": queues}, sort_keys=False))
    return path


def _run(path: Path, as_json: bool) -> tuple[int, str]:
    out = Console(width=200, record=True, force_terminal=False, color_system=None)
    err = Console(width=200, record=True, stderr=True, force_terminal=False, color_system=None)
    code = run_plan(str(path), as_json, None, False, out, err)
    return code, out.export_text()


def test_two_p5_nodes_at_the_default_standard_level(tmp_path: Path) -> None:
    path = _write(tmp_path, [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2}])
    code, out = _run(path, as_json=True)
    assert code == 0
    figures = json.loads(out)["queues"][0]["burn_in"]
    assert (figures["level"], figures["default"], figures["nodes"]) == ("standard", True, 2)
    # 120 s of DCGM level 2 + 0 to 1 s of loopback + 1 to 2 rounds x 5.561164 s
    assert figures["low_seconds"] == pytest.approx(125.561164)
    assert figures["high_seconds"] == pytest.approx(132.122328)
    assert [p["name"] for p in figures["parts"]] == ["DCGM level 2", "EFA loopback (fi_pingpong)",
                                                     "all_reduce_perf, 1 to 2 rounds of 20 iterations"]
    assert figures["unknown"] == []
    assert [(f["nodes"], f["gb_s"]) for f in figures["floors"]] == [(2, 389.0)]
    assert "aws-samples/awsome-distributed-training" in figures["floors"][0]["source"]
    assert figures["gated_at_create"] is False and figures["block_hours"] is None
    assert any("all_reduce_perf, 20 iterations" in check for check in figures["runs"])
    # p5.48xlarge has EC2 topology (3 network nodes); two nodes have nothing to narrow
    assert figures["runs"][-1].endswith("in pairs against the floors; where the backend reads the nodes' EC2 "
                                        "topology (EKS), pairs across its layers")

    code, text = _run(path, as_json=False)
    assert code == 0
    assert "  train: standard (the default) on 2 nodes: expected 2.1 min to 2.2 min" in text
    assert "this backend's create does not gate on these checks" in text
    assert "`fmcluster burn-in NAME` runs them" in text
    assert "floor: 389 GB/s all-reduce bus bandwidth on 2 nodes (from the catalog)" in text


def test_on_eks_the_plan_says_create_holds_the_new_nodes_until_they_pass(tmp_path: Path) -> None:
    """EKS's create gates a queue of NVIDIA GPUs (backends/eks/nodes/burn_in_hold.py); a CPU queue has no burn-in."""
    path = _write(tmp_path, [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2},
                             {"name": "cpu", "instance_type": "c5.xlarge", "nodes": 1}], backend="eks")
    code, out = _run(path, as_json=True)
    assert code == 0
    train, cpu = json.loads(out)["queues"]
    assert train["burn_in"]["gated_at_create"] is True and cpu["burn_in"] is None
    assert train["burn_in"]["note"].startswith("create holds each new node (taint fmcluster.io/burn-in=pending)")


def test_long_on_a_one_day_capacity_block_is_a_share_of_the_rental(tmp_path: Path) -> None:
    """4 nodes, long: 900 s + 0 to 1 s + 3 to 7 rounds x 27.80582 s (83.41746 to 194.64074 s) = 983.41746 to
    1,095.64074 s; on a 24 h block, 1,095.64074 / 86,400 = 1.268%."""
    from fmcluster.pricing.capacity_blocks import BlockPrice

    path = _write(tmp_path, [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 4, "burn_in": "long",
                              "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}}])
    spec = load_spec(path).spec
    blocks = {"train": BlockPrice(31.464, "a bought block", 24)}
    figures = plan_report(spec, LivePriceBook("us-east-1", {}, blocks)).queues[0].burn_in
    assert figures is not None
    assert (figures.level, figures.default) == ("long", False)
    assert (figures.low_seconds, figures.high_seconds) == (pytest.approx(983.41746), pytest.approx(1095.64074))
    assert figures.block_hours == 24
    assert figures.block_fraction == pytest.approx(0.0126810271)
    assert figures.runs[-1].endswith("from 3 nodes, rounds of larger runs that would narrow a slow one to its node "
                                     "or link")

    shown = Console(width=200, record=True, force_terminal=False, color_system=None)
    shown.print(render(plan_report(spec, LivePriceBook("us-east-1", {}, blocks))))
    assert "  train: long on 4 nodes: expected 16.4 min to 18.3 min; on its 1-day Capacity Block: up to 1.3% of " \
        "the rental" in shown.export_text()

    # offline the block's length is unknown, and said
    offline = plan_report(spec, PriceBook("us-east-1")).queues[0].burn_in
    assert offline is not None and offline.block_hours is None and offline.block_fraction is None
    assert "--live-prices" in (offline.block_note or "")
    code, text = _run(path, as_json=False)
    assert code == 0 and "the Capacity Block's length is not read offline" in text


def test_trainium_time_is_unknown_not_guessed_and_cpu_has_none(tmp_path: Path) -> None:
    path = _write(tmp_path, [{"name": "trn", "instance_type": "trn2.48xlarge", "nodes": 2},
                             {"name": "cpu", "instance_type": "c5.xlarge", "nodes": 2}])
    code, out = _run(path, as_json=True)
    assert code == 0
    trn, cpu = json.loads(out)["queues"]
    assert trn["burn_in"]["level"] == "quick"
    assert (trn["burn_in"]["low_seconds"], trn["burn_in"]["high_seconds"]) == (None, None)
    assert trn["burn_in"]["unknown"] == ["accelerator diagnostics"]
    assert "the Neuron device checks" in trn["burn_in"]["runs"]
    assert cpu["burn_in"] is None
    code, text = _run(path, as_json=False)
    assert "  trn: quick (the default) on 2 nodes: time unknown: no published figure for accelerator diagnostics" \
        in text
    assert "  cpu:" not in text.split("Burn-in:")[1].split("Storage")[0]


def test_a_spec_floor_on_a_type_without_a_published_run(tmp_path: Path) -> None:
    """p5en has no published all_reduce_perf run: its all-reduce time is unknown, its floor is the spec's."""
    path = _write(tmp_path, [{"name": "train", "instance_type": "p5en.48xlarge", "nodes": 8,
                              "burn_in": {"floors": {2: 300}}}])
    figures = plan_report(load_spec(path).spec, PriceBook("us-east-1")).queues[0].burn_in
    assert figures is not None and figures.level == "standard" and figures.default
    assert figures.unknown == ["all_reduce_perf, 4 to 8 rounds of 20 iterations"]
    assert figures.low_seconds is None
    assert [(f.nodes, f.gb_s, f.source) for f in figures.floors] == [(2, 300.0, "spec")]


def test_live_prices_read_a_bought_blocks_length_from_ec2(tmp_path: Path, sandbox) -> None:
    """A two-day block seeded in the sandbox: fmcluster's DescribeCapacityReservations read gives 48 h."""
    start = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(days=1)
    rid = sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "instance_type": "p5.48xlarge", "availability_zone": "us-east-1a", "count": 2, "type": "capacity-block",
        "start": start.isoformat(), "end": (start + dt.timedelta(days=2)).isoformat(), "region": "us-east-1",
        "reservation_id": "cr-" + uuid.uuid4().hex[:17]})["reservation_id"]
    path = _write(tmp_path, [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2,
                              "capacity": {"type": "capacity-block", "reservation_id": rid}}])
    spec = load_spec(path).spec
    blocks = fetch_capacity_block_prices(spec, "us-east-1", ec2=sandbox.client("ec2"))
    assert blocks["train"] is not None and blocks["train"].hours == 48
    figures = plan_report(spec, LivePriceBook("us-east-1", {}, blocks)).queues[0].burn_in
    assert figures is not None and figures.block_hours == 48
    # 132.122328 s (the 2-node standard above) over 48 x 3,600 s
    assert figures.block_fraction == pytest.approx(0.000764597)
