"""The sandbox's EKS emulator, driven by plain boto3 against the session sandbox (real HTTPS).

Each test names the AWS page its rule comes from. Transitions are lazy: a resource leaves
CREATING/UPDATING/DELETING at the first request after the ``eks.*`` latency, so tests hold a state with a
long latency and release it by setting the latency to 0 (no timers).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import ssl
import urllib.error
import urllib.request
import uuid

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from fixtures.sandbox_eks import ASSUME_EC2, ASSUME_EKS, REGION, ZONES


def test_cluster_lifecycle_states_endpoint_and_certificate_authority(world, sandbox):
    """CreateCluster / DescribeCluster / DeleteCluster (EKS API reference): CREATING, then ACTIVE with an
    endpoint and a certificate authority (base64 PEM) a client can verify that endpoint with; DELETING, then
    gone (ResourceNotFoundException). Each cluster has its own endpoint."""
    sandbox.faults({"latency": {"eks.cluster": 3600}})
    name = world.cluster(tags={"team": "fm"})
    cluster = world.eks.describe_cluster(name=name)["cluster"]
    assert cluster["status"] == "CREATING" and "endpoint" not in cluster
    assert cluster["accessConfig"]["authenticationMode"] == "CONFIG_MAP"  # the API's documented default
    sandbox.faults({"latency": {"eks.cluster": 0}})
    cluster = world.eks.describe_cluster(name=name)["cluster"]
    assert cluster["status"] == "ACTIVE"
    assert cluster["endpoint"] == f"{sandbox.endpoint_url}/k8s/{name}"
    assert cluster["tags"] == {"team": "fm"} and cluster["version"] == "1.36"
    pem = base64.b64decode(cluster["certificateAuthority"]["data"])
    assert pem.startswith(b"-----BEGIN CERTIFICATE-----")
    # TLS verifies with the cluster's CA (whatever the Kubernetes API behind the endpoint answers without a
    # token), and does not verify without it
    context = ssl.create_default_context(cadata=pem.decode())
    try:
        status = urllib.request.urlopen(cluster["endpoint"] + "/version", context=context, timeout=10).status
    except urllib.error.HTTPError as answer:
        status = answer.code
    assert 200 <= status < 500
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(cluster["endpoint"] + "/version", context=ssl.create_default_context(), timeout=10)
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    other = world.cluster()
    assert world.eks.describe_cluster(name=other)["cluster"]["endpoint"].endswith(f"/k8s/{other}")
    assert {name, other} <= set(world.eks.list_clusters()["clusters"])
    group = cluster["resourcesVpcConfig"]["clusterSecurityGroupId"]
    described = world.ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]
    assert {t["Key"]: t["Value"] for t in described["Tags"]}[f"kubernetes.io/cluster/{name}"] == "owned"
    assert [(p["IpProtocol"], [g["GroupId"] for g in p["UserIdGroupPairs"]]) for p in described["IpPermissions"]] == \
        [("-1", [group])]  # all traffic from itself

    sandbox.faults({"latency": {"eks.cluster": 3600}})
    assert world.eks.delete_cluster(name=name)["cluster"]["status"] == "DELETING"
    assert world.code(lambda: world.eks.delete_cluster(name=name)) == "ResourceInUseException"
    sandbox.faults({"latency": {"eks.cluster": 0}})
    assert world.code(lambda: world.eks.describe_cluster(name=name)) == "ResourceNotFoundException"
    assert not world.ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": [group]}])["SecurityGroups"]
    world.eks.delete_cluster(name=other)


def test_cluster_rules(world):
    """"View Amazon EKS networking requirements for VPC and subnets": subnets in at least two different
    Availability Zones (InvalidParameterException); the role must exist; names unique per Region
    (ResourceInUseException); only the Kubernetes versions EKS offers; requests are checked against the model."""
    one_zone = {"subnetIds": world.subnets[:1]}
    assert world.code(lambda: world.eks.create_cluster(name="one-az", roleArn=world.cluster_role,
                                                       resourcesVpcConfig=one_zone)) == "InvalidParameterException"
    missing_role = world.cluster_role.replace("eks-cluster-", "nobody-")
    assert world.code(lambda: world.eks.create_cluster(name="no-role", roleArn=missing_role, resourcesVpcConfig={
        "subnetIds": world.subnets})) == "InvalidParameterException"
    assert world.code(lambda: world.cluster(version="1.20")) == "InvalidParameterException"
    versions = world.eks.describe_cluster_versions()["clusterVersions"]
    # standard support: 1.36 and 1.35 (1.34's ended on 2026-12-02, "Understand the Kubernetes version lifecycle on
    # EKS"); the extended-support versions are proven in test_sandbox_fidelity_day2.py
    assert [(v["clusterVersion"], v["defaultVersion"]) for v in versions if v["versionStatus"] == "STANDARD_SUPPORT"] \
        == [("1.36", True), ("1.35", False)]
    assert [v["clusterVersion"] for v in world.eks.describe_cluster_versions(defaultOnly=True)["clusterVersions"]] \
        == ["1.36"]
    vpc = world.ec2.create_vpc(CidrBlock="10.77.0.0/16")["Vpc"]["VpcId"]
    elsewhere = world.ec2.create_subnet(VpcId=vpc, CidrBlock="10.77.0.0/24", AvailabilityZone=ZONES[1])[
        "Subnet"]["SubnetId"]
    two_vpcs = {"subnetIds": [world.subnets[0], elsewhere]}
    assert world.code(lambda: world.eks.create_cluster(name="two-vpcs", roleArn=world.cluster_role,
                                                       resourcesVpcConfig=two_vpcs)) == "InvalidParameterException"
    name = world.cluster(version="1.34")
    world.eks.describe_cluster(name=name)
    # "Subnets ... in the cluster's VPC" (CreateNodegroup): a subnet of another VPC is refused
    assert world.code(lambda: world.nodegroup(name, world.template(), subnets=[elsewhere])) == \
        "InvalidParameterException"
    assert world.code(lambda: world.eks.create_cluster(name=name, roleArn=world.cluster_role, resourcesVpcConfig={
        "subnetIds": world.subnets})) == "ResourceInUseException"
    raw = world.sandbox.client("eks", REGION, parameter_validation=False,
                               retries={"mode": "standard", "max_attempts": 1})
    assert world.code(lambda: raw.create_cluster(name=name + "x", roleArn=world.cluster_role,
                                                 resourcesVpcConfig={"subnetIds": "not-a-list"})) == \
        "InvalidParameterException"
    world.eks.delete_cluster(name=name)


def test_authentication_mode_moves_one_way(world):
    """"Change authentication mode to use access entries" (EKS guide): CONFIG_MAP -> API_AND_CONFIG_MAP -> API;
    going back is refused. UpdateClusterConfig needs the cluster ACTIVE (ResourceInUseException)."""
    cluster = world.cluster()
    world.eks.describe_cluster(name=cluster)
    update = world.eks.update_cluster_config(name=cluster, accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
    assert update["update"]["type"] == "AccessConfigUpdate" and update["update"]["status"] == "InProgress"
    assert world.eks.describe_update(name=cluster, updateId=update["update"]["id"])["update"]["status"] == "Successful"
    world.sandbox.faults({"latency": {"eks.cluster": 3600}})
    world.eks.update_cluster_config(name=cluster, accessConfig={"authenticationMode": "API"})
    assert world.code(lambda: world.eks.update_cluster_config(
        name=cluster, accessConfig={"authenticationMode": "API"})) == "ResourceInUseException"  # UPDATING
    world.sandbox.faults({"latency": {"eks.cluster": 0}})
    assert world.eks.describe_cluster(name=cluster)["cluster"]["accessConfig"]["authenticationMode"] == "API"
    assert world.code(lambda: world.eks.update_cluster_config(
        name=cluster, accessConfig={"authenticationMode": "CONFIG_MAP"})) == "InvalidParameterException"
    world.eks.create_access_entry(clusterName=cluster, principalArn=world.node_role)  # API mode allows entries
    world.eks.delete_cluster(name=cluster)


def _efa_template(world, group: str, cards: int = 32, **data) -> dict[str, str]:
    interfaces = [{"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "InterfaceType": "efa",
                   "Groups": [group], "DeleteOnTermination": True} for card in range(cards)]
    return world.template(InstanceType="p5.48xlarge", NetworkInterfaces=interfaces,
                          TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Project", "Value": "fm"}]}],
                          **data)


def _security_group(world, cluster: str) -> str:
    vpc = world.eks.describe_cluster(name=cluster)["cluster"]["resourcesVpcConfig"]["vpcId"]
    return world.ec2.create_security_group(GroupName=f"efa-{uuid.uuid4().hex[:6]}", Description="efa",
                                           VpcId=vpc)["GroupId"]


def test_nodegroup_launches_instances_through_its_launch_template(world, sandbox):
    """"Customize managed nodes with launch templates": the node group launches desiredSize instances from
    its template (here p5.48xlarge with its 32 EFA interfaces), tagged eks:cluster-name / eks:nodegroup-name
    and with the template's tags; CREATING until the eks.nodegroup latency, then ACTIVE."""
    cluster = world.cluster()
    group = _security_group(world, cluster)
    sandbox.faults({"latency": {"eks.nodegroup": 3600}})
    ng = world.nodegroup(cluster, _efa_template(world, group), size=2, labels={"fmcluster/queue": "gpu"},
                         taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}])
    assert ng["status"] == "CREATING" and ng["instanceTypes"] == ["p5.48xlarge"]
    assert not world.instances(cluster, ng["nodegroupName"])
    sandbox.faults({"latency": {"eks.nodegroup": 0}})
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng["nodegroupName"])["nodegroup"][
        "status"] == "ACTIVE"
    instances = world.instances(cluster, ng["nodegroupName"])
    assert len(instances) == 2
    for instance in instances:
        tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
        assert tags["Project"] == "fm" and tags["eks:cluster-name"] == cluster
        assert instance["InstanceType"] == "p5.48xlarge"
        assert sum(n["InterfaceType"] == "efa" for n in instance["NetworkInterfaces"]) == 32
    assert world.eks.list_nodegroups(clusterName=cluster)["nodegroups"] == [ng["nodegroupName"]]


def _in_process_world():
    """Inside ``mock_aws``: what an in-process EksEmulator needs, (ec2, iam, cluster role ARN, node role ARN, two
    subnets in two AZs, an m5.large launch template id)."""
    import boto3

    ec2, iam = boto3.client("ec2", REGION), boto3.client("iam", REGION)
    cluster_role = iam.create_role(RoleName="c", AssumeRolePolicyDocument=ASSUME_EKS)["Role"]["Arn"]
    node_role = iam.create_role(RoleName="n", AssumeRolePolicyDocument=ASSUME_EC2)["Role"]["Arn"]
    subnets = [s["SubnetId"] for s in sorted(ec2.describe_subnets()["Subnets"],
                                              key=lambda s: s["AvailabilityZone"])][:2]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    lt = ec2.create_launch_template(LaunchTemplateName="n", LaunchTemplateData={
        "ImageId": image, "InstanceType": "m5.large"})["LaunchTemplate"]["LaunchTemplateId"]
    return ec2, iam, cluster_role, node_role, subnets, lt


def test_nodes_and_principals_for_the_kubernetes_api():
    """The emulator's ``nodes()`` and ``principal_allowed()`` (what the sandbox's Kubernetes API reads), in
    process: one entry per running instance with the labels a managed node registers and the node group's
    taints in Kubernetes form ("Managed node groups"); a principal is authenticated only with an access entry (an
    assumed-role session counting as its role), and authorized by the entry's associated access policies
    ("Associate access policies with access entries")."""
    from moto import mock_aws

    from fmcluster_sandbox.eks import EksEmulator
    from fmcluster_sandbox.faults import Faults

    with mock_aws():
        ec2, iam, cluster_role, node_role, subnets, lt = _in_process_world()
        caller = "arn:aws:sts::123456789012:assumed-role/admin/session-1"
        emulator = EksEmulator(Faults())

        def call(method: str, path: str, body: dict | None = None) -> dict:
            status, _, out = emulator.handle(method, path, "", json.dumps(body or {}).encode(), REGION,
                                             "123456789012", caller)
            assert status == 200, out
            return json.loads(out)

        call("POST", "/clusters", {"name": "k", "roleArn": cluster_role, "resourcesVpcConfig": {"subnetIds": subnets},
                                   "accessConfig": {"authenticationMode": "API"}})
        assert emulator.nodes("k", REGION) == []
        assert emulator.cluster_version("k", REGION) == "1.36" and emulator.cluster_version("nope", REGION) is None
        call("POST", "/clusters/k/node-groups", {
            "nodegroupName": "gpu", "nodeRole": node_role, "subnets": subnets[:1],
            "scalingConfig": {"minSize": 2, "maxSize": 2, "desiredSize": 2}, "launchTemplate": {"id": lt},
            "labels": {"fmcluster/queue": "gpu"},
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]})
        nodes = emulator.nodes("k", REGION)
        assert len(nodes) == 2 and {n["nodegroup"] for n in nodes} == {"gpu"}
        zone = ec2.describe_subnets(SubnetIds=subnets[:1])["Subnets"][0]["AvailabilityZone"]
        for node in nodes:
            assert node["instance_type"] == "m5.large" and node["name"].startswith("ip-")
            assert node["labels"]["fmcluster/queue"] == "gpu"
            assert node["labels"]["node.kubernetes.io/instance-type"] == "m5.large"
            assert node["labels"]["eks.amazonaws.com/nodegroup"] == "gpu"
            assert node["labels"]["topology.kubernetes.io/zone"] == zone
            assert node["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
        ec2.terminate_instances(InstanceIds=[nodes[0]["instance_id"]])
        after = [n["instance_id"] for n in emulator.nodes("k", REGION)]  # the terminated node is replaced
        assert len(after) == 2 and nodes[1]["instance_id"] in after and nodes[0]["instance_id"] not in after

        # the creator's admin entry (bootstrapClusterCreatorAdminPermissions) names the role, not the session
        assert emulator.principal_allowed("k", REGION, "arn:aws:sts::123456789012:assumed-role/admin/other")
        assert emulator.principal_allowed("k", REGION, "arn:aws:iam::123456789012:role/admin")
        # an entry authenticates; without an associated policy it authorizes nothing (403, not 401)
        assert emulator.principal_allowed("k", REGION, node_role)  # its EC2_LINUX entry
        assert emulator.access_policies("k", REGION, node_role) == []
        viewer = iam.create_role(RoleName="viewer", AssumeRolePolicyDocument=ASSUME_EC2)["Role"]["Arn"]
        assert not emulator.principal_allowed("k", REGION, viewer)  # no entry
        call("POST", "/clusters/k/access-entries", {"principalArn": viewer})
        assert emulator.principal_allowed("k", REGION, viewer)
        assert emulator.access_policies("k", REGION, viewer) == []
        from urllib.parse import quote

        call("POST", f"/clusters/k/access-entries/{quote(viewer, safe='')}/access-policies", {
            "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
            "accessScope": {"type": "cluster"}})
        assert emulator.principal_allowed("k", REGION, viewer)
        assert not emulator.principal_allowed("other", REGION, viewer)

        # a CONFIG_MAP cluster: its creator is admin without an access entry, until the mode is API only
        call("POST", "/clusters", {"name": "m", "roleArn": cluster_role, "resourcesVpcConfig": {"subnetIds": subnets}})
        call("GET", "/clusters/m")
        assert emulator.principal_allowed("m", REGION, caller)
        assert [p["policyArn"].rsplit("/", 1)[1] for p in emulator.access_policies("m", REGION, caller)] == [
            "AmazonEKSClusterAdminPolicy"]  # system:masters
        assert not emulator.principal_allowed("m", REGION, node_role)
        for mode in ("API_AND_CONFIG_MAP", "API"):
            call("POST", "/clusters/m/update-config", {"accessConfig": {"authenticationMode": mode}})
            call("GET", "/clusters/m")
        assert not emulator.principal_allowed("m", REGION, caller)
        _pod_identity_rules(emulator, iam, cluster_role, subnets)


def test_capacity_block_node_groups(world, sandbox):
    """"Create a managed node group with Capacity Blocks": capacityType CAPACITY_BLOCK needs a launch template
    with MarketType capacity-block and a CapacityReservationTarget; the instances go on the block, and
    scaling past the block's size fails the launch (EC2 ReservationCapacityExceeded)."""
    now = dt.datetime.now(dt.timezone.utc)
    block = sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "region": REGION, "availability_zone": ZONES[0], "instance_type": "p5.48xlarge", "count": 2,
        "type": "capacity-block", "start": (now - dt.timedelta(hours=1)).isoformat(),
        "end": (now + dt.timedelta(days=1)).isoformat(), "reservation_id": "cr-" + uuid.uuid4().hex[:17]})[
        "reservation_id"]
    cluster = world.cluster()
    group = _security_group(world, cluster)
    target = {"CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": block}}}
    plain = _efa_template(world, group, **target)
    assert world.code(lambda: world.nodegroup(cluster, plain, capacityType="CAPACITY_BLOCK")) == \
        "InvalidParameterException"
    blocked = _efa_template(world, group, InstanceMarketOptions={"MarketType": "capacity-block"}, **target)
    assert world.code(lambda: world.nodegroup(cluster, blocked)) == "InvalidParameterException"  # ON_DEMAND
    no_target = _efa_template(world, group, InstanceMarketOptions={"MarketType": "capacity-block"})
    assert world.code(lambda: world.nodegroup(cluster, no_target, capacityType="CAPACITY_BLOCK")) == \
        "InvalidParameterException"
    ng = world.nodegroup(cluster, blocked, size=2, capacityType="CAPACITY_BLOCK")
    name = ng["nodegroupName"]
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]["status"] == "ACTIVE"
    instances = world.instances(cluster, name)
    assert len(instances) == 2
    reservation = world.ec2.describe_capacity_reservations(CapacityReservationIds=[block])["CapacityReservations"][0]
    assert reservation["AvailableInstanceCount"] == 0
    world.eks.update_nodegroup_config(clusterName=cluster, nodegroupName=name,
                                      scalingConfig={"maxSize": 3, "desiredSize": 3})
    described = world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
    assert described["status"] == "DEGRADED"
    assert "ReservationCapacityExceeded" in described["health"]["issues"][0]["message"]


def test_scaling_rules_and_instances(world, sandbox):
    """UpdateNodegroupConfig (EKS API reference): minSize <= desiredSize <= maxSize; UPDATING while the
    latency runs; scaling up launches and scaling down terminates instances; DescribeUpdate follows."""
    cluster = world.cluster()
    template = world.template(InstanceType="m5.large")
    assert world.code(lambda: world.nodegroup(cluster, template, scalingConfig={
        "minSize": 3, "maxSize": 2, "desiredSize": 2})) == "InvalidParameterException"
    assert world.code(lambda: world.nodegroup(cluster, template, scalingConfig={
        "minSize": 0, "maxSize": 2, "desiredSize": 3})) == "InvalidParameterException"
    assert world.code(lambda: world.nodegroup(cluster, template, instanceTypes=["m5.xlarge"])) == \
        "InvalidParameterException"  # instance types in the template and the node group
    ng = world.nodegroup(cluster, template, size=1)["nodegroupName"]
    assert world.instances(cluster, ng) == []  # still CREATING: the next EKS request ends the transition
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng)
    (instance,) = world.instances(cluster, ng)
    # a template without security groups: the node gets the cluster security group
    cluster_group = world.eks.describe_cluster(name=cluster)["cluster"]["resourcesVpcConfig"]["clusterSecurityGroupId"]
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == [cluster_group]
    assert world.code(lambda: world.eks.update_nodegroup_config(
        clusterName=cluster, nodegroupName=ng, scalingConfig={"desiredSize": 5})) == "InvalidParameterException"
    sandbox.faults({"latency": {"eks.nodegroup": 3600}})
    update = world.eks.update_nodegroup_config(clusterName=cluster, nodegroupName=ng,
                                               scalingConfig={"maxSize": 4, "desiredSize": 3})["update"]
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng)["nodegroup"]["status"] == "UPDATING"
    assert world.code(lambda: world.eks.update_nodegroup_config(
        clusterName=cluster, nodegroupName=ng, scalingConfig={"desiredSize": 2})) == "ResourceInUseException"
    sandbox.faults({"latency": {"eks.nodegroup": 0}})
    assert world.eks.describe_update(name=cluster, updateId=update["id"], nodegroupName=ng)["update"][
        "status"] == "Successful"
    assert len(world.instances(cluster, ng)) == 3
    world.eks.update_nodegroup_config(clusterName=cluster, nodegroupName=ng, scalingConfig={"desiredSize": 1})
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng)
    assert len(world.instances(cluster, ng)) == 1


def test_delete_order_and_cluster_state_rules(world, sandbox):
    """DeleteCluster (EKS API reference): "If you have managed node groups ... attached to the cluster, you must
    delete them first" (ResourceInUseException); node groups need an ACTIVE cluster; deleting a node group
    terminates its instances."""
    sandbox.faults({"latency": {"eks.cluster": 3600}})
    pending = world.cluster()
    assert world.code(lambda: world.nodegroup(pending, world.template())) == "InvalidRequestException"
    sandbox.faults({"latency": {"eks.cluster": 0}})
    cluster = world.cluster()
    ng = world.nodegroup(cluster, world.template(InstanceType="m5.large"), size=2)["nodegroupName"]
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng)
    assert len(world.instances(cluster, ng)) == 2
    assert world.code(lambda: world.eks.delete_cluster(name=cluster)) == "ResourceInUseException"
    world.eks.create_addon(clusterName=cluster, addonName="vpc-cni")
    sandbox.faults({"latency": {"eks.nodegroup": 3600}})
    assert world.eks.delete_nodegroup(clusterName=cluster, nodegroupName=ng)["nodegroup"]["status"] == "DELETING"
    assert world.code(lambda: world.eks.delete_cluster(name=cluster)) == "ResourceInUseException"
    sandbox.faults({"latency": {"eks.nodegroup": 0}})
    assert world.eks.list_nodegroups(clusterName=cluster)["nodegroups"] == []
    assert world.instances(cluster, ng) == []
    world.eks.delete_cluster(name=cluster)  # add-ons go with the cluster
    assert world.code(lambda: world.eks.describe_cluster(name=cluster)) == "ResourceNotFoundException"
    world.eks.delete_cluster(name=pending)


def test_addons(world, sandbox):
    """"Amazon EKS add-ons" / CreateAddon / DescribeAddonVersions: the add-ons and versions the User Guide lists
    for the cluster's Kubernetes version; CREATING then ACTIVE, DELETING then gone; duplicates refused."""
    cluster = world.cluster(version="1.35")
    versions = world.eks.describe_addon_versions(kubernetesVersion="1.35")["addons"]
    names = {a["addonName"] for a in versions}
    assert names == {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent", "aws-fsx-csi-driver",
                     "eks-node-monitoring-agent"}
    proxy = next(a for a in versions if a["addonName"] == "kube-proxy")["addonVersions"]
    assert [v["addonVersion"] for v in proxy] == ["v1.35.3-eksbuild.2"]
    # aws/eks-node-monitoring-agent v1.7.0, charts/eks-node-monitoring-agent/values.yaml: nodeAgent.image.tag
    agent = next(a for a in versions if a["addonName"] == "eks-node-monitoring-agent")["addonVersions"]
    assert [v["addonVersion"] for v in agent] == ["v1.7.0-eksbuild.1"]
    sandbox.faults({"latency": {"eks.addon": 3600, "call.eks.DescribeAddon": 30}})
    addon = world.eks.create_addon(clusterName=cluster, addonName="kube-proxy")["addon"]
    # per-call delays name EKS operations (call.eks.<Operation>): DescribeAddon is held, CreateAddon was not
    impatient = sandbox.client("eks", REGION, read_timeout=1, retries={"mode": "standard", "max_attempts": 1})
    with pytest.raises(ReadTimeoutError):
        impatient.describe_addon(clusterName=cluster, addonName="kube-proxy")
    sandbox.faults({"latency": {"call.eks.DescribeAddon": None}})
    assert addon["status"] == "CREATING" and addon["addonVersion"] == "v1.35.3-eksbuild.2"
    assert world.code(lambda: world.eks.create_addon(clusterName=cluster, addonName="kube-proxy")) == \
        "ResourceInUseException"
    assert world.code(lambda: world.eks.create_addon(clusterName=cluster, addonName="coredns",
                                                     addonVersion="v1.0.0-eksbuild.1")) == "InvalidParameterException"
    assert world.code(lambda: world.eks.create_addon(clusterName=cluster, addonName="not-an-addon")) == \
        "InvalidParameterException"
    sandbox.faults({"latency": {"eks.addon": 0}})
    assert world.eks.describe_addon(clusterName=cluster, addonName="kube-proxy")["addon"]["status"] == "ACTIVE"
    assert world.eks.list_addons(clusterName=cluster)["addons"] == ["kube-proxy"]
    world.eks.delete_addon(clusterName=cluster, addonName="kube-proxy")
    assert world.code(lambda: world.eks.describe_addon(clusterName=cluster, addonName="kube-proxy")) == \
        "ResourceNotFoundException"
    world.eks.delete_cluster(name=cluster)


def test_node_repair_config(world, sandbox):
    """CreateNodegroup / UpdateNodegroupConfig ``nodeRepairConfig`` (botocore's EKS model; EKS User Guide
    "Automatically repair nodes in EKS clusters"): count or percentage, not both, for each threshold; every override
    names all four members; the model's shapes (repairAction Replace | Reboot | NoAction, minRepairWaitTimeMins
    at least 1); DescribeNodegroup echoes what was sent, and a group made without one is described without one."""
    cluster = world.cluster()
    template = world.template(InstanceType="m5.large")
    override = {"nodeMonitoringCondition": "AcceleratedHardwareReady", "nodeUnhealthyReason": "NvidiaXID79Error",
                "minRepairWaitTimeMins": 10, "repairAction": "Reboot"}
    assert world.code(lambda: world.nodegroup(cluster, template, nodeRepairConfig={
        "enabled": True, "maxUnhealthyNodeThresholdCount": 2, "maxUnhealthyNodeThresholdPercentage": 20})) == \
        "InvalidParameterException"
    assert world.code(lambda: world.nodegroup(cluster, template, nodeRepairConfig={
        "enabled": True, "maxParallelNodesRepairedCount": 1, "maxParallelNodesRepairedPercentage": 10})) == \
        "InvalidParameterException"
    partial = {k: v for k, v in override.items() if k != "minRepairWaitTimeMins"}
    assert world.code(lambda: world.nodegroup(cluster, template, nodeRepairConfig={
        "enabled": True, "nodeRepairConfigOverrides": [partial]})) == "InvalidParameterException"
    assert world.code(lambda: world.nodegroup(cluster, template, nodeRepairConfig={
        "enabled": True, "nodeRepairConfigOverrides": [{**override, "repairAction": "Restart"}]})) == \
        "InvalidParameterException"  # not in the model's RepairAction enum
    config = {"enabled": True, "maxUnhealthyNodeThresholdPercentage": 20, "nodeRepairConfigOverrides": [override]}
    ng = world.nodegroup(cluster, template, nodeRepairConfig=config)["nodegroupName"]
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng)["nodegroup"]["nodeRepairConfig"] == \
        config
    plain = world.nodegroup(cluster, template)["nodegroupName"]
    assert "nodeRepairConfig" not in world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=plain)[
        "nodegroup"]
    update = world.eks.update_nodegroup_config(clusterName=cluster, nodegroupName=plain,
                                               nodeRepairConfig={"enabled": True})["update"]
    assert update["params"] == [{"type": "NodeRepairConfig", "value": str({"enabled": True})}]
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=plain)["nodegroup"][
        "nodeRepairConfig"] == {"enabled": True}
    for name in (ng, plain):
        world.eks.delete_nodegroup(clusterName=cluster, nodegroupName=name)
    world.eks.list_nodegroups(clusterName=cluster)
    world.eks.delete_cluster(name=cluster)


def test_launch_template_user_data_must_be_mime_multipart(world, sandbox):
    """EKS guide "Customize managed nodes with launch templates": without a custom AMI, EKS merges its bootstrap into
    the template's user data, which must be MIME multi-part; other user data is refused at CreateNodegroup
    ("Ec2LaunchTemplateInvalidConfiguration: User data was not in the MIME multipart format.")."""
    cluster = world.cluster()
    script = base64.b64encode(b"#!/bin/bash\necho hi\n").decode()
    no_image = world.ec2.create_launch_template(LaunchTemplateName=f"eks-{uuid.uuid4().hex[:10]}", LaunchTemplateData={
        "InstanceType": "m5.large", "UserData": script})["LaunchTemplate"]
    with pytest.raises(ClientError) as refused:
        world.nodegroup(cluster, {"id": no_image["LaunchTemplateId"], "version": "1"})
    assert refused.value.response["Error"]["Code"] == "InvalidParameterException", refused.value.response
    assert "not in the MIME multipart format" in refused.value.response["Error"]["Message"]
    mime = ("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: "
            "application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n\n--B--\n")
    good = world.ec2.create_launch_template(LaunchTemplateName=f"eks-{uuid.uuid4().hex[:10]}", LaunchTemplateData={
        "InstanceType": "m5.large", "UserData": base64.b64encode(mime.encode()).decode()})["LaunchTemplate"]
    ng = world.nodegroup(cluster, {"id": good["LaunchTemplateId"], "version": "1"})["nodegroupName"]
    # a custom AMI's user data is its own business (world.template names an ImageId)
    custom = world.nodegroup(cluster, world.template(InstanceType="m5.large", UserData=script))["nodegroupName"]
    for name in (ng, custom):
        world.eks.delete_nodegroup(clusterName=cluster, nodegroupName=name)
    world.eks.list_nodegroups(clusterName=cluster)
    world.eks.delete_cluster(name=cluster)


def test_access_entries(world):
    """"Grant IAM users access to Kubernetes with EKS access entries": access entries need the API or
    API_AND_CONFIG_MAP authentication mode (InvalidRequestException otherwise); the principal must exist;
    the cluster creator gets an admin entry (bootstrapClusterCreatorAdminPermissions, default true); policies
    from EKS's list are associated with a scope."""
    config_map = world.cluster()
    role = world.node_role
    assert world.code(lambda: world.eks.create_access_entry(clusterName=config_map, principalArn=role)) == \
        "InvalidRequestException"
    cluster = world.cluster(accessConfig={"authenticationMode": "API"})
    entries = world.eks.list_access_entries(clusterName=cluster)["accessEntries"]
    assert entries == ["arn:aws:iam::123456789012:user/moto"]  # the caller (moto's default identity)
    ghost = "arn:aws:iam::123456789012:role/does-not-exist"
    assert world.code(lambda: world.eks.create_access_entry(clusterName=cluster, principalArn=ghost)) == \
        "InvalidParameterException"
    other_role = world.iam.create_role(RoleName=f"eks-other-{uuid.uuid4().hex[:8]}",
                                       AssumeRolePolicyDocument=ASSUME_EC2)["Role"]["Arn"]
    # a managed node group's role gets an EC2_LINUX entry made by EKS (API modes)
    world.nodegroup(cluster, world.template(InstanceType="m5.large"), size=0, nodeRole=other_role)
    node_entry = world.eks.describe_access_entry(clusterName=cluster, principalArn=other_role)["accessEntry"]
    assert node_entry["type"] == "EC2_LINUX" and node_entry["kubernetesGroups"] == ["system:nodes"]
    assert world.code(lambda: world.eks.associate_access_policy(
        clusterName=cluster, principalArn=other_role, policyArn="arn:aws:eks::aws:cluster-access-policy/"
        "AmazonEKSViewPolicy", accessScope={"type": "cluster"})) == "InvalidParameterException"
    entry = world.eks.create_access_entry(clusterName=cluster, principalArn=role)["accessEntry"]
    assert entry["type"] == "STANDARD" and entry["username"].startswith("arn:aws:sts::123456789012:assumed-role/")
    assert world.code(lambda: world.eks.create_access_entry(clusterName=cluster, principalArn=role)) == \
        "ResourceInUseException"
    policy = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
    assert world.code(lambda: world.eks.associate_access_policy(
        clusterName=cluster, principalArn=role, policyArn=policy, accessScope={"type": "namespace"})) == \
        "InvalidParameterException"
    world.eks.associate_access_policy(clusterName=cluster, principalArn=role, policyArn=policy,
                                      accessScope={"type": "namespace", "namespaces": ["team"]})
    listed = world.eks.list_associated_access_policies(clusterName=cluster, principalArn=role)
    assert [p["policyArn"] for p in listed["associatedAccessPolicies"]] == [policy]
    world.eks.delete_access_entry(clusterName=cluster, principalArn=role)
    assert world.code(lambda: world.eks.describe_access_entry(clusterName=cluster, principalArn=role)) == \
        "ResourceNotFoundException"
    for group in world.eks.list_nodegroups(clusterName=cluster)["nodegroups"]:
        world.eks.delete_nodegroup(clusterName=cluster, nodegroupName=group)
    for name in (cluster, config_map):
        world.eks.delete_cluster(name=name)


def test_injected_failures(world, sandbox):
    """Faults ``fail_status`` (sandbox's own, for tests of failure paths): ``eks_cluster:<name>`` ends the create
    FAILED, ``eks_nodegroup:<name>`` / ``eks_addon:<name>`` end a create or delete CREATE_FAILED / DELETE_FAILED
    with an ``InternalFailure`` health issue (EKS issue codes); failed resources can still be deleted."""
    broken = f"c-{uuid.uuid4().hex[:8]}"
    sandbox.faults({"fail_status": {f"eks_cluster:{broken}": "CREATE_FAILED"}})
    world.eks.create_cluster(name=broken, roleArn=world.cluster_role, resourcesVpcConfig={"subnetIds": world.subnets})
    failed = world.eks.describe_cluster(name=broken)["cluster"]
    assert failed["status"] == "FAILED" and failed["health"]["issues"][0]["code"] == "InternalFailure"
    world.eks.delete_cluster(name=broken)
    assert world.code(lambda: world.eks.describe_cluster(name=broken)) == "ResourceNotFoundException"

    cluster = world.cluster()
    template = world.template(InstanceType="m5.large")
    sandbox.faults({"fail_status": {"eks_nodegroup:bad": "CREATE_FAILED", "eks_nodegroup:stuck": "DELETE_FAILED",
                                    "eks_addon:coredns": "DELETE_FAILED"}})
    world.nodegroup(cluster, template, size=1, nodegroupName="bad")
    bad = world.eks.describe_nodegroup(clusterName=cluster, nodegroupName="bad")["nodegroup"]
    assert bad["status"] == "CREATE_FAILED" and bad["health"]["issues"][0]["code"] == "InternalFailure"
    assert world.instances(cluster, "bad") == []
    world.nodegroup(cluster, template, size=1, nodegroupName="stuck")
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName="stuck")
    world.eks.delete_nodegroup(clusterName=cluster, nodegroupName="stuck")
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName="stuck")["nodegroup"][
        "status"] == "DELETE_FAILED"
    assert len(world.instances(cluster, "stuck")) == 1
    world.eks.create_addon(clusterName=cluster, addonName="coredns")
    world.eks.describe_addon(clusterName=cluster, addonName="coredns")
    world.eks.delete_addon(clusterName=cluster, addonName="coredns")
    assert world.eks.describe_addon(clusterName=cluster, addonName="coredns")["addon"]["status"] == "DELETE_FAILED"
    sandbox.faults({"fail_status": {"eks_nodegroup:stuck": None, "eks_addon:coredns": None}})
    for name in ("bad", "stuck"):
        world.eks.delete_nodegroup(clusterName=cluster, nodegroupName=name)
    world.eks.delete_addon(clusterName=cluster, addonName="coredns")
    assert world.eks.list_nodegroups(clusterName=cluster)["nodegroups"] == []
    assert world.eks.list_addons(clusterName=cluster)["addons"] == []
    assert world.instances(cluster, "stuck") == []
    world.eks.delete_cluster(name=cluster)


def test_client_request_token_replays_the_original_answer(world):
    """CreateCluster/CreateNodegroup ``clientRequestToken`` (EKS API: "ensure the idempotency of the request"):
    the same request with the same token answers the original result instead of ResourceInUseException (a
    client retrying after a lost answer); another request with that token is refused."""
    name = f"c-{uuid.uuid4().hex[:8]}"
    token = uuid.uuid4().hex
    request = {"name": name, "roleArn": world.cluster_role, "resourcesVpcConfig": {"subnetIds": world.subnets},
               "clientRequestToken": token}
    first = world.eks.create_cluster(**request)["cluster"]
    world.eks.describe_cluster(name=name)  # ACTIVE now
    again = world.eks.create_cluster(**request)["cluster"]
    assert again["arn"] == first["arn"] and again["status"] == "CREATING"  # the original answer
    assert world.code(lambda: world.eks.create_cluster(**{**request, "version": "1.34"})) == \
        "InvalidParameterException"
    assert world.code(lambda: world.eks.create_cluster(**{**request, "clientRequestToken": uuid.uuid4().hex})) == \
        "ResourceInUseException"
    world.eks.delete_cluster(name=name)


def test_eks_optimized_amis_and_their_ssm_parameters(world):
    """"Retrieve recommended Amazon Linux AMI IDs" (EKS guide): /aws/service/eks/optimized-ami/<version>/
    amazon-linux-2023/<arch>/<variant>/recommended/image_id names an Amazon-owned AMI of that architecture; a
    node group without an ImageId launches the image of its amiType for the cluster's version."""
    ssm = world.sandbox.client("ssm", REGION)
    found = {}
    for arch, variant in (("x86_64", "nvidia"), ("arm64", "nvidia"), ("x86_64", "neuron"), ("x86_64", "standard")):
        name = f"/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/{arch}/{variant}/recommended/image_id"
        found[(arch, variant)] = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    images = world.ec2.describe_images(ImageIds=list(found.values()))["Images"]
    by_id = {i["ImageId"]: i for i in images}
    for (arch, variant), ami in found.items():
        assert by_id[ami]["Architecture"] == arch and by_id[ami]["OwnerId"] == "amazon"
        assert f"-{arch}-{variant}-1.35-" in by_id[ami]["Name"]
    assert world.code(lambda: ssm.get_parameter(
        Name="/aws/service/eks/optimized-ami/1.20/amazon-linux-2023/x86_64/nvidia/recommended/image_id")) == \
        "ParameterNotFound"

    cluster = world.cluster(version="1.35")
    template = world.template(InstanceType="m5.large")  # this world's templates carry an ImageId
    assert world.code(lambda: world.nodegroup(cluster, template, amiType="AL2023_x86_64_NVIDIA")) == \
        "InvalidParameterException"
    bare = world.ec2.create_launch_template(LaunchTemplateName=f"eks-{uuid.uuid4().hex[:10]}", LaunchTemplateData={
        "InstanceType": "m5.large"})["LaunchTemplate"]["LaunchTemplateId"]
    ng = world.nodegroup(cluster, {"id": bare}, size=1, amiType="AL2023_x86_64_NVIDIA")
    assert ng["amiType"] == "AL2023_x86_64_NVIDIA"
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng["nodegroupName"])
    (instance,) = world.instances(cluster, ng["nodegroupName"])
    assert instance["ImageId"] == found[("x86_64", "nvidia")]


def test_node_group_names_roles_and_local_zones(world):
    """"Create a managed node group for your cluster" (EKS guide): the name "can't be longer than 63 characters.
    It must start with letter or digit"; "You can't use the same role that is used to create any clusters"."""
    cluster = world.cluster()
    template = world.template(InstanceType="m5.large")
    assert world.code(lambda: world.nodegroup(cluster, template, nodegroupName="n" * 64)) == "InvalidParameterException"
    assert world.code(lambda: world.nodegroup(cluster, template, nodegroupName="-dash")) == "InvalidParameterException"
    assert world.code(lambda: world.nodegroup(cluster, template, nodeRole=world.cluster_role)) == \
        "InvalidParameterException"
    assert world.nodegroup(cluster, template, size=0, nodegroupName="n" * 63)["status"] == "CREATING"


def test_local_zones_take_node_groups_not_the_control_plane():
    """"Launch low-latency EKS clusters with AWS Local Zones" (EKS guide): EKS supports managed node groups in Local
    Zones, but "you must not specify Local Zone subnets when you create your cluster". And a p6e-gb200 node group
    runs only on an UltraServer Capacity Block of it ("Use P6e-GB200 UltraServers with Amazon EKS"). In process, so
    the opt-in stays out of the session sandbox."""
    import boto3
    from moto import mock_aws

    from fmcluster_sandbox import capacity_reservations, local_zones
    from fmcluster_sandbox.eks import EksEmulator
    from fmcluster_sandbox.faults import Faults

    local_zones.install()
    with mock_aws():
        ec2, iam = boto3.client("ec2", "us-east-1"), boto3.client("iam", "us-east-1")
        cluster_role = iam.create_role(RoleName="c", AssumeRolePolicyDocument=ASSUME_EKS)["Role"]["Arn"]
        node_role = iam.create_role(RoleName="n", AssumeRolePolicyDocument=ASSUME_EC2)["Role"]["Arn"]
        default = sorted(ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"],
                         key=lambda s: s["AvailabilityZone"])[:2]
        # the opt-in is the sandbox's own EC2 action (moto lacks it): called as the server calls it
        status, _, _ = local_zones.handle("ModifyAvailabilityZoneGroup", {
            "Action": "ModifyAvailabilityZoneGroup", "GroupName": "us-east-1-dfw-2", "OptInStatus": "opted-in"},
            "us-east-1", "123456789012")
        assert status == 200
        dallas = ec2.create_subnet(VpcId=default[0]["VpcId"], CidrBlock="172.31.200.0/24",
                                   AvailabilityZone="us-east-1-dfw-2a")["Subnet"]["SubnetId"]
        emulator = EksEmulator(Faults())

        def call(method: str, path: str, body: dict) -> tuple[int, dict]:
            status, _, out = emulator.handle(method, path, "", json.dumps(body).encode(), "us-east-1",
                                             "123456789012", "arn:aws:sts::123456789012:user/moto")
            return status, json.loads(out)

        status, body = call("POST", "/clusters", {"name": "lz", "roleArn": cluster_role, "resourcesVpcConfig": {
            "subnetIds": [default[0]["SubnetId"], dallas]}})
        assert status == 400 and "Local Zone us-east-1-dfw-2a" in body["message"], body
        assert call("POST", "/clusters", {"name": "k", "roleArn": cluster_role, "resourcesVpcConfig": {
            "subnetIds": [s["SubnetId"] for s in default]}})[0] == 200
        call("GET", "/clusters/k", {})
        status, body = call("POST", "/clusters/k/node-groups", {"nodegroupName": "lz", "nodeRole": node_role,
                                                                "subnets": [dallas], "scalingConfig": {
                                                                    "minSize": 0, "maxSize": 1, "desiredSize": 0}})
        assert status == 200, body

        def gb200_group(name: str, reservation: str) -> tuple[int, dict]:
            template = ec2.create_launch_template(LaunchTemplateName=f"gb-{name}", LaunchTemplateData={
                "InstanceType": "p6e-gb200.36xlarge", "InstanceMarketOptions": {"MarketType": "capacity-block"},
                "CapacityReservationSpecification": {"CapacityReservationTarget": {
                    "CapacityReservationId": reservation}}})["LaunchTemplate"]["LaunchTemplateId"]
            return call("POST", "/clusters/k/node-groups", {
                "nodegroupName": name, "nodeRole": node_role, "subnets": [dallas], "capacityType": "CAPACITY_BLOCK",
                "launchTemplate": {"id": template}, "scalingConfig": {"minSize": 0, "maxSize": 9, "desiredSize": 0}})

        # A plain Capacity Block of p6e-gb200 (not an UltraServer's) is refused; one bought as u-p6e-gb200x36 is not.
        plain = capacity_reservations.REGISTRY.seed({"instance_type": "p6e-gb200.36xlarge", "count": 9,
                                                     "availability_zone": "us-east-1-dfw-2a",
                                                     "type": "capacity-block"}, "123456789012")["reservation_id"]
        status, body = gb200_group("plain", plain)
        assert status == 400 and "UltraServer" in body["message"], body
        ultra = capacity_reservations.REGISTRY.add(capacity_reservations.Reservation(
            capacity_reservations.new_id(), "123456789012", "us-east-1", "p6e-gb200.36xlarge", "us-east-1-dfw-2a", 9,
            reservation_type="capacity-block", capacity_block_id=capacity_reservations.new_id("cb-"),
            ultraserver="u-p6e-gb200x36"))
        status, body = gb200_group("ultra", ultra.reservation_id)
        assert status == 200, body


def test_cluster_version_updates(world, sandbox):
    """UpdateClusterVersion (EKS API; EKS guide "Update existing cluster to new Kubernetes version"): one minor
    version at a time; the new version shows when the update ends; "all of your node groups' Kubernetes versions
    must match the cluster's Kubernetes version in order to update the cluster"."""
    cluster = world.cluster(version="1.34")
    world.eks.describe_cluster(name=cluster)
    assert world.code(lambda: world.eks.update_cluster_version(name=cluster, version="1.36")) == \
        "InvalidParameterException"
    assert world.code(lambda: world.eks.update_cluster_version(name=cluster, version="1.34")) == \
        "InvalidParameterException"
    world.nodegroup(cluster, world.template(InstanceType="m5.large"), size=0, nodegroupName="workers")
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName="workers")
    sandbox.faults({"latency": {"eks.cluster": 3600}})
    update = world.eks.update_cluster_version(name=cluster, version="1.35")["update"]
    described = world.eks.describe_cluster(name=cluster)["cluster"]
    assert (described["status"], described["version"]) == ("UPDATING", "1.34")
    sandbox.faults({"latency": {"eks.cluster": 0}})
    assert world.eks.describe_update(name=cluster, updateId=update["id"])["update"]["status"] == "Successful"
    assert world.eks.describe_cluster(name=cluster)["cluster"]["version"] == "1.35"
    # the node group is still at 1.34: the next cluster update waits for it
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName="workers")["nodegroup"]["version"] == "1.34"
    assert world.code(lambda: world.eks.update_cluster_version(name=cluster, version="1.36")) == \
        "InvalidRequestException"


def test_capacity_block_node_group_before_its_block_starts(world, sandbox):
    """"Create a managed node group with Capacity Blocks for ML": "if the create request is made before the
    capacity reservation is active, then the ASG won't be able to launch Amazon EC2 instances until it becomes
    active ... Whenever the reservation becomes active, then the launch of instances will succeed and the ASG
    will be scaled up to the desiredSize"; the template needs an InstanceType."""
    now = dt.datetime.now(dt.timezone.utc)
    seed = {"region": REGION, "availability_zone": ZONES[0], "instance_type": "p5.48xlarge", "count": 1,
            "type": "capacity-block", "start": (now + dt.timedelta(days=1)).isoformat(),
            "end": (now + dt.timedelta(days=2)).isoformat(), "reservation_id": "cr-" + uuid.uuid4().hex[:17]}
    block = sandbox.control("POST", "/_fmcluster/capacity-reservations", seed)["reservation_id"]
    cluster = world.cluster()
    group = _security_group(world, cluster)
    data = {"InstanceMarketOptions": {"MarketType": "capacity-block"},
            "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": block}}}
    untyped = world.template(NetworkInterfaces=[{"DeviceIndex": 0, "Groups": [group]}], **data)
    assert world.code(lambda: world.nodegroup(cluster, untyped, capacityType="CAPACITY_BLOCK",
                                              instanceTypes=["p5.48xlarge"])) == "InvalidParameterException"
    name = world.nodegroup(cluster, _efa_template(world, group, **data), size=1, capacityType="CAPACITY_BLOCK")[
        "nodegroupName"]
    waiting = world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
    assert waiting["status"] == "ACTIVE" and world.instances(cluster, name) == []
    assert "InvalidCapacityReservationId.Unavailable" in waiting["health"]["issues"][0]["message"]
    sandbox.control("POST", "/_fmcluster/capacity-reservations", {**seed, "state": "active"})  # the block starts
    started = world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
    assert started["status"] == "ACTIVE" and started["health"]["issues"] == []
    assert len(world.instances(cluster, name)) == 1


def test_a_terminated_node_is_replaced_and_its_group_still_deletes(world, sandbox):
    """A managed node group runs an Auto Scaling group ("Managed node groups", EKS user guide) and an Auto
    Scaling group replaces an instance that is terminated ("Health checks for instances in an Auto Scaling
    group": "Amazon EC2 Auto Scaling ... launches a replacement"). A node terminated out of band is replaced at
    the next look, and the group's delete then ends normally; one cluster's trouble never answers 500 for
    another cluster."""
    cluster = world.cluster()
    bystander = world.cluster()
    # EFA interfaces that go with their instance (DeleteOnTermination), as fmcluster's templates make them
    template = _efa_template(world, _security_group(world, cluster), cards=2)
    ng = world.nodegroup(cluster, template, size=2)["nodegroupName"]
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng)
    first, second = (i["InstanceId"] for i in world.instances(cluster, ng))
    world.ec2.terminate_instances(InstanceIds=[first])
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng)
    now = {i["InstanceId"] for i in world.instances(cluster, ng)}
    assert len(now) == 2 and second in now and first not in now  # the group is back to desiredSize
    world.ec2.terminate_instances(InstanceIds=[second])  # out of band again, then deleted at once
    sandbox.faults({"latency": {"eks.nodegroup": 3600}})
    assert world.eks.delete_nodegroup(clusterName=cluster, nodegroupName=ng)["nodegroup"]["status"] == "DELETING"
    sandbox.faults({"latency": {"eks.nodegroup": 0}})
    assert world.eks.list_nodegroups(clusterName=cluster)["nodegroups"] == []
    assert world.instances(cluster, ng) == []
    assert world.eks.describe_cluster(name=bystander)["cluster"]["status"] == "ACTIVE"
    world.eks.delete_cluster(name=cluster)
    world.eks.delete_cluster(name=bystander)


def test_a_failing_step_stays_with_its_resource_and_its_request(monkeypatch):
    """The emulator itself, in process: when one resource's state step raises (here a node group's delete, made
    to raise as the terminated-node case once did), that node group ends DELETE_FAILED with an InternalFailure
    health issue (an EKS issue code, "NodegroupHealth" in the EKS API reference) and every request, for it and
    for other clusters, is answered as before: no request answers 500 because of another resource's step."""
    from moto import mock_aws

    from fmcluster_sandbox.eks import EksEmulator
    from fmcluster_sandbox.faults import Faults

    with mock_aws():
        ec2, iam, cluster_role, node_role, subnets, lt = _in_process_world()
        faults = Faults()
        faults.update({"latency": {"eks.cluster": 0, "eks.nodegroup": 0}})
        emulator = EksEmulator(faults)

        def call(method: str, path: str, body: dict | None = None) -> dict:
            status, _, out = emulator.handle(method, path, "", json.dumps(body or {}).encode(), REGION,
                                             "123456789012", "arn:aws:iam::123456789012:role/admin")
            assert status == 200, out
            return json.loads(out)

        for name in ("k", "other"):
            call("POST", "/clusters", {"name": name, "roleArn": cluster_role,
                                       "resourcesVpcConfig": {"subnetIds": subnets}})
        call("POST", "/clusters/k/node-groups", {
            "nodegroupName": "gpu", "nodeRole": node_role, "subnets": subnets,
            "scalingConfig": {"minSize": 1, "maxSize": 1, "desiredSize": 1}, "launchTemplate": {"id": lt}})
        assert call("GET", "/clusters/k/node-groups/gpu")["nodegroup"]["status"] == "ACTIVE"

        def broken(ng, instance_ids):
            raise RuntimeError("sandbox bug")

        monkeypatch.setattr(emulator, "_terminate", broken)
        faults.update({"latency": {"eks.nodegroup": 3600}})
        call("DELETE", "/clusters/k/node-groups/gpu")
        faults.update({"latency": {"eks.nodegroup": 0}})
        for _ in range(2):  # the step that raised is not taken again by each later request
            assert call("GET", "/clusters/other")["cluster"]["status"] == "ACTIVE"
            assert call("GET", "/clusters")["clusters"] == ["k", "other"]
        ng = call("GET", "/clusters/k/node-groups/gpu")["nodegroup"]
        assert ng["status"] == "DELETE_FAILED"
        assert [i["code"] for i in ng["health"]["issues"]] == ["InternalFailure"]
        monkeypatch.undo()
        call("DELETE", "/clusters/k/node-groups/gpu")  # DeleteNodegroup retries a DELETE_FAILED group
        assert call("GET", "/clusters/k/node-groups")["nodegroups"] == []


def test_nodegroup_version_and_addon_updates(world, sandbox):
    """UpdateNodegroupVersion (EKS User Guide "Update a managed node group for your cluster"): the same node group
    rolls onto a launch template's new version and onto the cluster's Kubernetes version (never past it), its nodes
    replaced; a template of its own AMI takes no version; the group's template only. Once the groups are at the
    cluster's version, the next UpdateClusterVersion is accepted ("Update existing cluster to new Kubernetes
    version"). UpdateAddon ("Update an Amazon EKS add-on"): a version offered for the cluster's Kubernetes version
    only; DescribeUpdate follows each."""
    cluster = world.cluster(version="1.34")
    world.eks.describe_cluster(name=cluster)
    made = world.ec2.create_launch_template(LaunchTemplateName=f"eks-{uuid.uuid4().hex[:10]}", LaunchTemplateData={
        "InstanceType": "m5.large", "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20}}]})
    template = {"id": made["LaunchTemplate"]["LaunchTemplateId"], "version": "1"}
    group = world.nodegroup(cluster, template, size=1, nodegroupName="workers", amiType="AL2023_x86_64_STANDARD")
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName="workers")
    (first,) = world.instances(cluster, "workers")
    world.eks.update_cluster_version(name=cluster, version="1.35")
    assert world.eks.describe_cluster(name=cluster)["cluster"]["version"] == "1.35"
    # past the cluster's version, or another template: refused
    assert world.code(lambda: world.eks.update_nodegroup_version(clusterName=cluster, nodegroupName="workers",
                                                                 version="1.36")) == "InvalidParameterException"
    other = world.template(InstanceType="m5.large")
    assert world.code(lambda: world.eks.update_nodegroup_version(clusterName=cluster, nodegroupName="workers",
                                                                 launchTemplate=other)) == "InvalidParameterException"
    world.ec2.create_launch_template_version(LaunchTemplateId=template["id"], LaunchTemplateData={
        "InstanceType": "m5.large", "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 30}}]})
    sandbox.faults({"latency": {"eks.nodegroup": 3600}})
    update = world.eks.update_nodegroup_version(clusterName=cluster, nodegroupName="workers", version="1.35",
                                                launchTemplate={"id": template["id"], "version": "2"})["update"]
    assert (update["type"], update["status"]) == ("VersionUpdate", "InProgress")
    # one update at a time
    assert world.code(lambda: world.eks.update_nodegroup_version(clusterName=cluster, nodegroupName="workers")) == \
        "ResourceInUseException"
    sandbox.faults({"latency": {"eks.nodegroup": 0}})
    assert world.eks.describe_update(name=cluster, nodegroupName="workers", updateId=update["id"])["update"][
        "status"] == "Successful"
    after = world.eks.describe_nodegroup(clusterName=cluster, nodegroupName="workers")["nodegroup"]
    assert (after["nodegroupArn"], after["version"], after["launchTemplate"]["version"]) == (
        group["nodegroupArn"], "1.35", "2")
    (second,) = world.instances(cluster, "workers")
    assert second["InstanceId"] != first["InstanceId"]  # the node was replaced by one of the new template
    world.eks.update_cluster_version(name=cluster, version="1.36")  # the groups caught up: accepted
    assert world.eks.describe_cluster(name=cluster)["cluster"]["version"] == "1.36"

    # a template that names its own AMI: no version
    custom = world.nodegroup(cluster, world.template(InstanceType="m5.large"), size=0)["nodegroupName"]
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=custom)
    assert world.code(lambda: world.eks.update_nodegroup_version(clusterName=cluster, nodegroupName=custom,
                                                                 version="1.36")) == "InvalidParameterException"

    # kube-proxy at its 1.36 version; a version EKS offers only for 1.34 is refused, then the add-on's
    # configuration changes through DescribeUpdate's Successful (catalog: kube-proxy 1.34 v1.34.6-eksbuild.2)
    world.eks.create_addon(clusterName=cluster, addonName="kube-proxy")
    assert world.eks.describe_addon(clusterName=cluster, addonName="kube-proxy")["addon"]["status"] == "ACTIVE"
    assert world.code(lambda: world.eks.update_addon(clusterName=cluster, addonName="kube-proxy",
                                                     addonVersion="v1.34.6-eksbuild.2")) == "InvalidParameterException"
    update = world.eks.update_addon(clusterName=cluster, addonName="kube-proxy", configurationValues="{}",
                                    resolveConflicts="OVERWRITE")["update"]
    assert world.eks.describe_update(name=cluster, addonName="kube-proxy", updateId=update["id"])["update"][
        "status"] == "Successful"
    assert world.eks.describe_addon(clusterName=cluster, addonName="kube-proxy")["addon"]["configurationValues"] == "{}"


def _pod_identity_rules(emulator, iam, cluster_role: str, subnets: list[str]) -> None:
    """EKS Pod Identity associations in the emulator, through botocore's shapes (each request and answer checked
    against the EKS model): CreatePodIdentityAssociation needs an existing role, allows one association per
    namespace and ServiceAccount (ResourceInUseException for a second), issues an ``a-…`` id; List filters by
    namespace and ServiceAccount and answers summaries; Describe and Delete take the id; a deleted cluster takes its
    associations with it (EKS API reference, CreatePodIdentityAssociation and the other Pod Identity operations)."""
    import re

    pods = iam.create_role(RoleName="pods", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
                                                "Action": ["sts:AssumeRole", "sts:TagSession"]}]}))["Role"]["Arn"]

    def call(method: str, path: str, body: dict | None = None, status: int = 200, query: str = "") -> dict:
        code, headers, out = emulator.handle(method, path, query, json.dumps(body or {}).encode(), REGION,
                                             "123456789012", "arn:aws:iam::123456789012:role/admin")
        assert code == status, out
        return json.loads(out) | ({"error": headers["x-amzn-ErrorType"]} if code != 200 else {})

    call("POST", "/clusters", {"name": "p", "roleArn": cluster_role, "resourcesVpcConfig": {"subnetIds": subnets}})
    made = call("POST", "/clusters/p/pod-identity-associations",
                {"namespace": "kube-system", "serviceAccount": "ca", "roleArn": pods, "tags": {"t": "v"}})
    association = made["association"]
    assert re.fullmatch(r"a-[a-z0-9]{17}", association["associationId"]), association
    assert association["associationArn"].endswith(f":podidentityassociation/p/{association['associationId']}")
    again = call("POST", "/clusters/p/pod-identity-associations",
                 {"namespace": "kube-system", "serviceAccount": "ca", "roleArn": pods}, status=409)
    assert again["error"] == "ResourceInUseException"
    missing = call("POST", "/clusters/p/pod-identity-associations",
                   {"namespace": "kube-system", "serviceAccount": "other", "roleArn": pods + "-gone"}, status=400)
    assert missing["error"] == "InvalidParameterException"
    call("POST", "/clusters/p/pod-identity-associations", {"namespace": "default", "serviceAccount": "ca",
                                                            "roleArn": pods})
    listed = call("GET", "/clusters/p/pod-identity-associations",
                  query="namespace=kube-system&serviceAccount=ca")["associations"]
    assert [(a["namespace"], a["associationId"]) for a in listed] == [("kube-system", association["associationId"])]
    assert "roleArn" not in listed[0]  # a summary
    path = f"/clusters/p/pod-identity-associations/{association['associationId']}"
    described = call("GET", path)["association"]
    assert (described["roleArn"], described["tags"]) == (pods, {"t": "v"})
    call("DELETE", path)
    assert call("GET", path, status=404)["error"] == "ResourceNotFoundException"
    call("DELETE", "/clusters/p")
    call("GET", "/clusters")  # the delete completes (no latency in process)
    call("POST", "/clusters", {"name": "p", "roleArn": cluster_role, "resourcesVpcConfig": {"subnetIds": subnets}})
    assert call("GET", "/clusters/p/pod-identity-associations")["associations"] == []  # gone with the cluster
