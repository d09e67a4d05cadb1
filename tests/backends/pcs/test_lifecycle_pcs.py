"""End-to-end: the installed ``fmcluster`` command, in subprocesses, against the sandbox (PCS backend).

Each test has its own ``FMCLUSTER_HOME`` (the CLI's state) and its own cluster name; the sandbox keeps its
own home. Faults are reset after every test by conftest's autouse fixture.

Steps whose answer is what a test checks (a re-run after a kill, the destroy after a failed create, the reads
between) run through the entry point in this process (``create_here``, ``destroy_here``, ``run_in_process``;
fixtures/in_process.py); what only the installed command shows (its exit status, a signal, no traceback) stays
a subprocess.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter

import pytest
from fixtures.lifecycle import PcsCli, _ok, _wait_for_line, cli_fixture, lock_is_held, requests_of

# create takes ~4 s with these (cluster 2 s, then node groups 1 s, then queues 0.5 s, plus polling)
SLOW = {"latency": {"pcs.cluster": 2.0, "pcs.compute_node_group": 1.0, "pcs.queue": 0.5}}


class Cli(PcsCli):
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


cli = cli_fixture(Cli)


# 1 ------------------------------------------------------------------------------------------------
def _assert_each_resource_read_once(sent: Counter, what: str) -> None:
    twice = {key: n for key, n in sent.items() if n > 1}
    assert not twice, f"{what} sent the same request more than once: {twice}"
    by_operation = Counter()
    for (operation, _), n in sent.items():
        by_operation[operation] += n
    # configs/quickstart-pcs.yaml: queues gpu and burst, on node groups gpu, burst and login (the login node's):
    # one Get each, whichever of describe, discovery or the plan asks for it first (by id or by name).
    assert (by_operation["pcs.GetCluster"], by_operation["pcs.GetComputeNodeGroup"],
            by_operation["pcs.GetQueue"]) == (1, 3, 2), (what, by_operation)
    # The nodes' role, and the budget guard's (looked for by name on every cluster, so that destroy finds a guard
    # a spec has dropped); the guard's schedule group likewise (fmcluster/aws/guard.py scan_guard).
    assert (by_operation["iam.GetRole"], by_operation["iam.GetInstanceProfile"]) == (2, 1), (what, by_operation)
    assert by_operation["scheduler.GetScheduleGroup"] == 1, (what, by_operation)
    # Discovery lists the security group and the three launch templates; the plan's reads by id are served from
    # those lists.
    assert (by_operation["ec2.DescribeSecurityGroups"], by_operation["ec2.DescribeLaunchTemplates"]) == (1, 1), \
        (what, by_operation)


def test_create_status_scale_destroy(cli, monkeypatch):
    _ok(cli.create())

    # status and create's plan read each resource once (in this process: each request is seen as sent)
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.status import status

    _assert_each_resource_read_once(requests_of(cli, monkeypatch, lambda: status(cli.name, refresh=False)),
                                    "status")
    rerun = requests_of(cli, monkeypatch, lambda: create(load_spec(str(cli.spec)).spec, str(cli.spec), yes=True,
                                                         wait=True, timeout_min=None))
    _assert_each_resource_read_once(rerun, "create (in sync: its plan alone)")
    from fmcluster.verbs.lifecycle.scale import scale

    # configs/quickstart-pcs.yaml: queue gpu has nodes: 1, so this scale changes nothing and only plans
    unchanged = requests_of(cli, monkeypatch, lambda: scale(cli.name, ["gpu=1"], yes=True))
    _assert_each_resource_read_once(unchanged, "scale (no change: its plan alone)")

    # The answers of status and scale, in this process: create, destroy and the missing cluster's exit 1 below are
    # the installed command's, end to end.
    table = _ok(cli.run_in_process("status", cli.name))
    assert cli.name in table.stdout + table.stderr
    overview = _ok(cli.run_in_process("status"))
    assert cli.name in overview.stdout + overview.stderr

    report = json.loads(_ok(cli.run_in_process("status", cli.name, "--json")).stdout)
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
    planned = cli.assert_plan_and_status_cost_agree()

    _ok(cli.run_in_process("scale", cli.name, "burst=1:3", "--yes"))
    report = cli.status()
    burst = next(q for q in report["queues"] if q["name"] == "burst")
    assert (burst["min"], burst["max"]) == (1, 3), burst
    # one more p5.4xlarge at the maximum ($6.88/h On-Demand in us-east-1, instance-facts.yaml p5.4xlarge)
    assert report["usd_per_hour_max"] == pytest.approx(planned + 6.88)

    cli.destroy_stops_billing(report["usd_per_hour_max"])
    cli.assert_nothing_left()
    # forgotten locally too
    missing = cli.run("status", cli.name)
    assert missing.returncode == 1


# 2 ------------------------------------------------------------------------------------------------
def _pcs_holds(cli, kind: str) -> bool:
    """Whether PCS holds the cluster (``cluster``) or its ``gpu`` node group (``gpu``), in any status."""
    pcs = cli.sandbox.client("pcs")
    clusters = [c for c in pcs.list_clusters()["clusters"] if c["name"] == cli.name]
    if kind == "cluster" or not clusters:
        return bool(clusters)
    groups = pcs.list_compute_node_groups(clusterIdentifier=clusters[0]["id"])["computeNodeGroups"]
    return any(g["name"] == "gpu" for g in groups)


def _wait_until(check, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"never saw {what}")
        time.sleep(0.05)  # poll interval of the signal


def test_sigkill_during_create_then_rerun_converges(cli, sandbox):
    sandbox.faults(SLOW)
    # kill while the PCS cluster is CREATING, then (second run, resuming) while node groups are CREATING: once
    # PCS holds the resource (its create landed; SLOW keeps it CREATING for seconds)
    for marker, kind in (("cluster:" + cli.name, "cluster"), ("compute_node_group:gpu", "gpu")):
        proc = cli.popen("create", str(cli.spec), "--yes")
        _wait_for_line(proc, marker)
        _wait_until(lambda kind=kind: _pcs_holds(cli, kind), f"PCS holding the {kind} being created")
        assert proc.poll() is None, f"create finished before the kill: {proc.communicate()}"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    sandbox.faults({"reset": True})

    _ok(cli.create_here())
    cli.assert_exactly_one_of_each()
    _ok(cli.destroy_here())
    cli.assert_nothing_left()


# 3 ------------------------------------------------------------------------------------------------
def test_sigint_during_create_exits_130_and_says_how_to_resume(cli, sandbox):
    # The PCS cluster stays CREATING until the fault is reset below (the sandbox applies a latency when the cluster
    # is read), so the signal lands while the engine waits on it however slowly this process runs; a fixed few
    # seconds (SLOW's 2, or 20) could all pass before the signal on a loaded machine, and the create would finish.
    sandbox.faults({"latency": {**SLOW["latency"], "pcs.cluster": 3600.0}})
    proc = cli.popen("create", str(cli.spec), "--yes")
    seen = _wait_for_line(proc, "cluster:" + cli.name)  # the plan's line
    seen += _wait_for_line(proc, "cluster:" + cli.name)  # the engine's: it starts creating the PCS cluster
    _wait_until(lambda: _pcs_holds(cli, "cluster"), "PCS holding the cluster")  # CREATING from now on
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    try:
        stdout, rest = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # the signal did not stop it: it would wait out the hour (exit -9 below)
        proc.kill()
        stdout, rest = proc.communicate()
    stderr = "".join(seen) + rest
    assert proc.returncode == 130, f"exit {proc.returncode}\n{stdout}\n{stderr}"
    assert "Traceback" not in stderr, stderr
    assert "fmcluster create" in stderr, stderr
    sandbox.faults({"reset": True})

    _ok(cli.create_here())
    cli.assert_exactly_one_of_each()
    _ok(cli.destroy_here())
    cli.assert_nothing_left()


# 4 ------------------------------------------------------------------------------------------------
def test_concurrent_command_is_refused_naming_the_lock_holder(cli, sandbox):
    sandbox.faults(SLOW)
    first = cli.popen("create", str(cli.spec), "--yes")
    try:
        # wait until the first create holds the lock (it records the cluster before taking longer steps)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if lock_is_held(cli.home / "locks" / f"{cli.name}@us-east-1.lock"):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the first create never took the lock")
        assert first.poll() is None

        second = cli.destroy_here()
        assert second.returncode == 1, f"{second.stdout}\n{second.stderr}"
        assert "Traceback" not in second.stderr
        assert str(first.pid) in second.stderr, second.stderr
        assert "fmcluster create" in second.stderr, second.stderr

        again = cli.create_here()
        assert again.returncode == 1, f"{again.stdout}\n{again.stderr}"
        assert str(first.pid) in again.stderr, again.stderr
    finally:
        stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, f"{stdout}\n{stderr}"
    sandbox.faults({"reset": True})
    _ok(cli.destroy_here())
    cli.assert_nothing_left()


# 5 ------------------------------------------------------------------------------------------------
# Twenty percent throttling on every service: an endurance run, in bench/throttled_lifecycle.py; the suite's
# deterministic throttled create and destroy is tests/verbs/lifecycle/test_throttle_visible.py.


# 6 ------------------------------------------------------------------------------------------------
def test_insufficient_capacity_fails_clearly_and_destroy_cleans_up(cli, sandbox):
    sandbox.faults({"insufficient_capacity": ["p5.4xlarge"]})
    result = _ok(cli.create(), code=1)
    assert "InsufficientInstanceCapacity" in result.stderr + result.stdout, result.stderr
    sandbox.faults({"reset": True})

    _ok(cli.destroy_here())
    cli.assert_nothing_left()


def test_after_capacity_returns_a_rerun_replaces_the_failed_node_groups(cli, sandbox):
    sandbox.faults({"insufficient_capacity": ["p5.4xlarge"]})
    failed = _ok(cli.create_here(), code=1)
    text = failed.stderr + failed.stdout
    assert "InsufficientInstanceCapacity" in text
    assert "Capacity Block" in text and "--retry-capacity" in text  # the ways out, named
    sandbox.faults({"reset": True})

    _ok(cli.create_here())  # the failed node groups are deleted and created afresh (new client tokens)
    assert cli.status()["status"] == "ACTIVE"
    cli.assert_exactly_one_of_each()
    _ok(cli.destroy_here())
    cli.assert_nothing_left()


def test_no_wait_sends_what_needs_no_waiting_and_a_rerun_finishes(cli, sandbox):
    sandbox.faults(SLOW)
    sent = _ok(cli.create("--no-wait"))
    assert "--no-wait" in sent.stderr and "re-run" in sent.stderr, sent.stderr
    assert len(cli.inventory()["clusters"]) == 1  # the cluster was requested, nothing waited for it
    _ok(cli.create_here())
    assert cli.status()["status"] == "ACTIVE"
    cli.assert_exactly_one_of_each()
    _ok(cli.destroy_here())
    cli.assert_nothing_left()


def test_retry_capacity_waits_for_capacity_with_a_countdown(cli, sandbox):
    sandbox.faults({"insufficient_capacity": ["p5.4xlarge"]})
    proc = cli.popen("create", str(cli.spec), "--yes", "--retry-capacity", "5")
    try:
        # Capacity "comes back" once the first attempt has failed; fmcluster waits 15 s, then goes again.
        seen = _wait_for_line(proc, "CREATE_FAILED")
        sandbox.faults({"reset": True})
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = "".join(seen) + err
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "attempt 2" in err, err  # it failed once, waited, and went again
    cli.assert_exactly_one_of_each()
    _ok(cli.destroy_here())


# 7 ------------------------------------------------------------------------------------------------
def test_scale_is_held_to_the_size_the_cluster_was_created_with_and_an_unknown_cluster_is_named(cli):
    """Two checks on one cluster (each once created its own): neither changes it."""
    _ok(cli.create_here())  # 3 nodes at most: created SMALL (≤ 32)
    refused = _ok(cli.run_in_process("scale", cli.name, "gpu=40", "--yes"), code=2)
    assert "SMALL" in refused.stderr and "fixed at creation" in refused.stderr, refused.stderr
    assert {q["name"]: q["max"] for q in cli.status()["queues"]}["gpu"] == 1  # nothing was sent to AWS

    status = _ok(cli.run_in_process("status", "nope"), code=1)
    assert "nope" in status.stderr
    assert "Known clusters" in status.stderr and cli.name in status.stderr, status.stderr
    _ok(cli.run_in_process("destroy", "nope", "--yes"), code=1)
    _ok(cli.destroy_here())
    status = _ok(cli.run_in_process("status", "nope"), code=1)
    assert "Known clusters" in status.stderr
