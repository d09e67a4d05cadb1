"""Issue 35 part 7: on PCS, a p6e-gb200 queue bought any way but as an UltraServer Capacity Block is refused with
its reason, as on EKS. Facts: the PCS user guide's "Configure UltraServer instances" asks for "a compute node group
using UltraServer instances with a Capacity Block"; the EKS guide's "Use P6e-GB200 UltraServers with Amazon EKS":
p6e-gb200.36xlarge is available only as P6e-GB200 UltraServers, through EC2 Capacity Blocks for ML."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.ultraserver import BLOCK, run_plan

SPEC = """\
name: gb200-pcs
backend: pcs
region: us-east-1
head_node: {instance_type: m7g.2xlarge}
queues:
  - name: train
    instance_type: p6e-gb200.36xlarge
    nodes: 9
    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0, ultraserver: u-p6e-gb200x36}
"""


@pytest.mark.parametrize("capacity", ["{type: spot}", "{type: on-demand}",
                                      "{type: reservation, reservation_id: cr-0123456789abcdef0}"])
def test_gb200_bought_otherwise_is_refused_on_pcs(tmp_path: Path, monkeypatch, capsys, capacity: str) -> None:
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace(BLOCK, f"capacity: {capacity}"))
    code, err = run_plan(path, monkeypatch, capsys)
    kind = capacity.split()[1].rstrip("},")
    assert code == 2 and "spec.yaml:9:22: queues[0].capacity.type" in err, err
    text = " ".join(err.split())
    assert "only inside UltraServers, bought as Capacity Blocks" in text and f"not as {kind}" in text, err
    assert "Traceback" not in err


def test_gb200_in_an_ultraserver_capacity_block_plans_on_pcs(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    code, err = run_plan(path, monkeypatch, capsys)
    assert code == 0, err
