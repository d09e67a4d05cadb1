"""Issue 35: ``fmcluster smoke`` on a Slurm cluster (PCS, ParallelCluster) cancels its job on SIGTERM and SIGHUP as
on Ctrl-C, over the same ssh path, and exits 128 + the signal (143, 129; Ctrl-C gives 130), as on EKS
(fmcluster/backends/smoke/termination.py). Against a real one-host Slurm (tests/fixtures/slurm.py) whose partition is
down, so the job stays PENDING until the signal; the cluster is only a local record reached with --host, so no AWS
call."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.slurm import running

from fmcluster.state.store import StateStore

ROOT = Path(__file__).resolve().parents[3]
NAME = "smoke-signals"


@pytest.fixture(scope="module")
def down_slurm(tmp_path_factory):
    with running(tmp_path_factory.mktemp("slurm"), "gpu") as slurm:  # the quickstart's first queue
        _scontrol(slurm, "update", "PartitionName=gpu", "State=DOWN")  # jobs queue, none starts
        yield slurm


def _scontrol(slurm, *args: str) -> str:
    out = subprocess.run(["scontrol", *args], env={**os.environ, "SLURM_CONF": str(slurm.slurm_conf)},
                         capture_output=True, text=True, check=True)
    return out.stdout


def _smoke_jobs(slurm) -> dict[str, str]:
    """Job id -> state of every fmcluster-smoke job Slurm knows (MinJobAge keeps ended ones for 10 minutes)."""
    text = _scontrol(slurm, "show", "job", "--oneliner")
    return {m["id"]: m["state"] for m in re.finditer(r"JobId=(?P<id>\d+) JobName=fmcluster-smoke\b.*?"
                                                     r"JobState=(?P<state>\S+)", text)}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_cancels_the_slurm_job_and_exits_like_ctrl_c(down_slurm, tmp_path, monkeypatch, signum):
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    spec = (ROOT / "configs" / "quickstart-pcs.yaml").read_text().replace("name: quickstart-pcs", f"name: {NAME}")
    assert f"name: {NAME}" in spec
    StateStore().save_cluster(NAME, "us-east-1", "pcs", spec, None, "ACTIVE")
    env = {**os.environ, "NO_COLOR": "1"}
    before = set(_smoke_jobs(down_slurm))
    command = [str(Path(sys.executable).parent / "fmcluster"), "smoke", NAME, "--host", down_slurm.host,
               "--user", down_slurm.user, "--identity", str(down_slurm.identity), "--timeout", "3"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not set(_smoke_jobs(down_slurm)) - before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        [job] = set(_smoke_jobs(down_slurm)) - before
        assert _smoke_jobs(down_slurm)[job] == "PENDING"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # 128 + the signal's number, as Ctrl-C's 130 is 128 + SIGINT; the job cancelled before the process ended
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert f"ended by {signal.Signals(signum).name}" in err and "Traceback" not in err, err
    assert _smoke_jobs(down_slurm)[job] == "CANCELLED", err
