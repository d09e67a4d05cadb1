"""``status`` groups each queue's nodes by the bottom network node EC2 DescribeInstanceTopology places them under,
counts the spines (top-layer nodes) the queue spans and warns when it spans more than one (issue 39, "see it").

Expected values are hand-typed: from the places made here, or from the sandbox's documented layout
(docs/sandbox-fidelity.md, "EC2 topology": 2 instances per bottom node, 2 bottom nodes per middle node, 2 middle
nodes per spine, filled in order per account and zone; p5.48xlarge returns 3 network nodes, p5.4xlarge none, as the
EC2 user guide's "Prerequisites for Amazon EC2 topology" lists). Which instance sits where is read back with plain
boto3 DescribeInstanceTopology, never from fmcluster. The sandbox grants every EC2 call, so AWS's refusal is answered
by a ``before-call`` hook on the session fmcluster's clients come from (what botocore's Stubber does on one client):
fmcluster's own call still goes through botocore and gets AWS's error as botocore parses it."""

from __future__ import annotations

import json

import pytest
import yaml
from botocore.awsrequest import AWSResponse
from fixtures.lifecycle import PclusterCli, PcsCli, _ok, requests_of
from fixtures.tiers import E2E_FIXTURE_ATTR

from fmcluster.aws.topology import InstancePlace
from fmcluster.aws.topology_tree import queue_tree, spread
from fmcluster.output.status_topology import topology_lines
from fmcluster.verbs.lifecycle.status_topology import spine_warning

TOPOLOGY_CALL = "ec2.DescribeInstanceTopology"

# --- the pure parts: grouping and the text -----------------------------------------------------------------------


def _row(instance_id: str) -> dict:
    return {"id": instance_id, "queue": "gpu", "instance_type": "p5.48xlarge", "state": "running"}


def _place(instance_id: str, *nodes: str) -> InstancePlace:
    return InstancePlace(instance_id, "p5.48xlarge", "us-east-1a", "use1-az1", tuple(nodes))


def test_a_queue_is_grouped_by_bottom_node_with_its_path_and_its_spines():
    places = {p.instance_id: p for p in (
        _place("i-1", "nn-s1", "nn-m1", "nn-b1"), _place("i-2", "nn-s1", "nn-m1", "nn-b1"),
        _place("i-3", "nn-s1", "nn-m1", "nn-b2"), _place("i-4", "nn-s2", "nn-m9", "nn-b9"))}
    tree = queue_tree([_row(f"i-{n}") for n in (4, 3, 2, 1, 5)], places)
    assert spread(tree["tree"]) == {"node_count": 4, "spine_count": 2, "groups": [
        {"bottom_node": "nn-b1", "path": ["nn-s1", "nn-m1", "nn-b1"], "instances": ["i-1", "i-2"]},
        {"bottom_node": "nn-b2", "path": ["nn-s1", "nn-m1", "nn-b2"], "instances": ["i-3"]},
        {"bottom_node": "nn-b9", "path": ["nn-s2", "nn-m9", "nn-b9"], "instances": ["i-4"]}], "ultraservers": []}
    assert spine_warning("gpu", 4, 2) == ("queue gpu: 4 nodes under 2 spines; its all-reduce crosses the top network "
                                          "layer")
    assert spine_warning("gpu", 4, 1) is None


def test_ultraserver_nodes_are_grouped_by_the_capacity_block_id_ec2_gives_them():
    """EC2 API reference, InstanceTopology: CapacityBlockId "is only supported for UltraServer instances and
    identifies instances within the UltraServer domain"; u-p6e-gb200x36 holds 9 p6e-gb200.36xlarge (EKS guide)."""
    gb200 = [InstancePlace(f"i-{n}", "p6e-gb200.36xlarge", "us-east-1-dfw-2a", "use1-dfw2-az1",
                           ("nn-s1", "nn-m1", f"nn-b{n % 3}"), capacity_block_id="cb-a" if n < 9 else "cb-b")
             for n in range(12)]
    tree = queue_tree([{"id": p.instance_id, "queue": "gpu", "instance_type": p.instance_type, "state": "running"}
                       for p in gb200], {p.instance_id: p for p in gb200})
    shown = spread(tree["tree"])
    assert shown["ultraservers"] == [
        {"capacity_block_id": "cb-a", "instances": sorted(f"i-{n}" for n in range(9))},
        {"capacity_block_id": "cb-b", "instances": ["i-10", "i-11", "i-9"]}]
    lines, _ = topology_lines([{"name": "gpu", "topology": {**shown, "unplaced": [], "warning": None,
                                                             "unavailable": None}}], "llama")
    assert lines[-1] == "    2 UltraServers: cb-a (9) cb-b (3)", lines


def _topology(groups: list[tuple[str, str, int]], spines: int, unplaced: tuple[str, ...] = ()) -> dict:
    return {"node_count": sum(n for _, _, n in groups), "spine_count": spines, "unplaced": list(unplaced),
            "groups": [{"bottom_node": b, "path": [s, "nn-m", b], "instances": [f"i-{b}-{k}" for k in range(n)]}
                       for s, b, n in groups],
            "warning": "W" if spines > 1 else None, "unavailable": None}


def test_the_text_is_one_line_per_spine_and_the_warning_once():
    queues = [{"name": "gpu", "topology": _topology([("nn-s1", "nn-b1", 2), ("nn-s1", "nn-b2", 2),
                                                       ("nn-s2", "nn-b3", 1)], 2, unplaced=("i-9",))},
              {"name": "burst", "topology": None},
              {"name": "one", "topology": _topology([("nn-s3", "nn-b4", 1)], 1)}]
    assert topology_lines(queues, "llama") == ([
        "network topology (EC2 network nodes: bottom node (nodes) per spine; `fmcluster topology llama` shows the "
        "tree):",
        "  gpu: 5 nodes under 2 spines (1 running node not in AWS's answer)",
        "    spine nn-s1: nn-b1 (2) nn-b2 (2)",
        "    spine nn-s2: nn-b3 (1)",
        "  one: 1 node under 1 spine",
        "    spine nn-s3: nn-b4 (1)"], ["W"])
    assert topology_lines([{"name": "burst", "topology": None}, {"name": "x"}], "llama") == ([], [])
    refused = {"node_count": None, "spine_count": None, "groups": [], "unplaced": [], "warning": None,
               "unavailable": "EC2 DescribeInstanceTopology: AWS said UnauthorizedOperation: no"}
    assert topology_lines([{"name": "gpu", "topology": refused}, {"name": "big", "topology": refused}], "llama") == (
        ["network topology unavailable: EC2 DescribeInstanceTopology: AWS said UnauthorizedOperation: no"], [])


def test_a_large_queue_stays_a_few_lines():
    """64 nodes, 2 per bottom node, 4 bottom nodes per spine... and one spine of 12: 8 named per line, then a count."""
    groups = [(f"nn-s{k // 4:02}", f"nn-b{k:02}", 2) for k in range(20)] + [("nn-s99", f"nn-c{k:02}", 2)
                                                                           for k in range(12)]
    lines, _ = topology_lines([{"name": "gpu", "topology": _topology(groups, 6)}], "llama")
    assert lines[1:] == [
        "  gpu: 64 nodes under 6 spines",
        *(f"    spine nn-s{s:02}: " + " ".join(f"nn-b{k:02} (2)" for k in range(4 * s, 4 * s + 4)) for s in range(5)),
        "    spine nn-s99: " + " ".join(f"nn-c{k:02} (2)" for k in range(8)) + " … and 4 more bottom nodes"]
    many = [(f"nn-s{k:02}", f"nn-b{k:02}", 1) for k in range(10)]
    lines, _ = topology_lines([{"name": "gpu", "topology": _topology(many, 10)}], "llama")
    assert len(lines) == 2 + 8 + 1 and lines[-1] == "    … and 2 more spines", lines


# --- against the sandbox: a 10-node p5.48xlarge queue in an account of its own -----------------------------------

# 10 nodes fill the first spine's 8 slots and 2 of the next: 5 bottom nodes of 2, under 2 spines.
NODES, SPINE_SLOTS, PER_BOTTOM = 10, 8, 2


def _p5_in_a_fresh_account(sandbox, tmp_path_factory):
    """A PCS cluster (configs/quickstart-pcs.yaml) in an account nobody used, so the zone's layout starts empty:
    queue gpu NODES p5.48xlarge, queue burst one p5.4xlarge (no topology)."""
    cli = PcsCli(sandbox, tmp_path_factory.mktemp("status-topology"))
    fresh = sandbox.new_account_env()
    cli.env.update({k: fresh[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")})
    data = yaml.safe_load(cli.spec.read_text())
    data["queues"] = [{"name": "gpu", "instance_type": "p5.48xlarge", "nodes": NODES},
                      {"name": "burst", "instance_type": "p5.4xlarge", "nodes": 1}]
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    _ok(cli.run_in_process("create", str(cli.spec), "--yes", "--skip-preflight"))
    yield cli
    _ok(cli.run_in_process("destroy", cli.name, "--yes"))


setattr(_p5_in_a_fresh_account, E2E_FIXTURE_ATTR, True)  # tests/fixtures/tiers.py marks every test that uses it e2e
p5 = pytest.fixture(_p5_in_a_fresh_account, scope="module", name="p5")
SHARED = pytest.mark.xdist_group("test_status_topology-p5")


def _ec2_of(cli, sandbox):
    """Plain boto3 EC2 with the cluster's account's credentials: the test's own reads."""
    import boto3

    return boto3.session.Session(aws_access_key_id=cli.env["AWS_ACCESS_KEY_ID"],
                                 aws_secret_access_key=cli.env["AWS_SECRET_ACCESS_KEY"],
                                 aws_session_token=cli.env["AWS_SESSION_TOKEN"], region_name="us-east-1").client(
        "ec2", endpoint_url=sandbox.endpoint_url, verify=sandbox.ca_bundle or False)


def _said(ec2, ids) -> dict[str, tuple[str, ...]]:
    return {i["InstanceId"]: tuple(i["NetworkNodes"]) for page in ec2.get_paginator(
        "describe_instance_topology").paginate(InstanceIds=sorted(ids)) for i in page["Instances"]}


def _status(cli, monkeypatch):
    from fmcluster.verbs.lifecycle.status import status

    answer: dict = {}
    sent = requests_of(cli, monkeypatch, lambda: answer.update(report=status(cli.name, refresh=False)))
    return answer["report"], sent


def _gpu(report: dict) -> dict:
    return next(q for q in report["queues"] if q["name"] == "gpu")["topology"]


def _groups_as_ec2_says(said: dict[str, tuple[str, ...]]) -> list[dict]:
    bottoms: dict[tuple[str, ...], list[str]] = {}
    for instance, path in said.items():
        bottoms.setdefault(path, []).append(instance)
    return [{"bottom_node": path[-1], "path": list(path), "instances": sorted(ids)}
            for path, ids in sorted(bottoms.items())]


@SHARED
def test_status_groups_the_queue_by_bottom_node_as_ec2_says_with_one_read(p5, sandbox, monkeypatch):
    report, sent = _status(p5, monkeypatch)
    queues = {q["name"]: q for q in report["queues"]}
    gpu = queues["gpu"]["topology"]
    ids = [i for g in gpu["groups"] for i in g["instances"]]
    said = _said(_ec2_of(p5, sandbox), ids)
    assert (gpu["node_count"], gpu["spine_count"], gpu["unplaced"], gpu["unavailable"]) == (NODES, 2, [], None)
    assert gpu["groups"] == _groups_as_ec2_says(said)
    assert sorted(len(g["instances"]) for g in gpu["groups"]) == [PER_BOTTOM] * (NODES // PER_BOTTOM)
    assert sorted(sum(1 for p in said.values() if p[0] == s) for s in {p[0] for p in said.values()}) == \
        [NODES - SPINE_SLOTS, SPINE_SLOTS]
    assert gpu["warning"] == "queue gpu: 10 nodes under 2 spines; its all-reduce crosses the top network layer"
    assert queues["burst"]["topology"] is None  # p5.4xlarge: AWS gives it no topology
    # one DescribeInstanceTopology, asking for the gpu nodes only (not burst's p5.4xlarge)
    asked = [request for (operation, request), n in sent.items() for _ in range(n) if operation == TOPOLOGY_CALL]
    assert len(asked) == 1, sent
    burst = [i["id"] for i in report["instances"] if i["queue"] == "burst" and i["state"] == "running"]
    assert burst and not any(b in asked[0] for b in burst) and all(i in asked[0] for i in ids)
    assert not any("network topology" in p or "spine" in p for p in report.get("problems") or [])
    json.dumps(gpu)  # plain JSON


@SHARED
def test_status_text_shows_the_spines_and_the_warning(p5):
    shown = _ok(p5.run_in_process("status", p5.name)).stdout
    assert "\n  gpu: 10 nodes under 2 spines\n" in shown, shown
    assert shown.count("\n    spine nn-") == 2, shown
    assert "warning: queue gpu: 10 nodes under 2 spines; its all-reduce crosses the top network layer" in shown, shown
    assert "burst:" not in shown, shown


def _refuse(model=None, **_):
    """What AWS answers a caller without ec2:DescribeInstanceTopology (EC2 API reference, "Error codes":
    UnauthorizedOperation, HTTP 403), in EC2's XML error shape as botocore parses it."""
    if model is None or model.name != "DescribeInstanceTopology":
        return None
    return (AWSResponse("https://ec2.us-east-1.amazonaws.com/", 403, {}, None),
            {"Error": {"Code": "UnauthorizedOperation", "Message": "You are not authorized to perform this "
                       "operation."}, "ResponseMetadata": {"HTTPStatusCode": 403}})


@SHARED
def test_aws_refusing_the_topology_leaves_status_as_it_was_and_says_why(p5, monkeypatch):
    from fmcluster.connection import aws
    from fmcluster.verbs.lifecycle.status import status

    before, _ = _status(p5, monkeypatch)
    answer: dict = {}

    def refused_status() -> None:
        aws.session("us-east-1").events.register("before-call.ec2.DescribeInstanceTopology", _refuse)
        answer.update(report=status(p5.name, refresh=False))

    sent = requests_of(p5, monkeypatch, refused_status)
    report = answer["report"]
    assert (report["status"], report.get("problems")) == (before["status"], before.get("problems")), report
    assert [q["name"] for q in report["queues"]] == [q["name"] for q in before["queues"]]
    gpu = next(q for q in report["queues"] if q["name"] == "gpu")["topology"]
    assert gpu["unavailable"].startswith("EC2 DescribeInstanceTopology: AWS said UnauthorizedOperation: "), gpu
    assert (gpu["node_count"], gpu["spine_count"], gpu["groups"], gpu["warning"]) == (None, None, [], None)
    assert sum(n for (operation, _), n in sent.items() if operation == TOPOLOGY_CALL) == 1  # asked once, no retry


@SHARED
def test_a_moved_node_shows_under_its_new_bottom_node(p5, sandbox, monkeypatch):
    report, _ = _status(p5, monkeypatch)
    ec2 = _ec2_of(p5, sandbox)
    said = _said(ec2, [i for g in _gpu(report)["groups"] for i in g["instances"]])
    spines = {path[0] for path in said.values()}
    lone = [i for i, p in said.items() if sum(1 for q in said.values() if q[0] == p[0]) == NODES - SPINE_SLOTS]
    full_spine_bottoms = sorted({p[-1] for p in said.values() if p[0] != said[lone[0]][0]})
    assert len(spines) == 2 and len(lone) == 2
    # the two nodes of the second spine are re-homed under the first spine's bottom nodes, as AWS may re-home them
    sandbox.faults({"topology_move": {lone[0]: full_spine_bottoms[0], lone[1]: full_spine_bottoms[1]}})
    now = _said(ec2, said)
    assert {now[i][-1] for i in lone} == set(full_spine_bottoms[:2])  # the sandbox moved them
    report, _ = _status(p5, monkeypatch)
    gpu = _gpu(report)
    assert gpu["groups"] == _groups_as_ec2_says(now)
    assert (gpu["node_count"], gpu["spine_count"], gpu["warning"]) == (NODES, 1, None)
    assert sorted(len(g["instances"]) for g in gpu["groups"]) == [2, 2, 3, 3]


def _quickstart(sandbox, tmp_path):
    """configs/quickstart-pcs.yaml as shipped: queues of p5.4xlarge, a type AWS gives no topology."""
    cli = PcsCli(sandbox, tmp_path)
    _ok(cli.run_in_process("create", str(cli.spec), "--yes", "--skip-preflight"))
    yield cli
    _ok(cli.run_in_process("destroy", cli.name, "--yes"))


setattr(_quickstart, E2E_FIXTURE_ATTR, True)
quickstart = pytest.fixture(_quickstart, name="quickstart")


def test_a_cluster_without_topology_types_makes_no_topology_call(quickstart, monkeypatch):
    report, sent = _status(quickstart, monkeypatch)
    running = [i for i in report["instances"] if i["state"] == "running" and i["queue"] == "gpu"]
    assert [i["instance_type"] for i in running] == ["p5.4xlarge"], report["instances"]
    assert not [operation for operation, _ in sent if operation == TOPOLOGY_CALL], sent
    assert [q["topology"] for q in report["queues"]] == [None, None]
    assert topology_lines(report["queues"], quickstart.name) == ([], [])  # and the text shows nothing of it


def _pcluster_p5(sandbox, tmp_path):
    """configs/quickstart-parallelcluster.yaml with its queue gpu 2 static p5.48xlarge: the same status on another
    backend, through its own ``describe``."""
    cli = PclusterCli(sandbox, tmp_path)
    data = yaml.safe_load(cli.spec.read_text())
    data["queues"] = [{"name": "gpu", "instance_type": "p5.48xlarge", "nodes": 2}]
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    _ok(cli.run_in_process("create", str(cli.spec), "--yes", "--skip-preflight"))
    yield cli
    _ok(cli.run_in_process("destroy", cli.name, "--yes"))


setattr(_pcluster_p5, E2E_FIXTURE_ATTR, True)
pcluster_p5 = pytest.fixture(_pcluster_p5, name="pcluster_p5")


def _launch_static_nodes(sandbox, cli, count: int) -> list[str]:
    """What the head node's clustermgtd does for a queue's static nodes (the sandbox runs no head node software):
    p5.48xlarge in the head node's subnet, tagged as ParallelCluster tags its compute nodes (pcluster's queues
    stack: parallelcluster:cluster-name, node-type Compute, queue-name), which is how its
    describe-cluster-instances finds them. Not from the queue's launch template: the sandbox's RunInstances fails
    on that template's block device mappings (a sandbox gap, not AWS's behaviour)."""
    [head] = cli.instances()
    tags = [{"Key": "parallelcluster:cluster-name", "Value": cli.name}, {"Key": "parallelcluster:node-type",
            "Value": "Compute"}, {"Key": "parallelcluster:queue-name", "Value": "gpu"}]
    launched = sandbox.client("ec2").run_instances(
        ImageId=head["ImageId"], InstanceType="p5.48xlarge", MinCount=count, MaxCount=count,
        SubnetId=head["SubnetId"], TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"]
    return sorted(i["InstanceId"] for i in launched)


def test_parallelcluster_status_groups_its_queue_as_ec2_says(pcluster_p5, sandbox, monkeypatch):
    nodes = _launch_static_nodes(sandbox, pcluster_p5, 2)
    report, sent = _status(pcluster_p5, monkeypatch)
    running = sorted(i["id"] for i in report["instances"] if i["queue"] == "gpu" and i["state"] == "running")
    assert running == nodes, report["instances"]
    said = _said(sandbox.client("ec2"), running)
    gpu = _gpu(report)
    assert gpu["groups"] == _groups_as_ec2_says(said)
    assert (gpu["node_count"], gpu["spine_count"]) == (2, len({path[0] for path in said.values()}))
    assert sum(n for (operation, _), n in sent.items() if operation == TOPOLOGY_CALL) == 1


def test_eks_status_groups_a_node_group_as_ec2_says(sandbox, sandbox_env, tmp_path, monkeypatch):
    """EKS through its own ``describe``: a p5.48xlarge node group made with plain boto3 (as
    tests/backends/eks/test_eks_system_row.py makes its cluster), the cluster recorded, then ``status``."""
    from fixtures.lifecycle import CONFIGS
    from fixtures.sandbox_eks import REGION, new_cluster

    from fmcluster.connection import aws
    from fmcluster.render.common import CLUSTER_TAG
    from fmcluster.state.store import StateStore
    from fmcluster.verbs.lifecycle.status import status

    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, REGION, sandbox.endpoint_url)
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    eks, ec2, name, node_role, subnets = new_cluster(sandbox, "topo", creator_admin=True)
    try:
        eks.tag_resource(resourceArn=eks.describe_cluster(name=name)["cluster"]["arn"], tags={CLUSTER_TAG: name})
        eks.create_nodegroup(clusterName=name, nodegroupName="gpu", subnets=subnets[:1], nodeRole=node_role,
                             instanceTypes=["p5.48xlarge"], scalingConfig={"minSize": 2, "maxSize": 2,
                                                                           "desiredSize": 2})
        spec = (CONFIGS / "p5-kueue-eks.yaml").read_text()
        spec = spec.replace("name: p5-kueue", f"name: {name}").replace("region: us-east-1", f"region: {REGION}")
        StateStore().save_cluster(name, REGION, "eks", spec, None, "ACTIVE", endpoint_url=aws.target_label())
        eks.get_waiter("nodegroup_active").wait(clusterName=name, nodegroupName="gpu",
                                                WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        found = ec2.describe_instances(Filters=[
            {"Name": "tag:eks:nodegroup-name", "Values": ["gpu"]}, {"Name": "tag:eks:cluster-name", "Values": [name]}])
        states = {i["InstanceId"]: i["State"]["Name"] for r in found["Reservations"] for i in r["Instances"]}
        running = sorted(i for i, state in states.items() if state == "running")
        assert len(running) == 2, states
        said = _said(sandbox.client("ec2", REGION), running)
        gpu = _gpu(status(name, False))
        assert gpu["groups"] == _groups_as_ec2_says(said)
        assert (gpu["node_count"], gpu["spine_count"]) == (2, len({path[0] for path in said.values()}))
    finally:
        for group in eks.list_nodegroups(clusterName=name)["nodegroups"]:
            eks.delete_nodegroup(clusterName=name, nodegroupName=group)
        eks.delete_cluster(name=name)
