"""The sandbox's Kubernetes API takes a Node's labels, annotations and taints by PATCH (fmcluster writes its
UltraServer label so, and the burn-in gate lifts its taint so and notes a failed node's figures), and EC2
DescribeInstanceTopology gives ``CapacityBlockId`` to UltraServer instances only; plain boto3 and plain HTTP.

Rules, with their pages: Kubernetes "Labels and Selectors" (a label value is at most 63 characters, alphanumeric at
both ends, ``-``, ``_``, ``.`` between; a patch that sets a label to null removes it, "JSON merge patch", RFC 7386);
"Nodes" (a Node object belongs to its instance: a replacement registers a new Node, without labels set by hand on the
old); EC2 API reference, InstanceTopology ``CapacityBlockId``: "This parameter is only supported for UltraServer
instances". Taints: Kubernetes API reference, Taint (effect ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``),
``validateNodeTaints`` ("taints must be unique by key and effect pair"); the kubelet applies ``--register-with-taints``
"when registering the node" (kubelet reference), which is how an EKS managed node group's taints reach its nodes
("Recipe: Prevent pods from being scheduled on specific nodes", EKS User Guide). What the sandbox does not emulate,
said in docs/sandbox-fidelity.md: any other field of a Node written through the API (refused 422 here, kept by a
real API server).
"""

from __future__ import annotations

import datetime as dt
import uuid

from fixtures.kube import cluster_api, workload
from fixtures.sandbox_eks import REGION, ZONES

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def _one_node(world, sandbox):
    """A cluster whose creator may call its API and a node group of one: (cluster, group, api call, its Node)."""
    cluster = world.cluster(accessConfig={"authenticationMode": "API",
                                          "bootstrapClusterCreatorAdminPermissions": True})
    group = world.nodegroup(cluster, size=1)["nodegroupName"]
    api = cluster_api(sandbox.endpoint_url, world.eks.describe_cluster(name=cluster)["cluster"], REGION)
    (node,) = api("GET", f"/api/v1/nodes?labelSelector=eks.amazonaws.com/nodegroup%3D{group}")[1]["items"]
    return cluster, group, api, node


def test_a_nodes_labels_are_patched_and_a_replacement_has_none(world, sandbox):
    cluster, group, api, node = _one_node(world, sandbox)
    name = node["metadata"]["name"]

    code, patched = api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": {"example.com/domain": "cb-1"}}},
                        MERGE)
    assert code == 200 and patched["metadata"]["labels"]["example.com/domain"] == "cb-1"
    assert api("GET", f"/api/v1/nodes/{name}")[1]["metadata"]["labels"]["example.com/domain"] == "cb-1"
    listed = api("GET", "/api/v1/nodes?labelSelector=example.com/domain%3Dcb-1")[1]["items"]
    assert [n["metadata"]["name"] for n in listed] == [name]

    # refused as the API server refuses them: a label value with a space; and what the sandbox does not keep
    assert api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": {"example.com/domain": "a b"}}},
               MERGE)[0] == 422
    assert api("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}}, MERGE)[0] == 422
    # null removes it (JSON merge patch)
    code, patched = api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": {"example.com/domain": None}}},
                        MERGE)
    assert code == 200 and "example.com/domain" not in patched["metadata"]["labels"]

    api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": {"example.com/domain": "cb-2"}}}, MERGE)
    (instance,) = world.instances(cluster, group)
    world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    (fresh,) = api("GET", f"/api/v1/nodes?labelSelector=eks.amazonaws.com/nodegroup%3D{group}")[1]["items"]
    assert fresh["spec"]["providerID"] != node["spec"]["providerID"]
    assert "example.com/domain" not in fresh["metadata"]["labels"]


def test_a_nodes_annotations_are_patched_refused_past_256_kib_and_a_replacement_has_none(world, sandbox):
    """Kubernetes "Annotations": a key as a label's, any string value; apimachinery ``TotalAnnotationSizeLimitB`` is
    256 * 1024 bytes of keys and values together (the burn-in gate keeps a failed node's figures in one)."""
    cluster, group, api, node = _one_node(world, sandbox)
    name = node["metadata"]["name"]
    line = "dcgm: level 1 failed: 7 of 8 GPUs (test, 'memory'); a space and (brackets) are fine here"

    code, patched = api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"annotations": {"example.com/why": line}}},
                        MERGE)
    assert code == 200 and patched["metadata"]["annotations"]["example.com/why"] == line
    assert api("GET", f"/api/v1/nodes/{name}")[1]["metadata"]["annotations"]["example.com/why"] == line
    assert api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"annotations": {"a b/c": "x"}}}, MERGE)[0] == 422
    too_long = "x" * (256 * 1024)  # with its key, one byte per character, past the limit
    assert api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"annotations": {"example.com/big": too_long}}},
               MERGE)[0] == 422
    assert api("GET", f"/api/v1/nodes/{name}")[1]["metadata"]["annotations"] == {"example.com/why": line}
    code, patched = api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"annotations": {"example.com/why": None}}},
                        MERGE)
    assert code == 200 and "example.com/why" not in (patched["metadata"].get("annotations") or {})

    api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"annotations": {"example.com/why": line}}}, MERGE)
    (instance,) = world.instances(cluster, group)
    world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    (fresh,) = api("GET", f"/api/v1/nodes?labelSelector=eks.amazonaws.com/nodegroup%3D{group}")[1]["items"]
    assert "example.com/why" not in (fresh["metadata"].get("annotations") or {})


def test_a_nodes_taint_is_lifted_by_patch_placement_follows_and_a_replacement_registers_it_again(world, sandbox):
    cluster = world.cluster(accessConfig={"authenticationMode": "API",
                                          "bootstrapClusterCreatorAdminPermissions": True})
    pending = {"key": "fmcluster.io/burn-in", "value": "pending", "effect": "NO_SCHEDULE"}
    group = world.nodegroup(cluster, size=1, taints=[pending])["nodegroupName"]
    api = cluster_api(sandbox.endpoint_url, world.eks.describe_cluster(name=cluster)["cluster"], REGION)
    nodes = f"/api/v1/nodes?labelSelector=eks.amazonaws.com/nodegroup%3D{group}"
    (node,) = api("GET", nodes)[1]["items"]
    name = node["metadata"]["name"]
    registered = [{"key": "fmcluster.io/burn-in", "value": "pending", "effect": "NoSchedule"}]
    assert node["spec"]["taints"] == registered
    ds_path = "/apis/apps/v1/namespaces/kube-system/daemonsets"
    assert api("POST", ds_path, workload("DaemonSet", "agent", {"app": "agent"}))[0] == 201
    assert api("GET", f"{ds_path}/agent")[1]["status"]["desiredNumberScheduled"] == 0  # it tolerates no such taint

    # refused as the API server refuses them, and nothing kept
    for bad in ([{"key": "fmcluster.io/burn-in", "value": "pending", "effect": "NoRun"}],
                [{"key": "a b", "effect": "NoSchedule"}],
                [{"key": "x", "value": "1", "effect": "NoSchedule"},
                 {"key": "x", "value": "2", "effect": "NoSchedule"}]):
        code, body = api("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": bad}}, STRATEGIC)
        assert code == 422, (bad, body)
    assert api("GET", f"/api/v1/nodes/{name}")[1]["spec"]["taints"] == registered

    code, patched = api("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": []}}, STRATEGIC)
    assert code == 200 and "taints" not in patched["spec"]
    assert "taints" not in api("GET", f"/api/v1/nodes/{name}")[1]["spec"]
    assert api("GET", f"{ds_path}/agent")[1]["status"]["desiredNumberScheduled"] == 1

    (instance,) = world.instances(cluster, group)
    world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    (fresh,) = api("GET", nodes)[1]["items"]
    assert fresh["spec"]["providerID"] != node["spec"]["providerID"]
    assert fresh["spec"]["taints"] == registered


def test_a_p5_on_a_capacity_block_has_no_capacity_block_id_in_its_topology(sandbox):
    """A p5 instance in a Capacity Block is not an UltraServer instance: its topology has no CapacityBlockId."""
    ec2 = sandbox.client("ec2", REGION)
    now = dt.datetime.now(dt.timezone.utc)
    block = sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "region": REGION, "availability_zone": ZONES[0], "instance_type": "p5.48xlarge", "count": 1,
        "type": "capacity-block", "start": (now - dt.timedelta(hours=1)).isoformat(),
        "end": (now + dt.timedelta(days=1)).isoformat(), "reservation_id": "cr-" + uuid.uuid4().hex[:17]})[
        "reservation_id"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    (launched,) = ec2.run_instances(
        ImageId=image, InstanceType="p5.48xlarge", MinCount=1, MaxCount=1, Placement={"AvailabilityZone": ZONES[0]},
        InstanceMarketOptions={"MarketType": "capacity-block"},
        CapacityReservationSpecification={"CapacityReservationTarget": {"CapacityReservationId": block}})["Instances"]
    (place,) = ec2.describe_instance_topology(InstanceIds=[launched["InstanceId"]])["Instances"]
    assert place["NetworkNodes"] and "CapacityBlockId" not in place
