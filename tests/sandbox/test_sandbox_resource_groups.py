"""AWS Resource Groups for Capacity Reservation groups in the sandbox, through real boto3 clients over HTTPS:
what a team does to group its ODCRs (EC2 user guide, "Capacity Reservation groups"), and launches that target
the group drawing on its reservations."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from fmcluster_sandbox import model_check

POOL = [{"Type": "AWS::EC2::CapacityReservationPool"},
        {"Type": "AWS::ResourceGroups::Generic",
         "Parameters": [{"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}]}]


def _odcr(ec2, count: int, instance_type: str = "p5.48xlarge", zone: str = "us-east-1a") -> dict:
    return ec2.create_capacity_reservation(InstanceType=instance_type, InstancePlatform="Linux/UNIX",
                                           AvailabilityZone=zone, InstanceCount=count,
                                           InstanceMatchCriteria="targeted")["CapacityReservation"]


def _answer_fits_the_model(operation: str, answer: dict) -> None:
    answer = {k: v for k, v in answer.items() if k != "ResponseMetadata"}
    assert model_check.check("resource-groups", operation, answer, output=True) == []


@pytest.fixture
def odcr_group(sandbox):
    """A Capacity Reservation group holding two ODCRs (2 and 1 × p5.48xlarge in us-east-1a)."""
    ec2, groups = sandbox.client("ec2"), sandbox.client("resource-groups")
    name = f"odcrs-{uuid.uuid4().hex[:8]}"
    created = groups.create_group(Name=name, Configuration=POOL)
    _answer_fits_the_model("CreateGroup", created)
    reservations = [_odcr(ec2, 2), _odcr(ec2, 1)]
    added = groups.group_resources(Group=name, ResourceArns=[r["CapacityReservationArn"] for r in reservations])
    _answer_fits_the_model("GroupResources", added)
    assert added["Succeeded"] == [r["CapacityReservationArn"] for r in reservations] and not added["Failed"]
    try:
        yield created["Group"]["GroupArn"], reservations
    finally:
        groups.delete_group(Group=name)
        for reservation in reservations:
            ec2.cancel_capacity_reservation(CapacityReservationId=reservation["CapacityReservationId"])


def test_group_two_reservations_and_list_them(sandbox, odcr_group):
    arn, reservations = odcr_group
    groups = sandbox.client("resource-groups")
    assert arn.startswith("arn:aws:resource-groups:us-east-1:123456789012:group/odcrs-")
    listed = groups.list_group_resources(Group=arn)
    _answer_fits_the_model("ListGroupResources", listed)
    assert [r["Identifier"] for r in listed["Resources"]] == [
        {"ResourceArn": r["CapacityReservationArn"], "ResourceType": "AWS::EC2::CapacityReservation"}
        for r in reservations]
    configuration = groups.get_group_configuration(Group=arn)["GroupConfiguration"]
    assert configuration["Configuration"] == POOL
    assert groups.get_group(Group=arn)["Group"]["GroupArn"] == arn
    assert arn in [g["GroupArn"] for g in groups.list_groups()["GroupIdentifiers"]]


def test_list_group_resources_pages(sandbox, odcr_group):
    arn, reservations = odcr_group
    groups = sandbox.client("resource-groups")
    first = groups.list_group_resources(Group=arn, MaxResults=1)
    second = groups.list_group_resources(Group=arn, MaxResults=1, NextToken=first["NextToken"])
    assert [p["Resources"][0]["Identifier"]["ResourceArn"] for p in (first, second)] == [
        r["CapacityReservationArn"] for r in reservations]
    assert "NextToken" not in second


def test_unknown_group_is_not_found(sandbox):
    groups = sandbox.client("resource-groups", retries={"max_attempts": 1})
    wrong = "arn:aws:resource-groups:us-east-1:123456789012:group/no-such-group"
    for call in (lambda: groups.list_group_resources(Group=wrong),
                 lambda: groups.group_resources(Group=wrong, ResourceArns=[
                     "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0123456789abcdef0"]),
                 lambda: groups.get_group_configuration(Group=wrong),
                 lambda: groups.delete_group(Group=wrong)):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == "NotFoundException"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_group_in_another_region_is_not_this_regions(sandbox, odcr_group):
    arn, _ = odcr_group
    with pytest.raises(ClientError) as refused:
        sandbox.client("resource-groups", "us-west-2").list_group_resources(Group=arn)
    assert refused.value.response["Error"]["Code"] == "NotFoundException"


def test_pool_group_takes_only_capacity_reservations(sandbox, odcr_group):
    arn, _ = odcr_group
    instance = "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"
    answer = sandbox.client("resource-groups").group_resources(Group=arn, ResourceArns=[instance])
    assert answer["Succeeded"] == [] and [f["ResourceArn"] for f in answer["Failed"]] == [instance]


def test_create_group_rules(sandbox):
    groups = sandbox.client("resource-groups", retries={"max_attempts": 1})
    name = f"bad-{uuid.uuid4().hex[:8]}"
    cases = [
        # a pool without the Generic allowed-resource-types item (Resource Groups user guide)
        dict(Name=name, Configuration=POOL[:1]),
        # a query and a configuration at once (API reference, CreateGroup)
        dict(Name=name, Configuration=POOL, ResourceQuery={"Type": "TAG_FILTERS_1_0", "Query": "{}"}),
        # a name longer than botocore's model allows (300)
        dict(Name="g" * 301, Configuration=POOL),
    ]
    for request in cases:
        with pytest.raises(ClientError) as refused:
            groups.create_group(**request)
        assert refused.value.response["Error"]["Code"] == "BadRequestException", request
    groups.create_group(Name=name, Configuration=POOL)
    with pytest.raises(ClientError) as duplicate:
        groups.create_group(Name=name, Configuration=POOL)
    assert duplicate.value.response["Error"]["Code"] == "BadRequestException"
    groups.delete_group(Group=name)


def test_tag_query_group_takes_no_grouped_resources(sandbox):
    groups = sandbox.client("resource-groups", retries={"max_attempts": 1})
    name = f"tags-{uuid.uuid4().hex[:8]}"
    groups.create_group(Name=name, ResourceQuery={
        "Type": "TAG_FILTERS_1_0", "Query": '{"ResourceTypeFilters":["AWS::AllSupported"],"TagFilters":[]}'})
    with pytest.raises(ClientError) as refused:
        groups.group_resources(Group=name, ResourceArns=[
            "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0123456789abcdef0"])
    assert refused.value.response["Error"]["Code"] == "BadRequestException"
    groups.delete_group(Group=name)


def _available(ec2, reservations) -> list[int]:
    ids = [r["CapacityReservationId"] for r in reservations]
    found = ec2.describe_capacity_reservations(CapacityReservationIds=ids)["CapacityReservations"]
    by_id = {r["CapacityReservationId"]: r["AvailableInstanceCount"] for r in found}
    return [by_id[rid] for rid in ids]


def test_launch_into_group_uses_its_reservations_then_on_demand(sandbox, odcr_group):
    """Instances match any reservation of the group with the same type, AZ and free capacity; beyond them they
    run On-Demand (EC2 user guide, "Capacity Reservation groups")."""
    arn, reservations = odcr_group
    ec2 = sandbox.client("ec2")
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                           {"Name": "availability-zone", "Values": ["us-east-1a"]}])["Subnets"][0][
        "SubnetId"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    target = {"CapacityReservationTarget": {"CapacityReservationResourceGroupArn": arn}}
    launched = ec2.run_instances(ImageId=image, MinCount=4, MaxCount=4, InstanceType="p5.48xlarge", SubnetId=subnet,
                                 CapacityReservationSpecification=target)["Instances"]
    try:
        assert len(launched) == 4  # 3 in the group's reservations, 1 On-Demand
        assert _available(ec2, reservations) == [0, 0]
    finally:
        ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in launched])
    assert _available(ec2, reservations) == [2, 1]


def test_launch_of_another_type_leaves_the_group_alone(sandbox, odcr_group):
    arn, reservations = odcr_group
    ec2 = sandbox.client("ec2")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    launched = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m7i.large",
                                 Placement={"AvailabilityZone": "us-east-1a"},
                                 CapacityReservationSpecification={
                                     "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": arn}},
                                 )["Instances"]
    try:
        assert _available(ec2, reservations) == [2, 1]
    finally:
        ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in launched])
