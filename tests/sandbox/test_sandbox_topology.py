"""The sandbox's EC2 topology, spoken to with plain boto3 as any AWS client would: DescribeInstanceTopology and
DescribeCapacityReservationTopology as the EC2 API reference and the EC2 user guide ("Amazon EC2 topology",
"How Amazon EC2 topology works", "Prerequisites for Amazon EC2 topology") describe them, the sandbox's per-zone
layout (docs/sandbox-fidelity.md: 2 instances per bottom node, 2 bottom nodes per middle node, 2 middle nodes per
spine), the ``topology_move`` fault, and the ``topology.k8s.aws/network-node-layer-*`` labels of EKS nodes.

The 16-node queue goes to an account of its own, so its zone's layout starts empty whatever ran before on the
same sandbox."""

from __future__ import annotations

import datetime as dt
import re
import urllib.error
import uuid

import pytest
from botocore.exceptions import ClientError

AMI = "ami-12c6146b"  # one of the AMIs every moto region has
NODE = re.compile(r"nn-[0-9a-f]{17}")  # EKS user guide's example label value: nn-e50490a237cb0f01a
NO_RETRY = {"retries": {"max_attempts": 1}}
# Hand-typed from the layout the docs state: a bottom node holds 2 instances, a middle node 2 bottom nodes, a spine
# 2 middle nodes: 8 instances per spine.
PER_LEAF, PER_MIDDLE, PER_SPINE = 2, 4, 8


def _code(call) -> str:
    with pytest.raises(ClientError) as refused:
        call()
    return refused.value.response["Error"]["Code"]


def _subnet(ec2, zone: str) -> str:
    return ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                         {"Name": "availability-zone", "Values": [zone]}])["Subnets"][0]["SubnetId"]


def _launch(ec2, instance_type: str, zone: str, count: int = 1, **extra) -> list[str]:
    out = ec2.run_instances(ImageId=AMI, InstanceType=instance_type, MinCount=count, MaxCount=count,
                            SubnetId=_subnet(ec2, zone), **extra)["Instances"]
    return [i["InstanceId"] for i in sorted(out, key=lambda i: i["AmiLaunchIndex"])]


def _topology(ec2, **kwargs) -> dict[str, dict]:
    found = {}
    for page in ec2.get_paginator("describe_instance_topology").paginate(**kwargs):
        found.update({i["InstanceId"]: i for i in page["Instances"]})
    return found


def _zone_id(ec2, zone: str) -> str:
    return ec2.describe_availability_zones(ZoneNames=[zone])["AvailabilityZones"][0]["ZoneId"]


@pytest.fixture(scope="module")
def p5_queue(sandbox):
    """16 p5.48xlarge launched into one zone of an account nobody used yet, as a 16-node queue would be: (ec2,
    instance ids in launch order, the zone). Slots are never reused, so in a used account an instance launched
    and ended before would shift the layout."""
    ec2 = sandbox.client_in_a_new_account("ec2", **NO_RETRY)
    zone = "us-east-1a"
    ids = _launch(ec2, "p5.48xlarge", zone, 16)
    yield ec2, ids, zone
    ec2.terminate_instances(InstanceIds=ids)


def test_a_16_node_p5_queue_fills_bottom_nodes_in_order_across_two_spines(p5_queue):
    ec2, ids, zone = p5_queue
    answer = _topology(ec2, Filters=[{"Name": "availability-zone", "Values": [zone]}])
    assert set(answer) == set(ids)
    nodes = [answer[i]["NetworkNodes"] for i in ids]
    assert all(len(n) == 3 and all(NODE.fullmatch(x) for x in n) for n in nodes)  # p5: "Returns 3 network nodes"
    # top-down: the first node is the spine, the last the node the instance hangs off
    for layer, per_node in ((0, PER_SPINE), (1, PER_MIDDLE), (2, PER_LEAF)):
        groups = [tuple(ids[k] for k in range(len(ids)) if nodes[k][layer] == node)
                  for node in dict.fromkeys(n[layer] for n in nodes)]
        assert groups == [tuple(ids[k:k + per_node]) for k in range(0, 16, per_node)]
    assert len({n[0] for n in nodes}) == 2  # two spines
    zone_id = _zone_id(ec2, zone)
    assert {(i["AvailabilityZone"], i["ZoneId"], i["InstanceType"]) for i in answer.values()} == {
        (zone, zone_id, "p5.48xlarge")}
    assert all("CapacityBlockId" not in i and "GroupName" not in i for i in answer.values())


def test_paging_filters_and_limits_follow_the_api_reference(p5_queue):
    ec2, ids, where = p5_queue
    zone = [{"Name": "availability-zone", "Values": [where]}]
    pages, token, seen = 0, None, []
    while True:
        page = ec2.describe_instance_topology(Filters=zone, MaxResults=5, **({"NextToken": token} if token else {}))
        pages, seen = pages + 1, seen + [i["InstanceId"] for i in page["Instances"]]
        assert len(page["Instances"]) <= 5
        token = page.get("NextToken")
        if not token:
            break
    assert (pages, sorted(seen)) == (4, sorted(ids))
    assert len(ec2.describe_instance_topology(Filters=zone)["Instances"]) == 16  # "Default: 20"
    for pattern, hits in (("p5*", 16), ("p5.48xlarg?", 16), ("p5.48xlarge?", 16), ("p4d*", 0), ("p5", 0)):
        found = _topology(ec2, Filters=zone + [{"Name": "instance-type", "Values": [pattern]}])
        assert len(found) == hits, pattern
    zone_id = _zone_id(ec2, where)
    assert set(_topology(ec2, Filters=[{"Name": "zone-id", "Values": [zone_id]}])) >= set(ids)
    assert set(_topology(ec2, InstanceIds=ids[:2])) == set(ids[:2])
    assert _code(lambda: ec2.describe_instance_topology(InstanceIds=ids[:1], MaxResults=5)) == \
        "InvalidParameterCombination"
    assert _code(lambda: ec2.describe_instance_topology(MaxResults=101)) == "InvalidParameterValue"
    many = [f"i-{n:017x}" for n in range(101)]
    assert _code(lambda: ec2.describe_instance_topology(InstanceIds=many)) == "InvalidParameterValue"
    assert _code(lambda: ec2.describe_instance_topology(GroupNames=[f"g{n}" for n in range(101)])) == \
        "InvalidParameterValue"
    assert _code(lambda: ec2.describe_instance_topology(Filters=[{"Name": "state", "Values": ["running"]}])) == \
        "InvalidParameterValue"


def test_only_running_instances_of_the_documented_types_have_a_topology(sandbox):
    ec2 = sandbox.client("ec2", **NO_RETRY)
    general = _launch(ec2, "m5.large", "us-east-1f")
    stopped, trainium = _launch(ec2, "trn1.32xlarge", "us-east-1f", 2)
    blackwell = _launch(ec2, "p6-b200.48xlarge", "us-east-1c")
    ec2.stop_instances(InstanceIds=[stopped])
    answer = _topology(ec2, InstanceIds=general + [stopped, trainium] + blackwell)
    assert set(answer) == {trainium, blackwell[0]}
    assert len(answer[trainium]["NetworkNodes"]) == 3
    assert len(answer[blackwell[0]]["NetworkNodes"]) == 4  # p6-b200: "Returns 4 network nodes"
    ec2.terminate_instances(InstanceIds=general + [stopped, trainium] + blackwell)


def test_a_placement_group_is_named_and_filters(sandbox):
    ec2 = sandbox.client("ec2", "us-west-2", **NO_RETRY)
    group = f"topo-{uuid.uuid4().hex[:8]}"
    ec2.create_placement_group(GroupName=group, Strategy="cluster")
    grouped = _launch(ec2, "p5.48xlarge", "us-west-2c", 2, Placement={"GroupName": group})
    loose = _launch(ec2, "p5.48xlarge", "us-west-2c")
    answer = _topology(ec2, GroupNames=[group])
    assert set(answer) == set(grouped) and {i["GroupName"] for i in answer.values()} == {group}
    ec2.terminate_instances(InstanceIds=grouped + loose)


def test_capacity_reservation_topology_before_and_after_launch(sandbox):
    ec2 = sandbox.client("ec2", "eu-north-1", **NO_RETRY)

    def reserve(zone: str, count: int, instance_type: str = "p5.48xlarge") -> str:
        return ec2.create_capacity_reservation(InstanceType=instance_type, InstancePlatform="Linux/UNIX",
                                               AvailabilityZone=zone, InstanceCount=count)["CapacityReservation"][
            "CapacityReservationId"]

    pair, spine, split = reserve("eu-north-1a", 2), reserve("eu-north-1b", 8), reserve("eu-north-1c", 16)
    general = reserve("eu-north-1a", 2, "m5.large")
    start = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=2)
    scheduled = sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "region": "eu-north-1", "instance_type": "p5.48xlarge", "availability_zone": "eu-north-1a", "count": 2,
        "type": "capacity-block", "start": start.isoformat(),
        "end": (start + dt.timedelta(days=1)).isoformat()})["reservation_id"]
    answer, token = {}, None
    while True:  # botocore has no paginator for this call
        page = ec2.describe_capacity_reservation_topology(**({"NextToken": token} if token else {}))
        assert len(page["CapacityReservations"]) <= 10  # "Default: 10"
        answer.update({r["CapacityReservationId"]: r for r in page["CapacityReservations"]})
        token = page.get("NextToken")
        if not token:
            break
    assert {pair, spine, split, general, scheduled} <= set(answer)
    # one bottom node (2 instances) shares all 3 nodes; one spine (8) only the spine; two spines nothing
    assert [len(answer[r]["NetworkNodes"]) for r in (pair, spine, split)] == [3, 1, 0]
    assert answer[general]["NetworkNodes"] == [] and answer[scheduled]["NetworkNodes"] == []  # type; state
    assert answer[scheduled]["State"] == "scheduled" and answer[pair]["State"] == "active"
    assert answer[pair]["AvailabilityZoneId"] == _zone_id(ec2, "eu-north-1a")
    # the capacity is where the reservation said it would be
    launched = _launch(ec2, "p5.48xlarge", "eu-north-1a", 2, CapacityReservationSpecification={
        "CapacityReservationTarget": {"CapacityReservationId": pair}})
    assert {tuple(i["NetworkNodes"]) for i in _topology(ec2, InstanceIds=launched).values()} == {
        tuple(answer[pair]["NetworkNodes"])}
    ec2.terminate_instances(InstanceIds=launched)

    page = ec2.describe_capacity_reservation_topology(MaxResults=2)
    assert len(page["CapacityReservations"]) == 2 and page["NextToken"]
    assert _code(lambda: ec2.describe_capacity_reservation_topology(MaxResults=11)) == "InvalidParameterValue"
    assert _code(lambda: ec2.describe_capacity_reservation_topology(CapacityReservationIds=[pair], MaxResults=5)) \
        == "InvalidParameterCombination"
    assert _code(lambda: ec2.describe_capacity_reservation_topology(
        CapacityReservationIds=[f"cr-{n:017x}" for n in range(11)])) == "InvalidParameterValue"
    assert _code(lambda: ec2.describe_capacity_reservation_topology(
        CapacityReservationIds=["cr-0123456789abcdef9"])) == "InvalidCapacityReservationId.NotFound"
    only = ec2.describe_capacity_reservation_topology(Filters=[{"Name": "instance-type", "Values": ["m5*"]}])
    assert [r["CapacityReservationId"] for r in only["CapacityReservations"]] == [general]


def test_the_move_fault_rehomes_an_instance_and_is_refused_for_a_place_that_is_not_there(sandbox, p5_queue):
    ec2, ids, _zone = p5_queue
    first, last = ids[0], ids[-1]
    before = _topology(ec2, InstanceIds=[first, last])
    target = before[last]["NetworkNodes"][-1]
    sandbox.faults({"topology_move": {first: target}})
    assert _topology(ec2, InstanceIds=[first])[first]["NetworkNodes"] == before[last]["NetworkNodes"]
    for bad in ({first: before[last]["NetworkNodes"][0]},  # a spine is not a bottom node
                {"i-0123456789abcdef0": target}):  # no such instance
        with pytest.raises(urllib.error.HTTPError) as refused:
            sandbox.faults({"topology_move": bad})
        assert refused.value.code == 400
    sandbox.faults({"topology_move": {first: None}})
    assert _topology(ec2, InstanceIds=[first])[first]["NetworkNodes"] == before[first]["NetworkNodes"]


def test_a_move_names_an_instance_and_a_network_node_id():
    from fmcluster_sandbox.faults import Faults

    faults = Faults()
    for bad in ({"p5-node": "nn-0123456789abcdef0"}, {"i-0123456789abcdef0": "leaf-1"},
                {"i-0123456789abcdef0": "nn-0123"}):
        with pytest.raises(ValueError):
            faults.update({"topology_move": bad})
    faults.update({"topology_move": {"i-0123456789abcdef0": "nn-0123456789abcdef0"}})
    assert faults.moved_to("i-0123456789abcdef0") == "nn-0123456789abcdef0"
    faults.update({"reset": True})
    assert faults.moved_to("i-0123456789abcdef0") is None


def test_eks_nodes_carry_the_network_node_labels_of_their_instances(sandbox):
    from fixtures.kube import cluster_api
    from fixtures.sandbox_eks import new_cluster

    eks, ec2, name, node_role, subnets = new_cluster(sandbox, "topo", creator_admin=True)
    template = ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
        "ImageId": AMI, "InstanceType": "p5.48xlarge"})["LaunchTemplate"]
    eks.create_nodegroup(clusterName=name, nodegroupName="p5", subnets=subnets[:1], nodeRole=node_role,
                         scalingConfig={"minSize": 0, "maxSize": 2, "desiredSize": 2},
                         launchTemplate={"id": template["LaunchTemplateId"], "version": "1"})
    call = cluster_api(sandbox.endpoint_url, eks.describe_cluster(name=name)["cluster"], "us-east-2")
    nodes = call("GET", "/api/v1/nodes")[1]["items"]
    by_instance = {n["spec"]["providerID"].rsplit("/", 1)[-1]: n["metadata"]["labels"] for n in nodes}
    answer = _topology(ec2, InstanceIds=list(by_instance))
    assert len(answer) == 2
    for instance_id, labels in by_instance.items():
        layers = {k: v for k, v in labels.items() if k.startswith("topology.k8s.aws/network-node-layer-")}
        assert layers == {f"topology.k8s.aws/network-node-layer-{n}": node
                          for n, node in enumerate(answer[instance_id]["NetworkNodes"], start=1)}
    eks.delete_nodegroup(clusterName=name, nodegroupName="p5")
