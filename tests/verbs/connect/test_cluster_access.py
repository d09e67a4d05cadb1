"""Living with a cluster, end to end against the sandbox with the installed command: ``ssh --print`` on both
backends, ``logs``, ``status`` through a pipe and ``--watch``, ``--json`` checks, global options after the
command, and "n" at a prompt."""

from __future__ import annotations

import json
import os
import pty
import shlex
import signal
import subprocess
import threading
import time

import pytest
import yaml
from fixtures.lifecycle import PclusterCli, PcsCli, _fmcluster, _ok, cli_fixture
from fixtures.tiers import E2E_FIXTURE_ATTR

pcs_cli = cli_fixture(PcsCli)
pcluster_cli = cli_fixture(PclusterCli)


def _rename(cli, name: str, **changes) -> None:
    data = yaml.safe_load(cli.spec.read_text())
    data["name"] = cli.name = name
    data.update(changes)
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))


def _shared_pcs(sandbox, tmp_path_factory):
    """One PCS cluster for this module's read-only tests (ssh --print, logs, status in a pipe and --watch, a
    declined destroy), created once instead of once per test; its 40-character name must come out whole in a
    narrow pipe. Its tests change neither the cluster nor its state, and share an xdist group (SHARED) so that one
    worker creates it."""
    cli = PcsCli(sandbox, tmp_path_factory.mktemp("shared-pcs"))
    _rename(cli, f"{cli.name}-{'x' * 40}"[:40])
    _ok(cli.create())
    yield cli
    sandbox.faults({"reset": True})
    _ok(cli.destroy())
    cli.assert_nothing_left()


setattr(_shared_pcs, E2E_FIXTURE_ATTR, True)  # tests/fixtures/tiers.py marks every test that uses it e2e
shared_pcs = pytest.fixture(_shared_pcs, scope="module", name="shared_pcs")
SHARED = pytest.mark.xdist_group("test_cluster_access-shared-pcs")


def _instances(sandbox, tag: str, value: str) -> list[str]:
    reservations = sandbox.client("ec2").describe_instances(Filters=[
        {"Name": f"tag:{tag}", "Values": [value]}, {"Name": "instance-state-name", "Values": ["running"]}])
    return [i["InstanceId"] for r in reservations["Reservations"] for i in r["Instances"]]


@SHARED
def test_pcs_ssh_logs_and_status_in_a_pipe(shared_pcs, sandbox):
    cli = shared_pcs
    name = cli.name  # 40 characters: it must come out whole in a narrow pipe
    assert len(name) == 40

    # ssh --print: the login node group's instance, through SSM (the spec opens SSH to no network)
    login = cli.sandbox.client("pcs").get_compute_node_group(clusterIdentifier=name,
                                                             computeNodeGroupIdentifier="login")["computeNodeGroup"]
    [instance] = _instances(sandbox, "aws:pcs:compute-node-group-id", login["id"])
    # ssh and logs answer in this process; status in a pipe below, and the other tests' runs, are the installed
    # command's
    printed = _ok(cli.run_in_process("ssh", name, "--print"))
    argv = shlex.split(printed.stdout)
    assert argv[0] == "ssh" and argv[-1] == f"ec2-user@{instance}", argv  # alinux2023's user (PCS sample AMIs)
    assert ("ProxyCommand=aws ssm start-session --target %h --document-name AWS-StartSSHSession "
            "--parameters portNumber=%p --region us-east-1") in argv
    assert "no network.ssh.allowed_cidr" in printed.stderr
    block = _ok(cli.run_in_process("ssh", name, "--print", "--config")).stdout
    assert f"Host {name}\n    HostName {instance}\n    User ec2-user\n" in block
    assert "    ProxyCommand aws ssm start-session --target %h" in block
    with_command = shlex.split(_ok(cli.run_in_process("ssh", name, "--print", "--", "sinfo", "-N")).stdout)
    assert with_command[-3:] == [f"ec2-user@{instance}", "sinfo", "-N"]

    # logs: the create's own events from the state store, then what PCS logs (nothing is configured)
    logs = _ok(cli.run_in_process("logs", name))
    lines = logs.stdout.splitlines()
    assert any(f"fmcluster  cluster:{name} started creating" in line for line in lines), logs.stdout
    assert any(f"fmcluster  cluster:{name} done ACTIVE" in line for line in lines), logs.stdout
    assert any("fmcluster  queue:gpu done ACTIVE" in line for line in lines), logs.stdout
    assert "no log delivery is set up" in logs.stderr
    assert _ok(cli.run_in_process("logs", name, "-n", "2")).stdout.count("\n") == 2

    # status through a pipe, narrow COLUMNS: nothing cut, nothing wrapped
    narrow = {**cli.env, "COLUMNS": "40"}
    table = _ok(cli.run("status", env=narrow)).stdout
    row = next(line for line in table.splitlines() if line.strip().startswith(name))
    assert "ACTIVE" in row and "gpu, burst" in row and "…" not in table
    detail = _ok(cli.run("status", name, env=narrow)).stdout
    assert f"{name} (pcs, us-east-1): ACTIVE" in detail.splitlines()[0]

    # global options after the command: the same command as with them in front
    moved = _ok(cli.run("status", name, "--json", "--endpoint-url", sandbox.endpoint_url, "--region",
                        "us-east-1", "-v"))
    assert json.loads(moved.stdout)["status"] == "ACTIVE"
    assert "AWS API calls" in moved.stderr  # -v took effect


def test_ssh_names_what_is_missing(pcs_cli):
    cli = pcs_cli
    result = _ok(cli.run_in_process("ssh", "no-such-cluster", "--print"), code=1)
    assert "no cluster named 'no-such-cluster'" in result.stderr
    # known locally, absent in AWS: PCS answers ResourceNotFound for its login group
    from fmcluster.state.store import StateStore

    store = StateStore(cli.home / "state.db")
    store.save_cluster(cli.name, "us-east-1", "pcs", yaml.safe_dump(yaml.safe_load(cli.spec.read_text())),
                       str(cli.spec), "ACTIVE")
    store.close()
    result = _ok(cli.run_in_process("ssh", cli.name, "--print"), code=1)
    assert f"cluster {cli.name} has no running login node" in result.stderr, result.stderr
    smoke = _ok(cli.run_in_process("smoke", cli.name), code=1)
    assert "has no running login node" in smoke.stderr
    store = StateStore(cli.home / "state.db")
    store.forget_cluster(cli.name, "us-east-1")
    store.close()


def test_parallelcluster_ssh_print_and_logs(pcluster_cli, sandbox):
    cli = pcluster_cli
    _rename(cli, cli.name, network={"ssh": {"allowed_cidr": "203.0.113.0/24"}})
    _ok(cli.create_here())  # in this process, like its ssh and logs: what is checked is their answers
    [head] = set(_instances(sandbox, "parallelcluster:cluster-name", cli.name)) & set(
        _instances(sandbox, "parallelcluster:node-type", "HeadNode"))
    printed = _ok(cli.run_in_process("ssh", cli.name, "--print"))
    argv = shlex.split(printed.stdout)
    assert argv[-1] == f"ubuntu@{head}", argv
    # SSH is open to a network, but the sandbox's head node has no public address: SSM carries it
    assert "the node has no public address" in printed.stderr
    assert any(a.startswith("ProxyCommand=aws ssm start-session") for a in argv)

    # a node's log stream in the cluster's CloudWatch log group, as ParallelCluster's agents write them
    cloudwatch = sandbox.client("logs")
    [group] = cloudwatch.describe_log_groups(logGroupNamePrefix=f"/aws/parallelcluster/{cli.name}-")["logGroups"]
    stream = f"ip-10-0-0-1.{head}.slurmctld"
    cloudwatch.create_log_stream(logGroupName=group["logGroupName"], logStreamName=stream)
    cloudwatch.put_log_events(logGroupName=group["logGroupName"], logStreamName=stream, logEvents=[
        {"timestamp": int(time.time() * 1000), "message": "slurmctld: Running as primary controller"}])

    logs = _ok(cli.run_in_process("logs", cli.name)).stdout
    assert f"fmcluster  pcluster_cluster:{cli.name} done CREATE_COMPLETE" in logs, logs
    assert f"cloudformation  {cli.name} CREATE_COMPLETE" in logs, logs  # pcluster.lib's stack events
    assert f"{stream}  slurmctld: Running as primary controller" in logs, logs  # and its log streams
    cloudwatch.delete_log_group(logGroupName=group["logGroupName"])  # ParallelCluster keeps it; so would AWS
    _ok(cli.destroy_here())
    cli.wait_until_gone()


@SHARED
def test_watch_and_follow_stop_cleanly_on_ctrl_c(shared_pcs):
    cli = shared_pcs
    for args in (("status", cli.name, "--watch", "--json"), ("logs", cli.name, "--follow")):
        proc = subprocess.Popen([*_fmcluster(), *args], env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        # Wait for what each must print (two documents 5 s apart; the first log lines), however slow the
        # machine, then interrupt; a watchdog ends a hung run instead of the test suite.
        watchdog = threading.Timer(300, proc.kill)
        watchdog.start()
        head: list[str] = []
        while len(head) < 2 if "--json" in args else not any("done ACTIVE" in line for line in head):
            head.append(proc.stdout.readline())
            if not head[-1]:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        watchdog.cancel()
        out = "".join(head) + out
        assert proc.returncode == 0, (args, err)
        assert "Traceback" not in err
        if "--json" in args:
            documents = [json.loads(line) for line in out.splitlines()]  # JSON Lines: one document per line
            assert len(documents) >= 2 and all(d["name"] == cli.name for d in documents)
        else:
            assert f"cluster:{cli.name} done ACTIVE" in out
    assert _watch_on_a_terminal(cli) > 0  # redrawn in place: the cursor goes back up over the last copy


def _watch_on_a_terminal(cli) -> int:
    """Run ``status NAME --watch`` with a terminal for stdout; return how often it moved the cursor up."""
    import select

    master, replica = pty.openpty()
    proc = subprocess.Popen([*_fmcluster(), "status", cli.name, "--watch"], stdout=replica,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env={**cli.env, "LINES": "50"}, text=True)
    os.close(replica)
    seen = b""
    # Until the first redraw (5 s after the first copy), however slow the machine; at most 5 minutes.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and b"\x1b[1A" not in seen:
        if select.select([master], [], [], 0.5)[0]:
            seen += os.read(master, 65536)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    os.close(master)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert cli.name.encode() in seen
    return seen.count(b"\x1b[1A")


@SHARED
def test_no_at_the_prompt_aborts_with_exit_1(shared_pcs):
    cli = shared_pcs
    master, replica = pty.openpty()
    proc = subprocess.Popen([*_fmcluster(), "destroy", cli.name], env=cli.env, stdin=replica,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(replica)
    os.write(master, b"n\n")  # read once the question is asked
    out, err = proc.communicate(timeout=60)
    os.close(master)
    assert proc.returncode == 1, err
    assert err.rstrip().endswith("aborted; nothing changed"), err
    assert "error:" not in err
    assert cli.status()["status"] == "ACTIVE"  # nothing changed


def test_preflight_and_validate_json(pcs_cli, sandbox):
    cli = pcs_cli
    result = _ok(cli.run_in_process("preflight", str(cli.spec), "--json"))
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["command"] == "preflight"
    for check in report["checks"]:
        assert set(check) == {"name", "status", "summary", "details", "fix"}
        assert check["status"] in ("passed", "failed", "skipped", "warning")
    _rename(cli, cli.name, network={"ssh": {"key_name": "no-such-key"}})
    result = _ok(cli.run_in_process("preflight", str(cli.spec), "--json"), code=1)
    report = json.loads(result.stdout)
    assert report["ok"] is False
    failed = [c for c in report["checks"] if c["status"] == "failed"]
    assert any("no-such-key" in c["summary"] and c["fix"] for c in failed), failed

    checked = json.loads(_ok(cli.run_in_process("validate", str(cli.spec), "--json")).stdout)
    assert checked["ok"] is True
    names = {c["name"]: c["status"] for c in checked["checks"]}
    assert names["botocore shapes"] == "passed" and names["instance types"] == "passed"
    # a well-formed name EC2 does not list (neither fmcluster's shipped list nor the endpoint, which is asked): a bad
    # spec, refused at its line
    _rename(cli, cli.name, head_node={"instance_type": "m7i.99xlarge"})
    refused = _ok(cli.run_in_process("validate", str(cli.spec), "--json"), code=2)
    assert "head_node.instance_type: unknown instance type 'm7i.99xlarge'" in " ".join(refused.stderr.split())


@pytest.mark.parametrize("placement", ["before", "after"])
def test_sandbox_flag_before_or_after_the_command(sandbox, tmp_path, placement):
    # --sandbox reuses the session's sandbox, found through its home
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, "FMCLUSTER_HOME": str(sandbox.home),
           "NO_COLOR": "1", "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    args = ["--sandbox", "status", "--json"] if placement == "before" else ["status", "--json", "--sandbox"]
    result = subprocess.run([*_fmcluster(), *args], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert isinstance(json.loads(result.stdout), list)
