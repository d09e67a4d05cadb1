"""The head-node step that hands EC2's network tree to Slurm on ParallelCluster (fmcluster/scripts/slurm_topology.py),
checked by Slurm itself: a 16-node p5 queue's worth of instances launched in an account nobody used yet (so its
zone's layout starts empty and the queue spans two spines), plus a powered-down node and one of a type EC2 gives
no topology. The script's own reads run against the sandbox (its requests are the EC2 API's shapes, sent here
through boto3 instead of the AWS CLI); the real slurmctld (Debian's slurm-wlm 22.05, as .ci/run installs it) starts
with ``TopologyPlugin=topology/tree`` and that topology.conf, and ``scontrol show topology`` must put every node
under the switch plain boto3 says it hangs off.

Skipped when Slurm is missing, failing instead under FMCLUSTER_REQUIRE_SLURM=1 (tests/fixtures/slurm.py)."""

from __future__ import annotations

import importlib.util
import re
import socket
import subprocess
import sys

import pytest
from fixtures.slurm import (
    CONTROLLER_BINARIES,
    _free_port,
    missing_requirements,
    skip_or_fail,
    start_controller,
    stop,
)

from fmcluster.backends.slurm import topology_read
from fmcluster.backends.slurm.node_software import shipped

AMI = "ami-12c6146b"  # one of the AMIs every moto region has
CLUSTER = "topo-test"
ZONE = "us-east-1a"


def _script():
    spec = importlib.util.spec_from_file_location("slurm_topology", shipped("slurm_topology.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["slurm_topology"] = module
    spec.loader.exec_module(module)
    return module


def _boto3_call(ec2):
    def call(operation: str, request: dict) -> dict:
        return getattr(ec2, re.sub(r"(?<!^)([A-Z])", r"_\1", operation).lower())(**request)
    return call


def _launch(ec2, instance_type: str, count: int, node_type: str = "Compute") -> list[dict]:
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                           {"Name": "availability-zone", "Values": [ZONE]}])["Subnets"][0]
    # The tags ParallelCluster puts on its instances (ParallelCluster user guide, "Tags" in the Slurm queue docs).
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "parallelcluster:cluster-name", "Value": CLUSTER},
                                                  {"Key": "parallelcluster:node-type", "Value": node_type}]}]
    out = ec2.run_instances(ImageId=AMI, InstanceType=instance_type, MinCount=count, MaxCount=count,
                            SubnetId=subnet["SubnetId"], TagSpecifications=tags)["Instances"]
    return sorted(out, key=lambda i: i["AmiLaunchIndex"])


@pytest.fixture(scope="module")
def slurm_available():
    reason = missing_requirements(CONTROLLER_BINARIES)
    if reason:
        skip_or_fail(reason)


@pytest.fixture(scope="module")
def queue(sandbox):
    ec2 = sandbox.client_in_a_new_account("ec2", retries={"max_attempts": 1})
    p5 = _launch(ec2, "p5.48xlarge", 16)
    cpu = _launch(ec2, "m5.large", 1)
    head = _launch(ec2, "p5.48xlarge", 1, node_type="HeadNode")  # not a Slurm node: never asked about
    yield ec2, p5, cpu
    ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in p5 + cpu + head])
    for stray in ec2.describe_instances(Filters=[{"Name": "tag:parallelcluster:cluster-name", "Values": [CLUSTER]},
                                                 {"Name": "instance-state-name", "Values": ["running"]}])[
            "Reservations"]:
        ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in stray["Instances"]])


def _expected_paths(ec2, instance_ids: list[str]) -> dict[str, list[str]]:
    """Plain boto3, the way any client reads EC2 topology: instance id -> its network nodes top-down."""
    found = {}
    for page in ec2.get_paginator("describe_instance_topology").paginate(InstanceIds=instance_ids):
        found.update({i["InstanceId"]: i["NetworkNodes"] for i in page["Instances"]})
    return found


def _show_topology(env: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """Switch -> {"level": n, "nodes": [...], "switches": [...]} as slurmctld holds it (a switch's Nodes are every
    node below it; its Level 0 when it has no switch below), hostlists expanded by Slurm itself."""
    out = subprocess.run(["scontrol", "show", "topology"], env=env, capture_output=True, text=True, check=True)
    switches = {}
    for line in out.stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        switches[fields["SwitchName"]] = {
            "level": int(fields["Level"]),
            **{kind: _expand(fields[key], env) if fields.get(key) else []
               for kind, key in (("nodes", "Nodes"), ("switches", "Switches"))}}
    return switches


class _LocalShell:
    """What the burn-in's reads ask of the login node (``batch.Remote.run``), run here: slurmctld is local."""

    def __init__(self, env: dict[str, str]):
        self.env = env

    def run(self, command: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", command], input=stdin, env=self.env, capture_output=True, text=True)


def _expand(hostlist: str, env: dict[str, str]) -> list[str]:
    return subprocess.run(["scontrol", "show", "hostnames", hostlist], env=env, capture_output=True, text=True,
                          check=True).stdout.split()


def _chain(tree: dict, node: str) -> list[str]:
    """The switches from ``node``'s bottom switch up to the root."""
    parent = {child: name for name, s in tree.items() for child in s["switches"]}
    leaves = [name for name, s in tree.items() if s["level"] == 0 and node in s["nodes"]]
    assert len(leaves) == 1, (node, leaves)  # one bottom switch a node
    chain = leaves
    while chain[-1] in parent:
        chain = [*chain, parent[chain[-1]]]
    return chain


def test_the_head_node_pass_puts_every_node_under_the_switch_ec2_names(slurm_available, sandbox, queue, tmp_path,
                                                                       monkeypatch):
    """The script's whole pass on a real slurmctld: it reads the nodes from ``scontrol show nodes``, asks EC2,
    writes topology.conf and reconfigures Slurm; a second pass over the same network changes nothing; a node whose
    instance AWS re-homes (the sandbox's ``topology_move`` fault) moves to its new switch in the next pass."""
    ec2, p5, cpu = queue
    script = _script()
    conf = tmp_path / "slurm" / "topology.conf"
    monkeypatch.setattr(script, "TOPOLOGY_CONF", str(conf))
    # ParallelCluster's node names (queue-st|dy-compute resource-N); NodeAddr is the instance's IP once it is up
    # and the node's own name while it is powered down (a CLOUD node, which `scontrol show nodes` hides).
    nodes = [(f"gpu-st-p5-{n}", i["PrivateIpAddress"]) for n, i in enumerate(p5, 1)]
    nodes += [("cpu-st-m5-1", cpu[0]["PrivateIpAddress"])]
    conf.parent.mkdir(parents=True)
    script.placeholder()  # what OnNodeStart leaves: slurmctld must start on it
    env, procs = start_controller(tmp_path / "slurm", [
        "TopologyPlugin=topology/tree",
        *(f"NodeName={name} NodeAddr={addr} CPUs=1" for name, addr in nodes),
        "NodeName=gpu-dy-p5-1 CPUs=1 State=CLOUD",
        "PartitionName=gpu Nodes=gpu-st-p5-[1-16],gpu-dy-p5-1 Default=YES State=UP",
        "PartitionName=cpu Nodes=cpu-st-m5-1 State=UP",
    ], {})
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])
    first, last = p5[0]["InstanceId"], p5[-1]["InstanceId"]
    try:
        expected = _expected_paths(ec2, [i["InstanceId"] for i in p5 + cpu])
        assert script.update(CLUSTER, "us-east-1", call=_boto3_call(ec2)) is True
        tree = _show_topology(env)
        # the burn-in reads the same tree back to pair nodes (issue 39), through the login node's shell
        read_back = topology_read.node_paths(_LocalShell(env), [name for name, _ in nodes])
        assert script.update(CLUSTER, "us-east-1", call=_boto3_call(ec2)) is False  # same network, same file
        sandbox.faults({"topology_move": {first: expected[last][-1]}})  # to the last node's bottom node
        new_path = _expected_paths(ec2, [first])[first]
        assert script.update(CLUSTER, "us-east-1", call=_boto3_call(ec2)) is True
        moved = _show_topology(env)
    finally:
        stop(procs)

    assert set(expected) == {i["InstanceId"] for i in p5}  # m5: no topology for its type
    # EC2's paths, top down, each node's under its own name; the m5 node (under fmc-unplaced) has none
    assert read_back == {f"gpu-st-p5-{n}": tuple(expected[i["InstanceId"]]) for n, i in enumerate(p5, 1)}
    assert (topology_read.ROOT, topology_read.UNPLACED) == (script.ROOT, script.UNPLACED)
    for n, instance in enumerate(p5, 1):
        path = expected[instance["InstanceId"]]
        assert len(path) == 3  # p5.48xlarge: "Returns 3 network nodes" (EC2 user guide, topology prerequisites)
        # bottom node, middle node, spine (EC2's nodes top-down, reversed), then the one root joining the spines
        assert _chain(tree, f"gpu-st-p5-{n}") == [*reversed(path), "fmc-root"], f"gpu-st-p5-{n}"
    assert len({expected[i["InstanceId"]][0] for i in p5}) == 2  # the queue spans two spines
    # Every node is under a switch (topology.conf(5)); those EC2 places nowhere share one under the root.
    assert _chain(tree, "cpu-st-m5-1") == _chain(tree, "gpu-dy-p5-1") == ["fmc-unplaced", "fmc-root"]
    assert {n for s in tree.values() for n in s["nodes"]} == {name for name, _ in nodes} | {"gpu-dy-p5-1"}

    assert new_path != expected[first] and new_path[0] != expected[first][0]  # now under the other spine
    assert _chain(moved, "gpu-st-p5-1") == [*reversed(new_path), "fmc-root"]
    assert _chain(moved, "gpu-st-p5-2") == _chain(tree, "gpu-st-p5-2")


def test_ids_go_at_most_100_a_request(queue):
    """A fleet of more than 100 instances: DescribeInstanceTopology takes "Maximum 100 explicitly specified
    instance IDs" (EC2 API reference; the sandbox refuses more), so the ids go in chunks; ids EC2 gives no
    topology (here, none it knows) are simply absent."""
    ec2, p5, _ = queue
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                           {"Name": "availability-zone", "Values": [ZONE]}])["Subnets"][0]
    more = [i["InstanceId"] for i in ec2.run_instances(ImageId=AMI, InstanceType="p5.48xlarge", MinCount=8,
                                                         MaxCount=8, SubnetId=subnet["SubnetId"])["Instances"]]
    try:
        # 24 with a topology in one chunk: more than a page ("Default: 20" results a request), so pages are followed
        real = [i["InstanceId"] for i in p5] + more
        unknown = [f"i-{n:017x}" for n in range(230)]
        paths = _script().network_paths(_boto3_call(ec2), unknown[:110] + real + unknown[110:])
    finally:
        ec2.terminate_instances(InstanceIds=more)
    assert set(paths) == set(real)
    assert all(len(p) == 3 for p in paths.values())  # p5.48xlarge: 3 network nodes


def test_a_topology_conf_fmcluster_did_not_write_is_left_alone(tmp_path, monkeypatch):
    script = _script()
    mine = tmp_path / "topology.conf"
    mine.write_text("SwitchName=rack1 Nodes=tux[0-3]\n")
    monkeypatch.setattr(script, "TOPOLOGY_CONF", str(mine))

    def no_aws(operation: str, request: dict) -> dict:
        raise AssertionError(f"{operation} asked although the file is the admin's")

    assert script.update(CLUSTER, "us-east-1", call=no_aws) is False
    assert mine.read_text() == "SwitchName=rack1 Nodes=tux[0-3]\n"
    script.placeholder()  # OnNodeStart never replaces one either
    assert mine.read_text() == "SwitchName=rack1 Nodes=tux[0-3]\n"


def test_a_failed_pass_exits_1_and_leaves_the_file(slurm_available, tmp_path, monkeypatch, capsys):
    script = _script()
    conf = tmp_path / "topology.conf"
    monkeypatch.setattr(script, "TOPOLOGY_CONF", str(conf))
    script.placeholder()
    before = conf.read_text()
    # a controller nobody runs, given up on at once
    dead = tmp_path / "slurm.conf"
    dead.write_text(f"ClusterName=dead\nSlurmctldHost={socket.gethostname()}(127.0.0.1)\nSlurmctldPort={_free_port()}\n"
                    f"AuthType=auth/munge\nAuthInfo=socket={tmp_path / 'no-munge'}\nMessageTimeout=1\nTCPTimeout=1\n"
                    "NodeName=a CPUs=1\nPartitionName=p Nodes=a\n")
    monkeypatch.setenv("SLURM_CONF", str(dead))
    assert script.main(["update", CLUSTER, "us-east-1"]) == 1
    assert conf.read_text() == before
    assert "fmcluster slurm_topology update:" in capsys.readouterr().err
    assert script.main(["unknown"]) == 2


def test_the_pass_acts_only_under_topology_tree():
    script = _script()
    # `scontrol show config` lines as Slurm 22.05 prints them (name padded, " = ", value)
    assert script.topology_plugin("SwitchType               = (null)\nTopologyParam           = (null)\n"
                                  "TopologyPlugin          = topology/tree\nTrackWCKey              = No\n") == \
        "topology/tree"
    assert script.topology_plugin("TopologyPlugin          = topology/none\n") == "topology/none"
    assert script.topology_plugin("TopologyParam           = (null)\n") == ""


def test_hostlist_and_the_leaf_of_a_switch_with_both_kinds_of_children():
    script = _script()
    # Slurm's hostlist form (topology.conf(5): "Nodes=tux[0-3,12,18-20]")
    assert script.hostlist(["q-st-a-3", "q-st-a-1", "q-st-a-2", "q-st-a-7", "q-dy-a-10", "odd01"]) == \
        "q-dy-a-10,q-st-a-[1-3,7],odd01"
    # a 4-layer instance under the node another instance hangs off: a switch lists Nodes or Switches, not both
    text = script.topology_conf([("a", "10.0.0.1"), ("b", "10.0.0.2")], {"10.0.0.1": "i-1", "10.0.0.2": "i-2"},
                                {"i-1": ("nn-1", "nn-2", "nn-3"), "i-2": ("nn-1", "nn-2", "nn-3", "nn-4")})
    assert text.splitlines()[1:] == ["SwitchName=nn-3-nodes Nodes=a", "SwitchName=nn-4 Nodes=b",
                                     "SwitchName=nn-3 Switches=nn-3-nodes,nn-4", "SwitchName=nn-2 Switches=nn-3",
                                     "SwitchName=nn-1 Switches=nn-2", "SwitchName=fmc-root Switches=nn-1"]


def test_the_burn_in_reads_each_nodes_ec2_path_back_through_the_leaf_of_its_own(slurm_available, tmp_path):
    """The tree of the test above, on a real slurmctld, read back as the burn-in reads it: node ``a`` hangs off
    nn-3 (through the leaf nn-3-nodes, which is not EC2's), ``b`` off nn-4 below it."""
    script = _script()
    text = script.topology_conf([("a", "10.0.0.1"), ("b", "10.0.0.2")], {"10.0.0.1": "i-1", "10.0.0.2": "i-2"},
                                {"i-1": ("nn-1", "nn-2", "nn-3"), "i-2": ("nn-1", "nn-2", "nn-3", "nn-4")})
    env, procs = start_controller(tmp_path / "slurm", [
        "TopologyPlugin=topology/tree", "NodeName=a,b CPUs=1", "PartitionName=gpu Nodes=a,b Default=YES State=UP",
    ], {"topology.conf": text})
    try:
        read_back = topology_read.node_paths(_LocalShell(env), ["a", "b"])
    finally:
        stop(procs)
    assert read_back == {"a": ("nn-1", "nn-2", "nn-3"), "b": ("nn-1", "nn-2", "nn-3", "nn-4")}
