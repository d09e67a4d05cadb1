"""PCS compute node groups, as a boto3 client meets them: what CreateComputeNodeGroup refuses, how nodes
launch (through EC2's rules) and whether they can reach PCS to register."""

from __future__ import annotations

import base64
import datetime as dt
import uuid

import pytest
from fixtures.pcs_world import MIME_USER_DATA, ZONE


def _efa_interfaces(group: str, cards: int) -> list[dict]:
    """AWS's P5 layout (aws-hpc-recipes "pcs-lt-efa-p5"): card 0 device 0, then device 1 on every card."""
    return [{"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "InterfaceType": "efa",
             "Groups": [group], "DeleteOnTermination": True} for card in range(cards)]


def _block(sandbox, instance_type: str, count: int, start: dt.datetime, end: dt.datetime,
           kind: str = "capacity-block") -> str:
    return sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "region": "us-east-2", "availability_zone": ZONE, "instance_type": instance_type, "count": count,
        "type": kind, "start": start.isoformat(), "end": end.isoformat(),
        "reservation_id": "cr-" + uuid.uuid4().hex[:17]})["reservation_id"]


def _reserved_template(world, reservation_id: str, instance_type: str, block: bool = True) -> dict[str, str]:
    data = {"CapacityReservationSpecification": {"CapacityReservationTarget": {
        "CapacityReservationId": reservation_id}}, "InstanceType": instance_type}
    if block:
        data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    return world.launch_template(**data)


def test_unknown_instance_types_are_refused(world):
    """"Creating a compute node group in AWS PCS": instanceConfigs name EC2 instance types; one EC2 does not
    have (DescribeInstanceTypes) is refused."""
    cluster = world.cluster()
    response = world.refused(lambda: world.node_group(cluster, world.launch_template(), instance_type="p9.huge"))
    assert response["fieldList"][0]["name"] == "instanceConfigs[0].instanceType"


def test_spot_needs_the_ec2_spot_service_linked_role(world):
    """"Amazon EC2 Spot role for AWS PCS" / "Updating an AWS PCS compute node group": "If you update a compute
    node group to use Spot for its purchase option, you must have the AWSServiceRoleForEC2Spot
    service-linked role in your account"."""
    cluster = world.cluster()
    template = world.launch_template()
    world.refused(lambda: world.node_group(cluster, template, purchaseOption="SPOT"))
    role = world.iam.create_service_linked_role(AWSServiceName="spot.amazonaws.com")["Role"]
    try:
        assert role["RoleName"] == "AWSServiceRoleForEC2Spot"
        group = world.node_group(cluster, template, purchaseOption="SPOT")
        assert world.wait_group(group)["status"] == "ACTIVE"
    finally:
        world.delete_everything()
        world.iam.delete_service_linked_role(RoleName="AWSServiceRoleForEC2Spot")


def test_user_data_must_be_mime_multipart(world):
    """"Working with Amazon EC2 user data for AWS PCS": user data in the launch template must be a MIME
    multi-part archive."""
    cluster = world.cluster()
    plain = world.launch_template(UserData=base64.b64encode(b"#!/bin/bash\necho hi\n").decode())
    world.refused(lambda: world.node_group(cluster, plain))
    assert world.node_group(cluster, world.launch_template(UserData=MIME_USER_DATA))["status"] == "CREATING"


def test_no_node_group_security_groups_with_template_interfaces(world):
    """CreateComputeNodeGroup, securityGroupIds (PCS API reference): "You can't specify this value if the
    custom launch template defines network interfaces"."""
    cluster = world.cluster()
    group = world.security_group(world.default_subnet()["VpcId"])
    template = world.launch_template(NetworkInterfaces=[{"DeviceIndex": 0, "Groups": [group]}])
    response = world.refused(lambda: world.node_group(cluster, template, securityGroupIds=[group]))
    assert response["fieldList"][0]["name"] == "securityGroupIds"


def test_instance_health_checks_need_slurm_26_05_and_nvidia_gpus(world):
    """CreateComputeNodeGroup, instanceHealthChecks (PCS API reference): "You can't specify an empty object";
    "Instance health checks require Slurm version 26.05 or later"; DeepHealthCheckOnStart profile: "A profile
    other than NONE requires instance types with NVIDIA GPUs"."""
    checks = {"deepHealthChecks": {"onStart": {"profile": "QUICK"}}}
    old = world.cluster(version="25.11")
    template = world.launch_template()
    world.refused(lambda: world.node_group(old, template, instance_type="p5.4xlarge", instanceHealthChecks=checks))
    new = world.cluster(version="26.05")
    world.refused(lambda: world.node_group(new, template, instanceHealthChecks={}))
    response = world.refused(lambda: world.node_group(new, template, instanceHealthChecks=checks))
    assert "NVIDIA" in response["message"]
    world.refused(lambda: world.node_group(new, template, instanceHealthChecks={
        "healthMonitoring": {"mode": "NONE", "repairAction": "REPLACE"}}))
    group = world.node_group(new, template, instance_type="p5.4xlarge", instanceHealthChecks=checks)
    assert group["instanceHealthChecks"] == checks


def test_capacity_block_rules(world, sandbox):
    """"Configure an AWS PCS compute node group to use a Capacity Block": the launch template has MarketType
    capacity-block, a CapacityReservationId and the block's InstanceType; the block is scheduled or active;
    purchaseOption is CAPACITY_BLOCK; maxInstanceCount does not exceed the block's size. EC2 "Capacity
    Blocks for ML": instances launched into the block count against it."""
    now = dt.datetime.now(dt.timezone.utc)
    block = _block(sandbox, "p5.48xlarge", 2, now - dt.timedelta(hours=1), now + dt.timedelta(days=1))
    cluster = world.cluster()
    template = _reserved_template(world, block, "p5.48xlarge")
    kwargs = {"instance_type": "p5.48xlarge", "purchaseOption": "CAPACITY_BLOCK"}
    world.refused(lambda: world.node_group(cluster, world.launch_template(), **kwargs))  # no market type
    world.refused(lambda: world.node_group(cluster, template, instance_type="p5.48xlarge"))  # not CAPACITY_BLOCK
    response = world.refused(lambda: world.node_group(cluster, template, low=2, high=4, **kwargs))
    assert response["fieldList"][0]["name"] == "scalingConfiguration.maxInstanceCount"
    other = _block(sandbox, "p5en.48xlarge", 2, now - dt.timedelta(hours=1), now + dt.timedelta(days=1))
    world.refused(lambda: world.node_group(cluster, _reserved_template(world, other, "p5en.48xlarge"), **kwargs))
    expired = _block(sandbox, "p5.48xlarge", 2, now - dt.timedelta(days=3), now - dt.timedelta(days=1))
    world.refused(lambda: world.node_group(cluster, _reserved_template(world, expired, "p5.48xlarge"), **kwargs))
    scheduled = _block(sandbox, "p5.48xlarge", 2, now + dt.timedelta(days=1), now + dt.timedelta(days=2))
    later = world.node_group(cluster, _reserved_template(world, scheduled, "p5.48xlarge"), low=0, high=2, **kwargs)
    assert world.wait_group(later)["status"] == "ACTIVE"

    group = world.wait_group(world.node_group(cluster, template, low=2, high=2, **kwargs))
    assert group["status"] == "ACTIVE" and len(world.instances(group["id"])) == 2
    held = world.ec2.describe_capacity_reservations(CapacityReservationIds=[block])["CapacityReservations"][0]
    assert (held["TotalInstanceCount"], held["AvailableInstanceCount"], held["State"]) == (2, 0, "active")


def test_odcr_needs_on_demand_and_counts_instances(world, sandbox):
    """"Using ODCRs with PCS": "Choose On-Demand if you plan to use an On-Demand Capacity Reservation"; EC2
    "Capacity Reservations": a targeted reservation holds its count, and a launch beyond what is free fails
    (ReservationCapacityExceeded)."""
    now = dt.datetime.now(dt.timezone.utc)
    odcr = _block(sandbox, "p5.4xlarge", 1, now - dt.timedelta(hours=1), now + dt.timedelta(days=7), kind="default")
    cluster = world.cluster()
    template = _reserved_template(world, odcr, "p5.4xlarge", block=False)
    world.refused(lambda: world.node_group(cluster, template, instance_type="p5.4xlarge",
                                           purchaseOption="CAPACITY_BLOCK"))
    first = world.wait_group(world.node_group(cluster, template, instance_type="p5.4xlarge", low=1, high=1))
    assert first["status"] == "ACTIVE"
    second = world.wait_group(world.node_group(cluster, template, instance_type="p5.4xlarge", low=1, high=1))
    assert second["status"] == "CREATE_FAILED"
    assert second["errorInfo"][0]["code"] == "ReservationCapacityExceeded"


def test_efa_template_on_a_type_without_efa_fails_the_node_group(world):
    """EC2 "Elastic Fabric Adapter": EFA interfaces only on instance types that support EFA; a launch that
    asks for more is refused, and the node group's creation fails with EC2's error in errorInfo."""
    cluster = world.cluster()
    group = world.security_group(world.default_subnet()["VpcId"])
    template = world.launch_template(NetworkInterfaces=_efa_interfaces(group, 1))
    created = world.wait_group(world.node_group(cluster, template, instance_type="m7i.2xlarge", low=1, high=1))
    assert created["status"] == "CREATE_FAILED"
    assert created["errorInfo"][0]["code"] == "InvalidParameterCombination"


@pytest.mark.parametrize("where, registers", [("default", False), ("nat", True), ("isolated", False),
                                              ("pcs-endpoint", True)])
def test_nodes_register_only_with_a_route_to_pcs(world, sandbox, where, registers):
    """"AWS PCS VPC and subnet requirements and considerations": nodes must reach the PCS API (a NAT gateway,
    or a PCS interface VPC endpoint) to register; EC2 "Public IPv4 addresses": a launch with several network
    interfaces gets no public IPv4 address. A p5.48xlarge with AWS's 32-interface EFA layout in the default
    VPC's public subnet therefore never registers, and the node group's errorInfo says why."""
    if where == "default":
        subnet = world.default_subnet()
        subnet_id, vpc = subnet["SubnetId"], subnet["VpcId"]
    else:
        network = sandbox.private_network("us-east-2", ZONE, nat=where == "nat", pcs_endpoint=where == "pcs-endpoint")
        subnet_id, vpc = network["private_subnet"], network["vpc"]
    cluster = world.cluster(subnet=subnet_id)
    template = world.launch_template(NetworkInterfaces=_efa_interfaces(world.security_group(vpc), 32))
    group = world.wait_group(world.node_group(cluster, template, instance_type="p5.48xlarge", low=1, high=1,
                                              subnets=[subnet_id]))
    assert group["status"] == "ACTIVE"
    [node] = world.instances(group["id"])
    assert "PublicIpAddress" not in node
    if registers:
        assert "errorInfo" not in group
    else:
        assert group["errorInfo"][0]["code"] == "NodeRegistrationFailed"
        assert "could not register" in group["errorInfo"][0]["message"]


def test_nodes_behind_a_nat_gateway_need_an_egress_rule(world, sandbox):
    """EC2 "Security group rules": a group lets out only what its egress rules allow. With the default
    0.0.0.0/0 egress rule revoked (leaving only the self-referencing one), a node behind a NAT gateway cannot
    reach the PCS API; the PCS user guide's "Security groups in AWS PCS" example keeps all outbound traffic."""
    network = sandbox.private_network("us-east-2", ZONE)
    group_id = world.security_group(network["vpc"])
    world.ec2.authorize_security_group_egress(GroupId=group_id, IpPermissions=[
        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}])
    world.ec2.revoke_security_group_egress(GroupId=group_id, IpPermissions=[
        {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])
    cluster = world.cluster(subnet=network["private_subnet"])
    template = world.launch_template(NetworkInterfaces=_efa_interfaces(group_id, 32))
    group = world.wait_group(world.node_group(cluster, template, instance_type="p5.48xlarge", low=1, high=1,
                                              subnets=[network["private_subnet"]]))
    assert group["errorInfo"][0]["code"] == "NodeRegistrationFailed"
    assert "outbound" in group["errorInfo"][0]["message"]


def test_single_interface_node_in_the_default_vpc_registers(world):
    """"Default VPCs" (Amazon VPC user guide): the default VPC routes 0.0.0.0/0 to its internet gateway, and
    its subnets give a single-interface instance a public IPv4 address, so the node reaches PCS."""
    cluster = world.cluster()
    group = world.wait_group(world.node_group(cluster, world.launch_template(), low=1, high=1))
    assert group["status"] == "ACTIVE" and "errorInfo" not in group, group.get("errorInfo")
    [node] = world.instances(group["id"])
    assert node.get("PublicIpAddress")


def test_instances_are_replaced_after_an_update_that_changes_them(world):
    """"Updating an AWS PCS compute node group": "AWS PCS replaces existing instances in the node group after
    a node group update operation"; "Updates that don't impact the configuration of specific nodes don't
    affect running nodes"."""
    cluster = world.cluster()
    group = world.wait_group(world.node_group(cluster, world.launch_template(), low=1, high=2))
    [before] = [i["InstanceId"] for i in world.instances(group["id"])]
    world.pcs.update_compute_node_group(clusterIdentifier=cluster["id"], computeNodeGroupIdentifier=group["id"],
                                        scalingConfiguration={"minInstanceCount": 1, "maxInstanceCount": 3})
    world.wait_group(group)
    assert [i["InstanceId"] for i in world.instances(group["id"])] == [before]
    arm = world.sample_ami("x86_64")
    other = next(i["ImageId"] for i in world.ec2.describe_images(Owners=["amazon"], Filters=[
        {"Name": "name", "Values": ["aws-pcs-sample_ami-al2023-x86_64-slurm-25.11*"]}])["Images"])
    assert other != arm
    world.pcs.update_compute_node_group(clusterIdentifier=cluster["id"], computeNodeGroupIdentifier=group["id"],
                                        amiId=other)
    assert world.wait_group(group)["status"] == "ACTIVE"
    [after] = world.instances(group["id"])
    assert after["InstanceId"] != before and after["ImageId"] == other
