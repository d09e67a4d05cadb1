"""Shared parts of the end-to-end lifecycle tests: the installed ``fmcluster`` command, run in subprocesses
against the session's sandbox, each test with its own ``FMCLUSTER_HOME`` (the CLI's state) and cluster name.

``PcsCli`` and ``PclusterCli`` add what the sandbox holds for a cluster of that backend;
``cli_fixture(cls)`` makes a test file's ``cli`` fixture, which resets faults and destroys what a failing
test left behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

try:
    from tiers import E2E_FIXTURE_ATTR
except ImportError:  # tests/ imported as a package
    from tests.tiers import E2E_FIXTURE_ATTR

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS = REPO_ROOT / "configs"


def _fmcluster() -> list[str]:
    exe = Path(sys.executable).with_name("fmcluster")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("fmcluster")
    return [found] if found else [sys.executable, "-m", "fmcluster"]


def _ok(result: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert result.returncode == code, (
        f"exit {result.returncode} (wanted {code})\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
    assert "Traceback" not in result.stderr, result.stderr
    return result


def lock_is_held(path: Path) -> bool:
    """Whether some process holds the flock on a cluster's lock file (a shared lock attempt is refused)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _wait_for_line(proc: subprocess.Popen, pattern: str | re.Pattern[str], timeout: float = 60) -> list[str]:
    """Read the child's stderr until a line contains *pattern* (or, compiled, matches it); return the lines read."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if (pattern.search(line) if isinstance(pattern, re.Pattern) else pattern in line):
            return lines
    pytest.fail(f"never saw {pattern!r} on stderr:\n{''.join(lines)}")


class Cli:
    """Runs ``fmcluster`` with a private state home, pointed at the sandbox, on a copy of a quickstart spec."""

    quickstart: Path = CONFIGS / "quickstart-pcs.yaml"
    name_prefix = "e2e"
    timeout: float = 120

    def __init__(self, sandbox, tmp_path: Path):
        self.sandbox = sandbox
        self.name = f"{self.name_prefix}-{uuid.uuid4().hex[:8]}"
        self.home = tmp_path / "state"
        self.env = {**os.environ, **sandbox.env, "FMCLUSTER_HOME": str(self.home), "NO_COLOR": "1",
                    "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
        data = yaml.safe_load(self.quickstart.read_text())
        data["name"] = self.name
        self.spec = tmp_path / "spec.yaml"
        self.spec.write_text(yaml.safe_dump(data, sort_keys=False))

    def run(self, *args: str, timeout: float | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*_fmcluster(), *args], env=env or self.env, capture_output=True, text=True,
                              timeout=timeout or self.timeout, stdin=subprocess.DEVNULL)

    def run_in_process(self, *args: str) -> subprocess.CompletedProcess:
        """``fmcluster ARGS`` through its entry point (``fmcluster.cli.main``) in this process, with this Cli's
        environment and state: for a command whose answer is what a test checks, not how the installed command
        starts. A subprocess pays ~0.7 s of CPU importing fmcluster and boto3 before its first call; the suite
        runs hundreds. What the entry point changes in the process (the environment, the AWS target, pcluster's
        cached clients) is put back afterwards."""
        import atexit
        import contextlib
        import io

        from fmcluster import aws, cli

        try:
            from pcluster_fixture import reset_pcluster_clients
        except ImportError:  # tests/ imported as a package
            from tests.pcluster_fixture import reset_pcluster_clients

        saved_env, saved_argv, saved_target = dict(os.environ), sys.argv, aws.target()
        out, err = io.StringIO(), io.StringIO()
        os.environ.clear()
        os.environ.update(self.env)
        sys.argv = ["fmcluster", *args]
        reset_pcluster_clients()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    cli.main()
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            atexit.unregister(cli._report_api_calls)
            os.environ.clear()
            os.environ.update(saved_env)
            sys.argv = saved_argv
            aws._target = saved_target
            aws._sessions.clear()  # sessions made for this Cli's endpoint
            reset_pcluster_clients()
        return subprocess.CompletedProcess(["fmcluster", *args], code, out.getvalue(), err.getvalue())

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([*_fmcluster(), *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def create(self, *extra: str) -> subprocess.CompletedProcess:
        return self.run("create", str(self.spec), "--yes", *extra)

    def destroy(self) -> subprocess.CompletedProcess:
        return self.run("destroy", self.name, "--yes")

    def status(self) -> dict:
        """``status NAME --json``'s answer, in this process (``run_in_process``): the tests that check how the
        installed ``status`` runs call ``run("status", ...)``."""
        return json.loads(_ok(self.run_in_process("status", self.name, "--json")).stdout)

    def has_cloud_resources(self) -> bool:
        """Whether the sandbox still holds the cluster (the fixture then destroys it)."""
        return False

    def assert_plan_and_status_cost_agree(self) -> float:
        """The one cost model, end to end on a cluster the test made: ``plan --json``'s ``usd_per_hour`` is
        ``status --json``'s ``usd_per_hour_max``, and the text status shows it (issue 20: a Capacity Block cluster
        showed $95.52/h in ``plan`` and nothing in ``status``). Returns the figure. All three run in this process
        (``run_in_process``): the cluster came from the installed command."""
        planned = json.loads(_ok(self.run_in_process("plan", str(self.spec), "--json")).stdout)["usd_per_hour"]
        assert planned, f"plan priced nothing for {self.name}"
        status = self.status()
        assert status["usd_per_hour_max"] == planned, status["cost_basis"]
        shown = _ok(self.run_in_process("status", self.name)).stdout
        assert f"${planned:,.2f}/hour at the queues' maximum" in shown, shown
        return planned

    def destroy_stops_billing(self, usd_per_hour: float) -> subprocess.CompletedProcess:
        """``destroy``, which says what it stops billing, from the same model as ``plan`` and ``status``."""
        destroyed = _ok(self.destroy())
        assert f"stops billing of up to ~${usd_per_hour:,.2f}/hour" in destroyed.stderr, destroyed.stderr
        return destroyed

    def state_knows(self) -> bool:
        """Whether this test's state still records the cluster: ``create`` records it before it makes anything,
        and a clean ``destroy`` forgets it. A read of the local file, no AWS call."""
        path = self.home / "state.db"
        if not path.exists():
            return False
        from fmcluster.state import StateStore

        store = StateStore(path, readonly=True)
        try:
            return store.cluster(self.name) is not None
        finally:
            store.close()


class PcsCli(Cli):
    quickstart = CONFIGS / "quickstart-pcs.yaml"
    tag = "fmcluster:cluster"

    def inventory(self) -> dict:
        ec2 = self.sandbox.client("ec2")
        pcs = self.sandbox.client("pcs")
        tag = [{"Name": f"tag:{self.tag}", "Values": [self.name]}]
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

    def has_cloud_resources(self) -> bool:
        return bool(self.inventory()["clusters"])


class PclusterCli(Cli):
    quickstart = CONFIGS / "quickstart-parallelcluster.yaml"
    name_prefix = "e2e-pc"
    timeout = 180
    cluster_tag = "parallelcluster:cluster-name"

    def stacks(self) -> list[dict]:
        """Live (not DELETE_COMPLETE) CloudFormation stacks named after the cluster."""
        cfn = self.sandbox.client("cloudformation")
        summaries = [s for page in cfn.get_paginator("list_stacks").paginate() for s in page["StackSummaries"]]
        return [s for s in summaries if s["StackName"] == self.name and s["StackStatus"] != "DELETE_COMPLETE"]

    def instances(self) -> list[dict]:
        ec2 = self.sandbox.client("ec2")
        reservations = ec2.describe_instances(Filters=[
            {"Name": f"tag:{self.cluster_tag}", "Values": [self.name]},
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])
        return [i for r in reservations["Reservations"] for i in r["Instances"]]

    def assert_nothing_left(self) -> None:
        assert self.stacks() == [], self.stacks()
        cfn = self.sandbox.client("cloudformation")
        try:
            described = cfn.describe_stacks(StackName=self.name)["Stacks"]
        except cfn.exceptions.ClientError as exc:
            assert "does not exist" in str(exc), exc
        else:
            assert all(s["StackStatus"] == "DELETE_COMPLETE" for s in described), described
        assert self.instances() == [], [i["InstanceId"] for i in self.instances()]

    def wait_until_gone(self, timeout: float = 20) -> None:
        """Stack deletion finishes STACK_DELETE_SECONDS after the API call; allow for that."""
        deadline = time.monotonic() + timeout
        while self.stacks() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assert_nothing_left()

    def has_cloud_resources(self) -> bool:
        return bool(self.stacks())


def cli_fixture(cli_class: type[Cli]):
    """A ``cli`` fixture for *cli_class*: after the test, reset faults and destroy whatever is left.

    The destroy (a subprocess, seconds) runs only when something may be left: the state still records the cluster
    (``create`` records it before making anything; a clean ``destroy`` forgets it) or the sandbox holds it (a test
    that deleted its state file). Most tests end with a clean destroy of their own, and then nothing runs."""

    def cli(sandbox, tmp_path):
        runner = cli_class(sandbox, tmp_path)
        yield runner
        sandbox.faults({"reset": True})
        # best-effort cleanup so one failing test leaves nothing for the next
        if runner.state_knows() or runner.has_cloud_resources():
            runner.run("destroy", runner.name, "--yes")

    setattr(cli, E2E_FIXTURE_ATTR, True)  # tests/tiers.py marks every test that uses it e2e
    return pytest.fixture(cli)
