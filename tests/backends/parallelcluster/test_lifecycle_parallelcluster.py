"""End-to-end: the installed ``fmcluster`` command, in subprocesses, against the sandbox (ParallelCluster).

Each test has its own ``FMCLUSTER_HOME`` (the CLI's state) and its own cluster name; the sandbox keeps its
own home. ParallelCluster builds its stack template with the CDK (Node.js), so a create takes ~9 s.

Steps whose answer is what a test checks (a re-run after a kill, the destroy after a failed create, the reads
between) run through the entry point in this process (``create_here``, ``destroy_here``, ``run_in_process``;
fixtures/in_process.py); what only the installed command shows (its exit status, a signal, no traceback) stays
a subprocess.
"""

from __future__ import annotations

import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from fixtures.lifecycle import PclusterCli, _fmcluster, _ok, _wait_for_line, cli_fixture

QUICKSTART = PclusterCli.quickstart

cli = cli_fixture(PclusterCli)


# 1 ------------------------------------------------------------------------------------------------
def test_create_status_scale_destroy(cli):
    _ok(cli.create())
    assert len(cli.stacks()) == 1

    report = cli.status()
    for key in ("name", "backend", "region", "status", "queues", "resources"):
        assert key in report, report
    assert report["name"] == cli.name
    assert report["backend"] == "parallelcluster"
    assert report["region"] == "us-east-1"
    assert report["status"] == "ACTIVE", report
    assert report["backend_status"] == "CREATE_COMPLETE", report
    assert report["slurm_endpoint"] and report["slurm_endpoint"].endswith(":6817"), report
    assert report["drift"] == [], report["drift"]
    assert [q["name"] for q in report["queues"]] == ["gpu"]
    gpu = report["queues"][0]
    for key in ("name", "instance_type", "min", "max", "status"):
        assert key in gpu, gpu
    assert gpu["instance_type"] == "p5.4xlarge"
    assert (gpu["min"], gpu["max"]) == (0, 2)
    assert report["resources"]
    assert "pcluster_cluster" in {r["type"] for r in report["resources"]}
    planned = cli.assert_plan_and_status_cost_agree()

    # growing the max is a live change in ParallelCluster's update rules (the scales' answers in this process: create
    # and destroy here, and the forgotten cluster's exit 1, are the installed command's)
    grow = _ok(cli.run_in_process("scale", cli.name, "gpu=0:3", "--yes"))
    assert "MaxCount" in grow.stderr, grow.stderr
    assert "stopped" not in grow.stderr.lower(), grow.stderr
    gpu = cli.status()["queues"][0]
    assert (gpu["min"], gpu["max"]) == (0, 3), gpu

    # shrinking it needs the compute fleet stopped, then started again
    shrink = _ok(cli.run_in_process("scale", cli.name, "gpu=0:1", "--yes"))
    assert "compute fleet stopped" in shrink.stderr, shrink.stderr
    report = cli.status()
    gpu = report["queues"][0]
    assert (gpu["min"], gpu["max"]) == (0, 1), gpu
    assert report["compute_fleet"] == "RUNNING", report
    assert report["status"] == "ACTIVE", report
    assert report["backend_status"] in ("UPDATE_COMPLETE", "CREATE_COMPLETE"), report
    # one p5.4xlarge fewer at the maximum ($6.88/h On-Demand in us-east-1, instance-facts.yaml p5.4xlarge)
    assert report["usd_per_hour_max"] == pytest.approx(planned - 6.88)

    cli.destroy_stops_billing(report["usd_per_hour_max"])
    cli.wait_until_gone()
    assert cli.run("status", cli.name).returncode == 1  # forgotten locally too


# 2 ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("when", ["before-stack", "after-stack"])
def test_sigkill_during_create_then_rerun_converges(cli, when):
    # create_cluster is one synchronous call (~7 s of CDK synthesis, then CreateStack). Killed 3 s after
    # the engine starts, no stack exists yet and the re-run creates it; killed once the stack shows up
    # (a fixed ~9 s was still before CreateStack here), the re-run must attach (ConflictException).
    proc = cli.popen("create", str(cli.spec), "--yes")
    _wait_for_line(proc, "pcluster_cluster:" + cli.name, timeout=90)
    if when == "before-stack":
        time.sleep(3.0)
    else:
        deadline = time.monotonic() + 60
        while not cli.stacks() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    if proc.poll() is not None:
        pytest.fail(f"create finished before the kill: {proc.communicate()}")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    stacks_at_kill = len(cli.stacks())
    if when == "before-stack":
        assert stacks_at_kill == 0, "the stack existed 3 s in: this run no longer covers the no-stack case"
    else:
        assert stacks_at_kill == 1, "killed before the stack existed"

    _ok(cli.create_here())  # the re-run, in this process: the kill above is the installed command's
    stacks = cli.stacks()
    assert len(stacks) == 1, (stacks_at_kill, stacks)
    assert stacks[0]["StackStatus"] == "CREATE_COMPLETE", stacks
    _ok(cli.destroy_here())
    cli.wait_until_gone()


# 3 ------------------------------------------------------------------------------------------------
def test_failed_stack_shows_failure_codes_and_destroy_cleans_up(cli, sandbox):
    # The head node's bootstrap fails (the sandbox's pcluster_stack fault): its wait condition gets a
    # FAILURE signal and the stack fails, rolled back by default and kept with --no-rollback.
    sandbox.faults({"fail_status": {f"pcluster_stack:{cli.name}": "CREATE_FAILED"}})

    result = _ok(cli.create(), code=1)
    text = " ".join((result.stderr + result.stdout).split())  # rich wraps long lines
    assert "HeadNodeBootstrapFailure: Failed to bootstrap the head node." in text, text  # describe_cluster
    assert "HeadNodeWaitCondition" in text and "CREATE_FAILED" in text, text  # the failed stack event
    assert "WaitCondition received failed message" in text, text
    assert "--no-rollback" in text, text
    _ok(cli.destroy_here())  # the steps after the first failed create, in this process
    cli.wait_until_gone()
    # ParallelCluster retains the cluster's log group, named /aws/parallelcluster/<name>-<YYYYmmddHHMM>: a
    # second create within the same minute would collide with it (on AWS too). Remove it, as a minute would.
    logs = sandbox.client("logs")
    for group in logs.describe_log_groups(logGroupNamePrefix=f"/aws/parallelcluster/{cli.name}-")["logGroups"]:
        logs.delete_log_group(logGroupName=group["logGroupName"])

    kept = _ok(cli.create_here("--no-rollback"), code=1)
    text = " ".join((kept.stderr + kept.stdout).split())
    assert "HeadNodeBootstrapFailure" in text, text
    assert [s["StackStatus"] for s in cli.stacks()] == ["CREATE_FAILED"]
    assert [i["InstanceId"] for i in cli.instances()], "the failed stack keeps its head node for debugging"
    _ok(cli.destroy_here())
    cli.wait_until_gone()


# 4 ------------------------------------------------------------------------------------------------
def test_missing_nodejs_fails_before_creating_anything(cli, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for exe in (Path(sys.executable), Path(_fmcluster()[0])):
        (bin_dir / exe.name).symlink_to(exe)
    assert shutil.which("node", path=str(bin_dir)) is None
    env = {**cli.env, "PATH": str(bin_dir)}
    result = _ok(cli.run("create", str(cli.spec), "--yes", env=env), code=1)
    message = " ".join(result.stderr.split())  # rich wraps long lines
    assert "Node.js" in message, message
    assert "nothing was created" in message.lower(), message  # from the preflight or the backend's own check
    assert cli.stacks() == []
    assert cli.instances() == []


# 5 ------------------------------------------------------------------------------------------------
def test_validate_runs_pcluster_validators_against_the_sandbox(cli):
    result = _ok(cli.run("validate", str(QUICKSTART)))
    text = result.stdout + result.stderr
    line = next((x for x in text.splitlines() if "pcluster validators" in x), None)
    assert line is not None, text
    # the result table marks each check: ✓ passed, ! warning, ✗ failed, – skipped (and says why)
    mark = line.split()[0]
    assert mark in ("✓", "!"), line
    assert "create_cluster(dryrun=True)" in line, line
    assert "no AWS endpoint or credentials" not in text, text


# 6 ------------------------------------------------------------------------------------------------
def test_compute_nodes_that_outlive_the_stack_are_terminated(sandbox, sandbox_env, tmp_path, monkeypatch):
    """No stack, but a compute node of the cluster still runs (a node launched after ParallelCluster's own
    cleanup), tagged as ParallelCluster tags its nodes (its own tags and the config's): discovery offers it
    for teardown, which ends it through pcluster.lib's delete_cluster_instances."""
    from fmcluster.backends.parallelcluster import ParallelClusterBackend
    from fmcluster.connection import aws
    from fmcluster.engine import Engine
    from fmcluster.engine.graph import by_rank
    from fmcluster.state.store import StateStore
    from fmcluster.verbs.session import Session

    name = f"orphan-{time.time_ns() % 10**8}"
    cluster_id = "0123456789abcdef0123456789abcdef"
    ec2 = sandbox.client("ec2")
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"][0]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    orphan = ec2.run_instances(ImageId=image, InstanceType="c5.large", MinCount=1, MaxCount=1,
                               SubnetId=subnet["SubnetId"], TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                   {"Key": "parallelcluster:cluster-name", "Value": name},
                                   {"Key": "parallelcluster:node-type", "Value": "Compute"},
                                   {"Key": "fmcluster:cluster", "Value": name},
                                   {"Key": "fmcluster:region", "Value": "us-east-1"},
                                   {"Key": "fmcluster:cluster-id", "Value": cluster_id}]}])["Instances"][0]
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, None, sandbox.endpoint_url)
    session = Session.bare(name, "us-east-1", "parallelcluster", StateStore(tmp_path / "state.db"))
    session.set_cluster_id(cluster_id)
    backend = ParallelClusterBackend()
    handles = [d.handle for d in backend.discover(session.context) if d.handle is not None]
    assert [h.name for h in handles] == [f"cluster_instances:{name}"]
    Engine(session.ctx, session.store).destroy(by_rank(handles))
    state = ec2.describe_instances(InstanceIds=[orphan["InstanceId"]])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] == "terminated"
    assert backend.discover(session.context) == []
