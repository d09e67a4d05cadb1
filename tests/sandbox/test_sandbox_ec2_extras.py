"""EC2 actions moto lacks and the sandbox serves itself: placement groups and capacity reservations,
through real boto3 clients over HTTPS."""

from __future__ import annotations

import datetime as dt

import pytest
from botocore.exceptions import ClientError


def test_placement_group_lifecycle(sandbox):
    ec2 = sandbox.client("ec2")
    ec2.create_placement_group(GroupName="pg-test", Strategy="cluster", TagSpecifications=[
        {"ResourceType": "placement-group", "Tags": [{"Key": "fmcluster:cluster", "Value": "pgtest"}]}])
    with pytest.raises(ClientError) as duplicate:
        ec2.create_placement_group(GroupName="pg-test", Strategy="cluster")
    assert duplicate.value.response["Error"]["Code"] == "InvalidPlacementGroup.Duplicate"
    found = ec2.describe_placement_groups(Filters=[{"Name": "tag:fmcluster:cluster", "Values": ["pgtest"]}])
    assert [g["GroupName"] for g in found["PlacementGroups"]] == ["pg-test"]
    assert found["PlacementGroups"][0]["Strategy"] == "cluster"
    ec2.delete_placement_group(GroupName="pg-test")
    with pytest.raises(ClientError) as gone:
        ec2.describe_placement_groups(GroupNames=["pg-test"])
    assert gone.value.response["Error"]["Code"] == "InvalidPlacementGroup.Unknown"


def test_capacity_reservation_create_describe_cancel(sandbox):
    ec2 = sandbox.client("ec2")
    made = ec2.create_capacity_reservation(InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX",
                                           AvailabilityZone="us-east-1a", InstanceCount=4)["CapacityReservation"]
    rid = made["CapacityReservationId"]
    described = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]
    assert (described["InstanceType"], described["TotalInstanceCount"], described["State"]) == \
        ("p5.48xlarge", 4, "active")
    assert described["ReservationType"] == "default"
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0][
        "State"] == "cancelled"
    with pytest.raises(ClientError) as unknown:
        ec2.describe_capacity_reservations(CapacityReservationIds=["cr-00000000000000000"])
    assert unknown.value.response["Error"]["Code"] == "InvalidCapacityReservationId.NotFound"


def test_seeded_capacity_block_reads_back_with_its_dates(sandbox):
    end = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    seeded = sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "instance_type": "p5en.48xlarge", "availability_zone": "us-east-1b", "count": 8, "type": "capacity-block",
        "state": "expired", "start": "2026-01-01T00:00:00Z", "end": end.isoformat()})
    block = sandbox.client("ec2").describe_capacity_reservations(
        CapacityReservationIds=[seeded["reservation_id"]])["CapacityReservations"][0]
    assert block["ReservationType"] == "capacity-block"
    assert block["State"] == "expired"
    assert block["EndDate"] == end
    assert block["AvailabilityZone"] == "us-east-1b"


def test_describe_launch_templates_pages_with_filters(sandbox):
    """EC2 API reference, DescribeLaunchTemplates: MaxResults "can be between 1 and 200", and "To retrieve the
    remaining results, make another call with the returned NextToken value" (moto alone answers at most 15 and no
    token). botocore's paginator walks every page, with the tag filter fmcluster's discovery uses."""
    import uuid

    ec2 = sandbox.client("ec2")
    cluster = f"lt-{uuid.uuid4().hex[:8]}"
    made = {ec2.create_launch_template(
        LaunchTemplateName=f"{cluster}-{n:02d}", LaunchTemplateData={"InstanceType": "m5.large"},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": "fmcluster:cluster",
                                                                         "Value": cluster}]}],
    )["LaunchTemplate"]["LaunchTemplateId"] for n in range(31)}  # 31 queues' templates
    ec2.create_launch_template(LaunchTemplateName=f"{cluster}-other", LaunchTemplateData={})  # untagged
    tagged = [{"Name": "tag:fmcluster:cluster", "Values": [cluster]}]
    pages = list(ec2.get_paginator("describe_launch_templates").paginate(
        Filters=tagged, PaginationConfig={"PageSize": 10}))
    assert [len(p["LaunchTemplates"]) for p in pages] == [10, 10, 10, 1]
    assert "NextToken" not in pages[-1]
    assert {t["LaunchTemplateId"] for p in pages for t in p["LaunchTemplates"]} == made
    every = list(ec2.get_paginator("describe_launch_templates").paginate(Filters=tagged))
    assert sum(len(p["LaunchTemplates"]) for p in every) == 31
    one = ec2.describe_launch_templates(Filters=tagged, MaxResults=200)
    assert len(one["LaunchTemplates"]) == 31 and "NextToken" not in one
    with pytest.raises(ClientError) as too_many:
        ec2.describe_launch_templates(MaxResults=201)  # the model's maximum is 200
    assert too_many.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(ClientError) as forged:
        ec2.describe_launch_templates(Filters=tagged, NextToken="not-a-token")
    assert forged.value.response["Error"]["Code"] == "InvalidPaginationToken"
    for template_id in made:
        ec2.delete_launch_template(LaunchTemplateId=template_id)
    ec2.delete_launch_template(LaunchTemplateName=f"{cluster}-other")
