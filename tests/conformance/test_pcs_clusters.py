"""PCS clusters and queues, as a boto3 client meets them: model validation, versions, quotas, pages, updates,
idempotency and custom settings."""

from __future__ import annotations

import uuid

import pytest
from fixtures.pcs_world import REGION, Pcs

QUOTA_REGION = "ap-northeast-1"  # the quota and page tests fill this Region with clusters


def test_requests_are_checked_against_the_model(world):
    """PCS API reference, "Common errors" / ValidationException: a request that breaks the service's input
    constraints (pattern, enum, length, range, unknown member) is refused with a fieldList."""
    raw = world.sandbox.client("pcs", REGION, parameter_validation=False, retries={"max_attempts": 1})
    response = world.refused(lambda: raw.create_cluster(
        clusterName="1bad", scheduler={"type": "SLURM", "version": "26.05"}, size="HUGE",
        networking={"subnetIds": ["bogus"]}, clientToken="short"))
    assert {f["name"] for f in response["fieldList"]} == {"clusterName", "size", "networking.subnetIds[0]",
                                                          "clientToken"}
    world.refused(lambda: raw.list_clusters(maxResults=101))


@pytest.mark.parametrize("version", ["24.11", "25.05", "23.11"])
def test_slurm_versions_past_end_of_life_or_unlisted_are_refused(world, version):
    """"Slurm versions in AWS PCS": after a version's end of life (24.11: 2026-05-31, 25.05: 2026-11-30) no
    new clusters can use it; the versions botocore's model lists are 24.11, 25.05, 25.11 and 26.05."""
    response = world.refused(lambda: world.cluster(version=version))
    assert response["fieldList"][0]["name"] == "scheduler.version"


def test_clusters_quota_comes_from_service_quotas(sandbox):
    """"AWS Parallel Computing Service endpoints and quotas": Clusters, 5 per Region by default, adjustable
    (Service Quotas ``pcs`` / ``L-0ADE95E3``); the sixth CreateCluster is refused with
    ServiceQuotaExceededException until the quota is raised."""
    world = Pcs(sandbox, QUOTA_REGION)
    world.delete_everything()
    quotas = sandbox.client("service-quotas", QUOTA_REGION)
    quota = quotas.get_service_quota(ServiceCode="pcs", QuotaCode="L-0ADE95E3")["Quota"]
    assert (quota["QuotaName"], quota["Value"], quota["Adjustable"]) == ("Clusters", 5.0, True)
    try:
        for _ in range(5):
            world.cluster()
        response = world.refused(world.cluster, "ServiceQuotaExceededException")
        assert (response["quotaCode"], response["serviceCode"]) == ("L-0ADE95E3", "pcs")
        sandbox.quotas({"region": QUOTA_REGION, "service_code": "pcs", "L-0ADE95E3": 6})
        assert world.cluster()["status"] == "ACTIVE"
    finally:
        world.delete_everything()


def test_list_pages_default_to_10_and_allow_up_to_100(sandbox):
    """ListClusters/ListComputeNodeGroups/ListQueues, maxResults: "The default is 10 results, and the maximum
    allowed page size is 100 results." (PCS API reference; its "A value of 0 uses the default" is not
    reachable: the model sets maxResults min 1, and botocore and the sandbox both refuse 0)"""
    world = Pcs(sandbox, QUOTA_REGION)
    world.delete_everything()
    sandbox.quotas({"region": QUOTA_REGION, "service_code": "pcs", "L-0ADE95E3": 12})
    try:
        for _ in range(12):
            world.cluster()
        first = world.pcs.list_clusters()
        assert len(first["clusters"]) == 10 and first["nextToken"]
        assert len(world.pcs.list_clusters(nextToken=first["nextToken"])["clusters"]) == 2
        assert "nextToken" not in world.pcs.list_clusters(maxResults=100)
    finally:
        world.delete_everything()


def test_one_cluster_creating_per_region(world, sandbox):
    """CreateCluster (PCS API reference): "There can only be 1 cluster in a Creating state per AWS Region per
    AWS account. CreateCluster fails with a ServiceQuotaExceededException if there is already a cluster in
    a Creating state.\""""
    sandbox.faults({"latency": {"pcs.cluster": 30}})
    subnet = world.default_subnet()["SubnetId"]
    world.pcs.create_cluster(clusterName=f"c{uuid.uuid4().hex[:8]}", size="SMALL",
                             networking={"subnetIds": [subnet]}, scheduler={"type": "SLURM", "version": "26.05"})
    world.refused(lambda: world.pcs.create_cluster(
        clusterName=f"c{uuid.uuid4().hex[:8]}", size="SMALL", networking={"subnetIds": [subnet]},
        scheduler={"type": "SLURM", "version": "26.05"}), "ServiceQuotaExceededException")
    sandbox.faults({"reset": True})


def test_update_cluster_states_and_versions(world, sandbox):
    """UpdateCluster (PCS API reference): "You can only update clusters that are in ACTIVE, UPDATE_FAILED, or
    SUSPENDED state. All associated resources (queues and compute node groups) must be in ACTIVE state";
    "Updating the scheduler version of a cluster in AWS PCS": the version moves to a newer one."""
    cluster = world.cluster(version="25.11")
    pcs = world.pcs
    world.refused(lambda: pcs.update_cluster(clusterIdentifier=cluster["id"], scheduler={"version": "25.11"}))
    sandbox.faults({"latency": {"pcs.compute_node_group": 30}})
    world.node_group(cluster, world.launch_template())
    world.refused(lambda: pcs.update_cluster(clusterIdentifier=cluster["id"], scheduler={"version": "26.05"}),
                  "ConflictException")
    sandbox.faults({"latency": {"pcs.compute_node_group": 0},
                    "fail_status": {f"cluster:{cluster['id']}": "UPDATE_FAILED"}})
    pcs.update_cluster(clusterIdentifier=cluster["id"], slurmConfiguration={"scaleDownIdleTimeInSeconds": 600})
    assert world.wait_cluster(cluster["id"])["status"] == "UPDATE_FAILED"
    sandbox.faults({"fail_status": {f"cluster:{cluster['id']}": None}})
    assert pcs.update_cluster(clusterIdentifier=cluster["id"], scheduler={"version": "26.05"})["cluster"][
        "status"] == "UPDATING"
    assert world.wait_cluster(cluster["id"])["scheduler"]["version"] == "26.05"
    world.refused(lambda: pcs.update_cluster(clusterIdentifier=cluster["id"], scheduler={"version": "25.11"}))


def test_update_refused_while_creating(world, sandbox):
    """UpdateCluster: a cluster still CREATING is not in a state that can be updated (ConflictException)."""
    sandbox.faults({"latency": {"pcs.cluster": 30}})
    subnet = world.default_subnet()["SubnetId"]
    cluster = world.pcs.create_cluster(clusterName=f"c{uuid.uuid4().hex[:8]}", size="SMALL",
                                       networking={"subnetIds": [subnet]},
                                       scheduler={"type": "SLURM", "version": "25.11"})["cluster"]
    world.refused(lambda: world.pcs.update_cluster(clusterIdentifier=cluster["id"],
                                                   scheduler={"version": "26.05"}), "ConflictException")
    sandbox.faults({"reset": True})


def test_client_token_replay_returns_the_original_response(world):
    """clientToken (PCS API reference): "the subsequent retries with the same client token return the result
    from the original successful request and they have no additional effect"."""
    subnet = world.default_subnet()["SubnetId"]
    args = {"clusterName": f"c{uuid.uuid4().hex[:8]}", "size": "SMALL", "networking": {"subnetIds": [subnet]},
            "scheduler": {"type": "SLURM", "version": "26.05"}, "clientToken": uuid.uuid4().hex}
    first = world.pcs.create_cluster(**args)["cluster"]
    assert world.wait_cluster(first["id"])["status"] == "ACTIVE"
    again = world.pcs.create_cluster(**args)["cluster"]
    assert again == first and again["status"] == "CREATING"
    assert len([c for c in world.pcs.list_clusters()["clusters"] if c["name"] == args["clusterName"]]) == 1
    world.refused(lambda: world.pcs.create_cluster(**{**args, "size": "LARGE"}), "ConflictException")


def test_custom_slurm_settings_follow_pcs_allow_lists(world):
    """"Configuring custom Slurm settings in AWS PCS": "AWS PCS implements an allow-list approach" (the lists
    in "Custom Slurm settings for AWS PCS clusters / compute node groups / queues"); Sockets and Parameters
    on compute node groups need Slurm 25.11 or later; MinJobAge is at least 5 seconds."""
    world.refused(lambda: world.cluster(slurmConfiguration={"slurmCustomSettings": [
        {"parameterName": "SlurmctldPort", "parameterValue": "1234"}]}))
    world.refused(lambda: world.cluster(slurmConfiguration={"slurmCustomSettings": [
        {"parameterName": "MinJobAge", "parameterValue": "1"}]}))
    # Slurm's topology plugin is none of the cluster settings PCS lists: PCS sets Slurm's topology itself (issue 39)
    world.refused(lambda: world.cluster(slurmConfiguration={"slurmCustomSettings": [
        {"parameterName": "TopologyPlugin", "parameterValue": "topology/tree"}]}))
    cluster = world.cluster(slurmConfiguration={"slurmCustomSettings": [
        {"parameterName": "Prolog", "parameterValue": "/shared/prolog.sh"}],
        "cgroupCustomSettings": [{"parameterName": "ConstrainCores", "parameterValue": "yes"}]})
    template = world.launch_template()
    world.refused(lambda: world.node_group(cluster, template, slurmConfiguration={"slurmCustomSettings": [
        {"parameterName": "Prolog", "parameterValue": "/x"}]}))
    group = world.node_group(cluster, template, slurmConfiguration={"slurmCustomSettings": [
        {"parameterName": "Sockets", "parameterValue": "2"}]})
    world.refused(lambda: world.pcs.create_queue(clusterIdentifier=cluster["id"], queueName="que-a",
                                                 slurmConfiguration={"slurmCustomSettings": [
                                                     {"parameterName": "Weight", "parameterValue": "1"}]}))
    queue = world.pcs.create_queue(clusterIdentifier=cluster["id"], queueName="que-b",
                                   computeNodeGroupConfigurations=[{"computeNodeGroupId": group["id"]}],
                                   slurmConfiguration={"slurmCustomSettings": [
                                       {"parameterName": "MaxTime", "parameterValue": "60"}]})["queue"]
    assert queue["slurmConfiguration"]["slurmCustomSettings"][0]["parameterName"] == "MaxTime"


def test_queues_and_node_groups_per_cluster(world):
    """"AWS PCS quotas" (internal): 10 queues per cluster, 10 compute node groups per cluster."""
    cluster = world.cluster()
    for index in range(10):
        world.pcs.create_queue(clusterIdentifier=cluster["id"], queueName=f"que{index:02d}")
    world.refused(lambda: world.pcs.create_queue(clusterIdentifier=cluster["id"], queueName="que10"),
                  "ServiceQuotaExceededException")
    assert len(world.pcs.list_queues(clusterIdentifier=cluster["id"])["queues"]) == 10


def test_references_are_checked(world):
    """CreateCluster/CreateComputeNodeGroup (PCS API reference): "The subnets and security groups for the cluster
    must already exist"; node group "Subnets must be in the same VPC as the cluster"; "IAM instance profiles for
    AWS PCS": the role's name must start with AWSPCS or its path be /aws-pcs/."""
    world.refused(lambda: world.pcs.create_cluster(clusterName="nosubnet", size="SMALL",
                                                   scheduler={"type": "SLURM", "version": "26.05"},
                                                   networking={"subnetIds": ["subnet-0123456789abcdef0"]}))
    cluster = world.cluster()
    template = world.launch_template()
    other_vpc = world.ec2.create_vpc(CidrBlock="10.250.0.0/16")["Vpc"]["VpcId"]
    foreign = world.ec2.create_subnet(VpcId=other_vpc, CidrBlock="10.250.1.0/24")["Subnet"]["SubnetId"]
    world.refused(lambda: world.node_group(cluster, template, subnets=[foreign]))
    name = f"plain-{uuid.uuid4().hex[:6]}"
    world.iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")
    arn = world.iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"]
    world.iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    response = world.refused(lambda: world.pcs.create_compute_node_group(
        clusterIdentifier=cluster["id"], computeNodeGroupName="plain", subnetIds=[world.default_subnet()["SubnetId"]],
        customLaunchTemplate=template, iamInstanceProfileArn=arn, instanceConfigs=[{"instanceType": "m7i.xlarge"}],
        scalingConfiguration={"minInstanceCount": 0, "maxInstanceCount": 1}))
    assert response["fieldList"][0]["name"] == "iamInstanceProfileArn"


def test_children_are_deleted_first(world):
    """DeleteCluster (PCS API reference): "You must delete all queues and compute node groups associated with
    the cluster before you can delete the cluster"; a node group a queue uses cannot be deleted."""
    cluster = world.cluster()
    group = world.wait_group(world.node_group(cluster, world.launch_template()))
    world.pcs.create_queue(clusterIdentifier=cluster["id"], queueName="que-a",
                           computeNodeGroupConfigurations=[{"computeNodeGroupId": group["id"]}])
    world.refused(lambda: world.pcs.delete_cluster(clusterIdentifier=cluster["id"]), "ConflictException")
    world.refused(lambda: world.pcs.delete_compute_node_group(clusterIdentifier=cluster["id"],
                                                              computeNodeGroupIdentifier=group["id"]),
                  "ConflictException")


def test_cluster_size_caps_the_node_groups(world):
    """"Cluster size in AWS PCS": a SMALL cluster manages up to 32 instances, so the node groups' maxInstanceCount
    may not sum past it (ServiceQuotaExceededException)."""
    cluster = world.cluster()
    template = world.launch_template()
    world.node_group(cluster, template, high=20)
    world.refused(lambda: world.node_group(cluster, template, high=13), "ServiceQuotaExceededException")
    assert world.node_group(cluster, template, high=12)["scalingConfiguration"]["maxInstanceCount"] == 12


def test_aws_tag_prefix_is_reserved(world):
    """"Tagging your AWS resources" (AWS General Reference): the ``aws:`` prefix is reserved for AWS use."""
    world.refused(lambda: world.cluster(tags={"aws:owner": "me"}))
