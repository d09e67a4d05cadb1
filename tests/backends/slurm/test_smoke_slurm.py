"""``fmcluster smoke`` and ``fmcluster ssh`` against a real Slurm: a one-host cluster with munge, slurmctld,
slurmd and an sshd on loopback (tests/fixtures/slurm.py). The cluster's spec comes from a sandbox create; the
login host is given with --host. The job is submitted, waited for, collected and parsed for real; this machine
has no GPU, EFA or nccl-tests, so those checks report "absent" and the command exits 1."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fixtures.lifecycle import PcsCli, _ok, cli_fixture
from fixtures.slurm import running

cli = cli_fixture(PcsCli)


@pytest.fixture(scope="module")
def local_slurm(tmp_path_factory):
    with running(tmp_path_factory.mktemp("slurm"), "gpu") as slurm:  # the quickstart's first queue
        yield slurm


def _access(slurm) -> list[str]:
    return ["--host", slurm.host, "--user", slurm.user, "--identity", str(slurm.identity)]


def test_smoke_runs_a_real_job_and_reports_what_is_absent(cli, local_slurm):
    _ok(cli.create())
    result = cli.run("smoke", cli.name, *_access(local_slurm), "--json", timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    output = Path(report["output_file"])
    try:
        assert report["ok"] is False
        assert report["queue"] == "gpu" and report["instance_type"] == "p5.4xlarge" and report["nodes"] == 1
        assert report["job_state"] == "COMPLETED"
        checks = {c["name"]: c for c in report["checks"]}
        assert checks["job"]["status"] == "passed"
        assert checks["nodes"]["status"] == "passed" and checks["nodes"]["found"] == 1
        assert checks["nccl_all_reduce"]["status"] == "absent"
        assert "all_reduce_perf not found" in checks["nccl_all_reduce"]["detail"]
        assert checks["efa_bandwidth"]["status"] == "skipped"  # one node: all-reduce never reaches EFA
        [node] = report["node_checks"]
        by_name = {c["name"]: c for c in node["checks"]}
        assert by_name["gpus"]["status"] == "absent" and by_name["gpus"]["expected"] == 1  # p5.4xlarge: 1 H100
        assert "nvidia-smi not found" in by_name["gpus"]["detail"]
        assert by_name["efa_provider"]["status"] == "absent"
        assert by_name["efa_devices"]["status"] == "absent" and by_name["efa_devices"]["expected"] == 1
        # the job really ran on the node: its output file holds the facts it printed
        text = output.read_text()
        assert f"FMCLUSTER {node['node']} gpus absent" in text
        assert f"job {report['job_id']}" in result.stderr  # progress went to stderr
    finally:
        output.unlink(missing_ok=True)

    table = cli.run("smoke", cli.name, *_access(local_slurm), timeout=300)
    assert table.returncode == 1, table.stderr
    rows = table.stdout.splitlines()
    assert any(line.split()[2:4] == ["gpus", "absent"] for line in rows if len(line.split()) > 3), table.stdout
    assert "check(s) failed" in table.stdout
    for line in rows:
        if "fmcluster-smoke-" in line:
            Path(line.split(" in ", 1)[1].split()[0]).unlink(missing_ok=True)

    _burn_in_holds_checks_and_drains_the_node(cli, local_slurm)
    _ok(cli.destroy())


def _scontrol(slurm, *args: str) -> str:
    env = {**os.environ, "SLURM_CONF": str(slurm.slurm_conf)}
    return subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True, check=True).stdout


def _burn_in_holds_checks_and_drains_the_node(cli, local_slurm) -> None:
    """``fmcluster burn-in`` end to end on the real Slurm (issue 37 item 5): the queue's level is its default, quick
    (p5.4xlarge has no published 2-node all-reduce floor); the node is held in a maintenance reservation, checked by
    a job in it, found without nvidia-smi, fi_info or dcgmi, and drained with a reason naming the check; nothing is
    left held."""
    result = cli.run("burn-in", cli.name, *_access(local_slurm), "--json", timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    try:
        assert (report["queue"], report["level"], report["passed"]) == ("gpu", "quick", False)
        [node] = report["nodes"]
        assert node["node"] == local_slurm.node and node["state"] == "failed"
        statuses = {c["name"]: c["status"] for c in node["checks"]}
        assert statuses == {"gpus": "absent", "efa": "absent", "dcgm": "absent"}
        assert report["nccl"]["runs"] == [] and report["nccl"]["note"] == "level quick runs no all-reduce"
        assert "fmcluster-burn-in-gpu" in result.stderr  # the hold was said while it happened
        shown = _scontrol(local_slurm, "show", "node", local_slurm.node)
        assert "DRAIN" in shown and "Reason=fmcluster burn-in: gpus:" in shown, shown
        assert "fmcluster-burn-in-gpu" not in _scontrol(local_slurm, "show", "reservation")
    finally:
        _scontrol(local_slurm, "update", f"NodeName={local_slurm.node}", "State=RESUME")


def test_ssh_runs_a_command_on_the_login_host(cli, local_slurm):
    _ok(cli.create())
    result = _ok(cli.run("ssh", cli.name, *_access(local_slurm), "--", "sinfo", "-h", "-o", "%P:%D"))
    assert result.stdout.strip() == "gpu*:1"
    printed = _ok(cli.run("ssh", cli.name, *_access(local_slurm), "--print")).stdout
    assert f"-p {local_slurm.ssh_port}" in printed and printed.strip().endswith(f"{local_slurm.user}@127.0.0.1")
    _ok(cli.destroy())
