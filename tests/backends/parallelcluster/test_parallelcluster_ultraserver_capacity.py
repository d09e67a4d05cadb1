"""Issue 35: on ParallelCluster, as on PCS and EKS, a p6e-gb200 queue bought any way but as an UltraServer Capacity
Block is refused at load time with its reason, before any AWS call. Facts: ParallelCluster's user guide, "Support
NVIDIA-IMEX with p6e-gb200 instance": p6e-gb200.36xlarge instances are available only through P6e-GB200
UltraServers, bought through EC2 Capacity Blocks for ML (u-p6e-gb200x72: 18 instances)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.ultraserver import BLOCK, run_plan

SPEC = """\
name: gb200-pc
backend: parallelcluster
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
def test_gb200_bought_otherwise_is_refused_on_parallelcluster(tmp_path: Path, monkeypatch, capsys,
                                                              capacity: str) -> None:
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace(BLOCK, f"capacity: {capacity}"))
    code, err = run_plan(path, monkeypatch, capsys)
    kind = capacity.split()[1].rstrip("},")
    assert code == 2 and "spec.yaml:9:22: queues[0].capacity.type" in err, err
    text = " ".join(err.split())
    assert "only inside UltraServers, bought as Capacity Blocks" in text and f"not as {kind}" in text, err
    assert "Support NVIDIA-IMEX with p6e-gb200 instance" in text, err
    assert "Traceback" not in err


def test_gb200_in_an_ultraserver_capacity_block_plans_on_parallelcluster(tmp_path: Path, monkeypatch,
                                                                         capsys) -> None:
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    code, err = run_plan(path, monkeypatch, capsys)
    assert code == 0, err


def test_create_refuses_it_before_any_aws_call(tmp_path: Path) -> None:
    """create against an endpoint where nothing listens: the spec's refusal, not a connection error, and no state."""
    home = tmp_path / "state"
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace(BLOCK, "capacity: {type: on-demand}"))
    command = [str(Path(sys.executable).parent / "fmcluster"), "--endpoint-url", "http://127.0.0.1:9", "create",
               str(path), "--yes"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=tmp_path,
                            env={**os.environ, "FMCLUSTER_HOME": str(home), "NO_COLOR": "1"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {path}:9:22: queues[0].capacity.type: EC2 sells p6e-gb200.36xlarge "
                                    "only inside UltraServers"), result.stderr
    assert not home.exists()
