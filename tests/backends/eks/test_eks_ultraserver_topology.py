"""The UltraServer level of an EKS cluster's topology: fmcluster labels each node of an UltraServer queue with its
UltraServer, read from EC2, so that Kueue's and KAI's Topology can name it under the network layers.

Facts typed by hand, with their source:

* DescribeInstanceTopology's ``CapacityBlockId`` "is only supported for UltraServer instances and identifies
  instances within the UltraServer domain" (EC2 API reference, InstanceTopology);
* a managed node group's nodes carry ``eks.amazonaws.com/nodegroup`` (EKS user guide, "Managed node groups"), and a
  node's ``spec.providerID`` is ``aws:///<zone>/<instance id>`` (the AWS cloud provider's form);
* u-p6e-gb200x36 = 9 ``p6e-gb200.36xlarge`` instances, u-p6e-gb200x72 = 18 (EKS user guide, "Use P6e-GB200
  UltraServers with Amazon EKS"); P6e-GB200 Capacity Blocks are in the Dallas Local Zone (EC2 user guide, "Launch
  instances using Capacity Blocks": "you must be opted in to the Dallas Local Zone");
* the Topology objects are checked against the pinned Kueue and KAI CRDs (as tests/backends/eks/test_eks_topology.py
  does).

The sandbox cluster here is made with plain boto3 (an EKS cluster and one GB200 node group on a u-p6e-gb200x36
block): no fmcluster `create`, no scheduler, so it costs seconds; the labelling pass is fmcluster's own code, and the
check is plain boto3's DescribeInstanceTopology and the cluster's own Kubernetes API.
"""

from __future__ import annotations

import json
import uuid

import pytest
from fixtures.eks_specs import eks_spec
from fixtures.ultraserver_world import buy_x36_block, dallas_network

from fmcluster.backends.eks.nodes import ultraserver_labels
from fmcluster.backends.eks.nodes.ultraserver_labels import Node, decide, instance_of

pytest.importorskip("fmcluster_sandbox.eks")

LABEL = "fmcluster.io/ultraserver"
REGION = "us-east-1"
GB200 = "p6e-gb200.36xlarge"


def test_the_instance_of_a_provider_id() -> None:
    assert instance_of("aws:///us-east-1-dfw-2a/i-0123456789abcdef0") == "i-0123456789abcdef0"
    assert instance_of("kind://docker/kind/node") is None
    assert instance_of(None) is None


def test_what_one_pass_decides() -> None:
    """A node already right is kept, a wrong or missing one labelled, one EC2 has no UltraServer for yet waits, and a
    value more nodes share than one UltraServer holds (9 for u-p6e-gb200x36) labels none of them."""
    nodes = [Node("a", "i-a", "cb-1"), Node("b", "i-b", None), Node("c", "i-c", "cb-old"), Node("d", "i-d", None),
             Node("e", None, None)]
    found = decide("train", nodes, {"i-a": "cb-1", "i-b": "cb-1", "i-c": "cb-1", "i-d": None}, 9)
    assert (found.kept, found.labelled, sorted(found.waiting), found.too_many) == (
        {"a": "cb-1"}, {"b": "cb-1", "c": "cb-1"}, ["d", "e"], {})
    crowded = decide("train", [Node(f"n{i}", f"i-{i}", None) for i in range(10)], {f"i-{i}": "cb-1" for i in range(10)},
                     9)
    assert (crowded.labelled, sorted(crowded.too_many["cb-1"])) == ({}, [f"n{i}" for i in range(10)])
    assert any("more than one UltraServer holds" in line for line in crowded.lines())


def test_only_ultraserver_queues_are_labelled(tmp_path, monkeypatch) -> None:
    """A p5 queue gets no UltraServer label; a GB200 queue on a u-p6e-gb200x36 block gets it, 9 nodes a domain."""
    from fixtures.eks_specs import GB200_SPEC

    from fmcluster.spec import load_spec

    assert ultraserver_labels.ultraserver_queues(eks_spec("kueue")) == {}
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    path = tmp_path / "spec.yaml"
    path.write_text(GB200_SPEC)
    spec = load_spec(path).spec
    sizes = ultraserver_labels.ultraserver_queues(spec)
    assert sizes and set(sizes.values()) <= {9, 18}
    # create's step for each: after its node group, by the reference to the group's ARN (the graph's edge)
    from fmcluster.backends.eks.nodes import ultraserver_resource

    steps = ultraserver_resource.resources(spec)
    assert [(s.kind, s.key) for s in steps] == [("ultraserver_labels", q) for q in sizes]
    assert all(f"eks_nodegroup.{s.key}.arn" in s.references() for s in steps)
    assert ultraserver_resource.resources(eks_spec("kueue")) == []
    # in the whole plan's graph, each step comes after its node group and nothing waits on it
    from fmcluster.aws.build import build
    from fmcluster.backends.eks.backend import makers
    from fmcluster.backends.eks.render import render
    from fmcluster.engine.graph import wire

    documents = render(spec, subnet_id="subnet-0123456789abcdef0", vpc_id="vpc-0123456789abcdef0").documents
    ordered = wire(build(documents, makers(spec, documents), "EKS") + steps)
    for step in steps:
        assert step.depends_on == (f"eks_nodegroup:{step.key}",)
        assert ordered.index(step) > ordered.index(next(r for r in ordered if r.name == step.depends_on[0]))
    assert not any(set(r.depends_on) & {s.name for s in steps} for r in ordered)


def _role(iam, name: str, service: str) -> str:
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": service},
                                                     "Action": "sts:AssumeRole"}]}
    return iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]


def _gb200_cluster(sandbox) -> tuple[str, str, str]:
    """An EKS cluster (two AZ subnets) and a 9-node GB200 node group ``train`` on a u-p6e-gb200x36 Capacity Block
    in the Dallas Local Zone: (cluster, node group, reservation id)."""
    sandbox.faults({"latency": {"eks.cluster": 0, "eks.nodegroup": 0}})
    ec2, eks, iam = (sandbox.client(s, REGION) for s in ("ec2", "eks", "iam"))
    network = dallas_network(sandbox)
    second, dallas = network["second"], network["dallas"]
    reservation = {"CapacityReservationId": buy_x36_block(sandbox)}
    suffix = uuid.uuid4().hex[:8]
    name = f"us-{suffix}"
    eks.create_cluster(name=name, roleArn=_role(iam, f"us-cluster-{suffix}", "eks.amazonaws.com"),
                       resourcesVpcConfig={"subnetIds": [network["private_subnet"], second]},
                       accessConfig={"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True})
    template = ec2.create_launch_template(LaunchTemplateName=f"us-{suffix}", LaunchTemplateData={
        "InstanceType": GB200, "InstanceMarketOptions": {"MarketType": "capacity-block"},
        "CapacityReservationSpecification": {"CapacityReservationTarget": {
            "CapacityReservationId": reservation["CapacityReservationId"]}}})["LaunchTemplate"]
    eks.create_nodegroup(clusterName=name, nodegroupName="train", nodeRole=_role(iam, f"us-node-{suffix}",
                                                                                   "ec2.amazonaws.com"),
                         subnets=[dallas], capacityType="CAPACITY_BLOCK", amiType="AL2023_ARM_64_NVIDIA",
                         scalingConfig={"minSize": 9, "maxSize": 9, "desiredSize": 9},
                         launchTemplate={"id": template["LaunchTemplateId"], "version": "1"})
    assert eks.describe_nodegroup(clusterName=name, nodegroupName="train")["nodegroup"]["status"] == "ACTIVE"
    return name, "train", reservation["CapacityReservationId"]


def _nodes(api, group: str) -> dict[str, tuple[str, str | None]]:
    """Node name -> (its instance id, its UltraServer label), as the cluster's API serves them."""
    from lightkube.resources.core_v1 import Node as KubeNode

    return {n.metadata.name: (n.spec.providerID.rsplit("/", 1)[-1], (n.metadata.labels or {}).get(LABEL))
            for n in api.client.list(KubeNode, labels={"eks.amazonaws.com/nodegroup": group})}


def _capacity_block_ids(ec2, ids: list[str]) -> dict[str, str | None]:
    """Plain boto3: each instance's DescribeInstanceTopology CapacityBlockId."""
    return {i["InstanceId"]: i.get("CapacityBlockId")
            for i in ec2.describe_instance_topology(InstanceIds=ids)["Instances"]}


def test_every_gb200_node_carries_its_ultraserver_from_ec2(sandbox, sandbox_env, monkeypatch) -> None:
    """fmcluster's create step for the queue (the engine resource `create` walks after the node group): the plan
    shows each node's label to be written, the step writes them, the next plan is in sync; a node replaced after it
    has no label, and the next pass labels it. Each label equals plain boto3's CapacityBlockId for the node's
    instance, one value for the UltraServer's 9 instances."""
    from fmcluster.backends.eks.kubernetes.access import KubeApi
    from fmcluster.backends.eks.nodes.ultraserver_resource import UltraServerLabels
    from fmcluster.connection import aws
    from fmcluster.engine import Context
    from fmcluster.render.documents import Document

    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, None, sandbox.endpoint_url)
    cluster, group, _ = _gb200_cluster(sandbox)
    ec2 = sandbox.client("ec2", REGION)
    ctx = Context(cluster=cluster, region=REGION, client=lambda service: sandbox.client(service, REGION))
    ctx.publish({f"eks_nodegroup.{group}.arn": "arn:aws:eks:us-east-1:123456789012:nodegroup/x",
                 f"eks_nodegroup.{group}.desired": 9})
    body = {"nodegroup": f"${{eks_nodegroup.{group}.arn}}", "nodes": f"${{eks_nodegroup.{group}.desired}}"}
    document = Document("ultraserver-labels-train.yaml", "ultraserver_labels", group, "kubernetes", {"": "patch"}, "",
                        body)
    step = UltraServerLabels(group, document, cluster, per_ultraserver=9)
    try:
        before = step.read(ctx, None)
        planned = step.changes(ctx, before)
        assert len(planned) == 9 and {c.old for c in planned} == {None}, planned
        done = step.create(ctx, "token")
        assert (done.phase, done.status) == ("ready", "LABELLED") and "labelled 9 node(s)" in done.detail, done
        api = KubeApi.of(ctx, cluster)
        nodes = _nodes(api, group)
        blocks = _capacity_block_ids(ec2, [i for i, _ in nodes.values()])
        assert len(nodes) == 9 and all(blocks.values())
        assert {name: label for name, (_, label) in nodes.items()} == {
            name: blocks[instance] for name, (instance, _) in nodes.items()}
        assert len(set(blocks.values())) == 1  # one UltraServer, one value
        assert step.changes(ctx, step.read(ctx, None)) == []  # the next plan: in sync

        # a node replaced after the pass (EKS replaces an instance terminated out of band) has no label yet
        gone = sorted(nodes)[0]
        ec2.terminate_instances(InstanceIds=[nodes[gone][0]])
        after = _nodes(api, group)
        fresh = sorted(set(after) - set(nodes))
        assert len(fresh) == 1 and after[fresh[0]][1] is None, after
        again = step.read(ctx, None)
        assert [c.path for c in step.changes(ctx, again)] == [f"labels.{fresh[0]}"]
        step.update(ctx, again, step.changes(ctx, again), "token2")
        assert _nodes(api, group)[fresh[0]][1] == _capacity_block_ids(ec2, [after[fresh[0]][0]])[after[fresh[0]][0]]

        # a node whose instance is not running has no topology ("only available for: Instances in the running
        # state"): the step says it waits, and leaves it for the next pass
        stopped = sorted(after)[-1]
        ec2.stop_instances(InstanceIds=[after[stopped][0]])
        waiting = step.read(ctx, None)
        assert waiting.status == "WAITING (1 node(s) without their UltraServer yet)", waiting
        assert stopped in waiting.detail and "next `fmcluster create`" in waiting.detail
    finally:
        api = KubeApi.of(ctx, cluster)
        if api is not None:
            api.close()


def test_the_gb200_flavor_names_the_ultraserver_topology_the_crd_admits(tmp_path, monkeypatch) -> None:
    from fixtures.eks_specs import GB200_SPEC

    from fmcluster.backends.eks.software import manifests as manifests_module
    from fmcluster.backends.eks.software.validate import manifest_problems
    from fmcluster.spec import load_spec

    monkeypatch.setattr(manifests_module, "ULTRASERVER_NODE_LABEL", LABEL)
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    path = tmp_path / "spec.yaml"
    path.write_text(GB200_SPEC.replace("region: us-east-1\n", "region: us-east-1\nkubernetes: {scheduler: kueue}\n"))
    spec = load_spec(path).spec
    objects = manifests_module.manifests(spec)
    (topology,) = [o for o in objects if o["kind"] == "Topology"]
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3", LABEL, "kubernetes.io/hostname"]
    (flavor,) = [o for o in objects if o["kind"] == "ResourceFlavor"]
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"] == "ultraserver-3-layers"
    assert manifest_problems(objects, spec.kubernetes.version) == []
