"""End-to-end: the installed ``fmcluster`` command, in subprocesses, against the sandbox (PCS backend).

Each test has its own ``FMCLUSTER_HOME`` (the CLI's state) and its own cluster name; the sandbox keeps its
own home. Faults are reset after every test by conftest's autouse fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = REPO_ROOT / "configs" / "quickstart-pcs.yaml"
TAG = "fmcluster:cluster"
# create takes ~4 s with these (cluster 2 s, then node groups 1 s, then queues 0.5 s, plus polling)
SLOW = {"latency": {"pcs.cluster": 2.0, "pcs.compute_node_group": 1.0, "pcs.queue": 0.5}}


def _fmcluster() -> list[str]:
    exe = Path(sys.executable).with_name("fmcluster")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("fmcluster")
    return [found] if found else [sys.executable, "-m", "fmcluster"]


class Cli:
    """Runs ``fmcluster`` with a private state home, pointed at the sandbox."""

    def __init__(self, sandbox, tmp_path: Path):
        self.sandbox = sandbox
        self.name = f"e2e-{uuid.uuid4().hex[:8]}"
        self.home = tmp_path / "state"
        self.env = {**os.environ, **sandbox.env, "FMCLUSTER_HOME": str(self.home), "NO_COLOR": "1",
                    "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
        data = yaml.safe_load(QUICKSTART.read_text())
        data["name"] = self.name
        self.spec = tmp_path / "spec.yaml"
        self.spec.write_text(yaml.safe_dump(data, sort_keys=False))

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([*_fmcluster(), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([*_fmcluster(), *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def create(self) -> subprocess.CompletedProcess:
        return self.run("create", str(self.spec), "--yes")

    def destroy(self) -> subprocess.CompletedProcess:
        return self.run("destroy", self.name, "--yes")

    # what the sandbox holds for this cluster ------------------------------------------------------
    def inventory(self) -> dict:
        ec2 = self.sandbox.client("ec2")
        pcs = self.sandbox.client("pcs")
        tag = [{"Name": f"tag:{TAG}", "Values": [self.name]}]
        instances = [i for r in ec2.describe_instances(Filters=tag)["Reservations"] for i in r["Instances"]
                     if i["State"]["Name"] not in ("terminated", "shutting-down")]
        sgs = ec2.describe_security_groups(Filters=tag)["SecurityGroups"]
        lts = ec2.describe_launch_templates(Filters=tag)["LaunchTemplates"]
        clusters = [c for c in pcs.list_clusters()["clusters"] if c["name"] == self.name]
        groups, queues = [], []
        for cluster in clusters:
            groups += pcs.list_compute_node_groups(clusterIdentifier=cluster["id"])["computeNodeGroups"]
            queues += pcs.list_queues(clusterIdentifier=cluster["id"])["queues"]
        return {"instances": instances, "security_groups": sgs, "launch_templates": lts, "clusters": clusters,
                "node_groups": groups, "queues": queues}

    def assert_nothing_left(self) -> None:
        inv = self.inventory()
        left = {kind: items for kind, items in inv.items() if items}
        assert not left, f"still present for {self.name}: {left}"

    def assert_exactly_one_of_each(self) -> None:
        inv = self.inventory()
        assert len(inv["clusters"]) == 1, inv["clusters"]
        group_names = Counter(g["name"] for g in inv["node_groups"])
        assert group_names and all(n == 1 for n in group_names.values()), group_names
        assert set(group_names) == {"login", "gpu", "burst"}, group_names
        lt_names = Counter(t["LaunchTemplateName"] for t in inv["launch_templates"])
        assert lt_names and all(n == 1 for n in lt_names.values()), lt_names
        assert len(inv["security_groups"]) == 1, [g["GroupName"] for g in inv["security_groups"]]
        queue_names = Counter(q["name"] for q in inv["queues"])
        assert all(n == 1 for n in queue_names.values()), queue_names


def _wait_for_line(proc: subprocess.Popen, pattern: str, timeout: float = 60) -> list[str]:
    """Read the child's stderr until a line contains *pattern*; return the lines read."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if pattern in line:
            return lines
    pytest.fail(f"never saw {pattern!r} on stderr:\n{''.join(lines)}")


def _ok(result: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert result.returncode == code, (
        f"exit {result.returncode} (wanted {code})\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture
def cli(sandbox, tmp_path):
    cli = Cli(sandbox, tmp_path)
    yield cli
    sandbox.faults({"reset": True})
    # best-effort cleanup so one failing test leaves nothing for the next
    if cli.inventory()["clusters"] or (cli.home / "state.db").exists():
        cli.run("destroy", cli.name, "--yes")


# 1 ------------------------------------------------------------------------------------------------
def test_create_status_scale_destroy(cli):
    _ok(cli.create())

    table = _ok(cli.run("status", cli.name))
    assert cli.name in table.stdout + table.stderr
    overview = _ok(cli.run("status"))
    assert cli.name in overview.stdout + overview.stderr

    report = json.loads(_ok(cli.run("status", cli.name, "--json")).stdout)
    for key in ("name", "backend", "region", "status", "queues", "resources"):
        assert key in report, report
    assert report["name"] == cli.name
    assert report["backend"] == "pcs"
    assert report["region"] == "us-east-1"
    assert report["status"] == "ACTIVE"
    queues = {q["name"]: q for q in report["queues"]}
    assert set(queues) == {"gpu", "burst"}
    for queue in queues.values():
        for key in ("name", "instance_type", "min", "max", "status"):
            assert key in queue, queue
        assert queue["instance_type"] == "p5.4xlarge"
    assert (queues["gpu"]["min"], queues["gpu"]["max"]) == (1, 1)
    assert (queues["burst"]["min"], queues["burst"]["max"]) == (0, 2)
    assert report["resources"]
    for item in report["resources"]:
        for key in ("type", "id", "status"):
            assert key in item, item
    assert {"cluster", "compute_node_group", "queue"} <= {r["type"] for r in report["resources"]}

    _ok(cli.run("scale", cli.name, "burst=1:3", "--yes"))
    report = json.loads(_ok(cli.run("status", cli.name, "--json")).stdout)
    burst = next(q for q in report["queues"] if q["name"] == "burst")
    assert (burst["min"], burst["max"]) == (1, 3), burst

    _ok(cli.destroy())
    cli.assert_nothing_left()
    # forgotten locally too
    missing = cli.run("status", cli.name)
    assert missing.returncode == 1


# 2 ------------------------------------------------------------------------------------------------
def test_sigkill_during_create_then_rerun_converges(cli, sandbox):
    sandbox.faults(SLOW)
    # kill while the PCS cluster is CREATING, then (second run, resuming) while node groups are CREATING
    for marker, delay in (("cluster:" + cli.name, 1.0), ("compute_node_group:gpu", 0.3)):
        proc = cli.popen("create", str(cli.spec), "--yes")
        _wait_for_line(proc, marker)
        time.sleep(delay)
        assert proc.poll() is None, f"create finished before the kill: {proc.communicate()}"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    sandbox.faults({"reset": True})

    _ok(cli.create())
    cli.assert_exactly_one_of_each()
    _ok(cli.destroy())
    cli.assert_nothing_left()


# 3 ------------------------------------------------------------------------------------------------
def test_sigint_during_create_exits_130_and_says_how_to_resume(cli, sandbox):
    sandbox.faults(SLOW)
    proc = cli.popen("create", str(cli.spec), "--yes")
    seen = _wait_for_line(proc, "cluster:" + cli.name)  # the engine is running: the PCS cluster is CREATING
    time.sleep(1.0)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    stdout, rest = proc.communicate(timeout=60)
    stderr = "".join(seen) + rest
    assert proc.returncode == 130, f"exit {proc.returncode}\n{stdout}\n{stderr}"
    assert "Traceback" not in stderr, stderr
    assert "fmcluster create" in stderr, stderr
    sandbox.faults({"reset": True})

    _ok(cli.create())
    cli.assert_exactly_one_of_each()
    _ok(cli.destroy())
    cli.assert_nothing_left()


# 4 ------------------------------------------------------------------------------------------------
def test_concurrent_command_is_refused_naming_the_lock_holder(cli, sandbox):
    sandbox.faults(SLOW)
    first = cli.popen("create", str(cli.spec), "--yes")
    try:
        # wait until the first create holds the lock (it records the cluster before taking longer steps)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            db = cli.home / "state.db"
            if db.exists():
                import sqlite3

                with sqlite3.connect(db, timeout=10) as conn:
                    try:
                        if conn.execute("SELECT 1 FROM locks WHERE cluster=?", (cli.name,)).fetchone():
                            break
                    except sqlite3.OperationalError:
                        pass
            time.sleep(0.1)
        else:
            pytest.fail("the first create never took the lock")
        assert first.poll() is None

        second = cli.destroy()
        assert second.returncode == 1, f"{second.stdout}\n{second.stderr}"
        assert "Traceback" not in second.stderr
        assert str(first.pid) in second.stderr, second.stderr
        assert "fmcluster create" in second.stderr, second.stderr

        again = cli.create()
        assert again.returncode == 1, f"{again.stdout}\n{again.stderr}"
        assert str(first.pid) in again.stderr, again.stderr
    finally:
        stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, f"{stdout}\n{stderr}"
    sandbox.faults({"reset": True})
    _ok(cli.destroy())
    cli.assert_nothing_left()


# 5 ------------------------------------------------------------------------------------------------
def test_twenty_percent_throttling_still_completes(cli, sandbox):
    sandbox.faults({"throttle_rate": {"*": 0.2}, "seed": 7})
    _ok(cli.create())
    cli.assert_exactly_one_of_each()
    _ok(cli.destroy())
    sandbox.faults({"reset": True})
    cli.assert_nothing_left()


# 6 ------------------------------------------------------------------------------------------------
def test_insufficient_capacity_fails_clearly_and_destroy_cleans_up(cli, sandbox):
    sandbox.faults({"insufficient_capacity": ["p5.4xlarge"]})
    result = _ok(cli.create(), code=1)
    assert "InsufficientInstanceCapacity" in result.stderr + result.stdout, result.stderr
    sandbox.faults({"reset": True})

    _ok(cli.destroy())
    cli.assert_nothing_left()


# 7 ------------------------------------------------------------------------------------------------
def test_unknown_cluster(cli):
    _ok(cli.create())
    status = _ok(cli.run("status", "nope"), code=1)
    assert "nope" in status.stderr
    assert "Known clusters" in status.stderr and cli.name in status.stderr, status.stderr
    _ok(cli.run("destroy", "nope", "--yes"), code=1)
    _ok(cli.destroy())
    status = _ok(cli.run("status", "nope"), code=1)
    assert "Known clusters" in status.stderr
