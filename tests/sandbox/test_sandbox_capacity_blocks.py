"""The sandbox sells Capacity Blocks under AWS's rules (EC2 user guide "Capacity Blocks for ML", "Find and purchase
Capacity Blocks", "Extend Capacity Blocks"; EC2 API reference), spoken to with boto3 as any AWS client would."""

from __future__ import annotations

import datetime as dt

import pytest
from botocore.exceptions import ClientError

# aws.amazon.com/ec2/capacityblocks/pricing: p5.48xlarge $4.916 per GPU-hour; 8 GPUs, 2 instances, 24 h.
P5_DAY_FOR_TWO = "1887.74"


def _code(call) -> str:
    with pytest.raises(ClientError) as refused:
        call()
    return refused.value.response["Error"]["Code"]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _tomorrow_offering(ec2, count: int = 2) -> dict:
    offers = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=count,
                                                   CapacityDurationHours=24, StartDateRange=_now() + dt.timedelta(
                                                       days=1))["CapacityBlockOfferings"]
    return offers[0]


def _reservations(ec2) -> list[str]:
    return sorted(r["CapacityReservationId"] for r in ec2.describe_capacity_reservations()["CapacityReservations"])


def test_offerings_keep_to_the_date_range_the_eight_week_horizon_and_the_count(sandbox):
    ec2 = sandbox.client("ec2", "us-east-2", retries={"max_attempts": 1})
    latest = _now() + dt.timedelta(days=2)
    offers = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=2,
                                                   CapacityDurationHours=24, EndDateRange=latest)[
        "CapacityBlockOfferings"]
    assert offers and all(o["EndDate"] <= latest for o in offers)
    day = [o for o in offers if (o["CapacityBlockDurationHours"], o["CapacityBlockDurationMinutes"]) == (24, 0)]
    assert day and {(o["UpfrontFee"], o["CurrencyCode"]) for o in day} == {(P5_DAY_FOR_TWO, "USD")}
    # A day's block that starts after three days cannot end within three and a half.
    assert ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=24,
                                                 StartDateRange=_now() + dt.timedelta(days=3),
                                                 EndDateRange=_now() + dt.timedelta(days=3, hours=12))[
        "CapacityBlockOfferings"] == []
    # "a reservation start time up to eight weeks in the future"
    assert ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=24,
                                                 StartDateRange=_now() + dt.timedelta(weeks=9))[
        "CapacityBlockOfferings"] == []
    assert _code(lambda: ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=0,
                                                               CapacityDurationHours=24)) == "InvalidParameterValue"


def test_purchase_dry_run_buys_nothing_and_a_lapsed_or_unknown_offering_is_refused(sandbox):
    ec2 = sandbox.client("ec2", retries={"max_attempts": 1})
    offer = _tomorrow_offering(ec2)
    before = _reservations(ec2)
    assert _code(lambda: ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                                     InstancePlatform="Linux/UNIX", DryRun=True)) == "DryRunOperation"
    assert _reservations(ec2) == before
    started = _now() - dt.timedelta(hours=1)
    lapsed = sandbox.control("POST", "/_fmcluster/capacity-block-offerings", {
        "region": "us-east-1", "instance_type": "p5.48xlarge", "availability_zone": "us-east-1a", "count": 1,
        "start": started.isoformat(), "end": (started + dt.timedelta(days=1)).isoformat()})["offering_id"]
    for dry_run in (True, False):
        assert _code(lambda dry_run=dry_run: ec2.purchase_capacity_block(
            CapacityBlockOfferingId=lapsed, InstancePlatform="Linux/UNIX", DryRun=dry_run)) == "InvalidParameterValue"
        assert _code(lambda dry_run=dry_run: ec2.purchase_capacity_block(
            CapacityBlockOfferingId="cb-0123456789abcdef0", InstancePlatform="Linux/UNIX",
            DryRun=dry_run)) == "InvalidParameterValue"
    assert _reservations(ec2) == before


def test_extension_offerings_and_purchase_move_the_blocks_end(sandbox):
    ec2 = sandbox.client("ec2", retries={"max_attempts": 1})
    offer = _tomorrow_offering(ec2)
    rid = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                      InstancePlatform="Linux/UNIX")["CapacityReservation"]["CapacityReservationId"]
    end = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]["EndDate"]
    extensions = ec2.describe_capacity_block_extension_offerings(
        CapacityBlockExtensionDurationHours=24, CapacityReservationId=rid)["CapacityBlockExtensionOfferings"]
    assert len(extensions) == 1
    extension = extensions[0]
    assert extension["CapacityBlockExtensionStartDate"] == end
    assert extension["CapacityBlockExtensionEndDate"] == end + dt.timedelta(hours=24)
    assert (extension["UpfrontFee"], extension["InstanceCount"]) == (P5_DAY_FOR_TWO, 2)
    request = {"CapacityBlockExtensionOfferingId": extension["CapacityBlockExtensionOfferingId"],
               "CapacityReservationId": rid}
    assert _code(lambda: ec2.purchase_capacity_block_extension(DryRun=True, **request)) == "DryRunOperation"
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0][
        "EndDate"] == end
    bought = ec2.purchase_capacity_block_extension(**request)["CapacityBlockExtensions"][0]
    assert (bought["CapacityReservationId"], bought["CapacityBlockExtensionStatus"]) == (rid, "payment-succeeded")
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0][
        "EndDate"] == end + dt.timedelta(hours=24)
    # The offering was for the old end date: it cannot extend the block twice.
    assert _code(lambda: ec2.purchase_capacity_block_extension(**request)) == "InvalidParameterValue"
    assert _code(lambda: ec2.describe_capacity_block_extension_offerings(
        CapacityBlockExtensionDurationHours=36, CapacityReservationId=rid)) == "InvalidParameterValue"


@pytest.mark.parametrize("seed, code", [
    ({"type": "default"}, "InvalidParameterValue"),  # an On-Demand Capacity Reservation
    ({"type": "capacity-block", "state": "expired"}, "InvalidParameterValue"),
    ({"type": "capacity-block", "end_in_days": 60}, "InvalidParameterValue"),  # more than 56 days before its end
    (None, "InvalidCapacityReservationId.NotFound"),
])
def test_only_an_active_or_scheduled_block_near_its_end_is_extended(sandbox, seed, code):
    ec2 = sandbox.client("ec2", retries={"max_attempts": 1})
    rid = "cr-0123456789abcdef9"
    if seed is not None:
        start = _now() - dt.timedelta(hours=1)
        end = _now() + dt.timedelta(days=seed.get("end_in_days", 1))
        body = {"instance_type": "p5.48xlarge", "count": 1, "type": seed["type"], "start": start.isoformat(),
                "end": end.isoformat()}
        rid = sandbox.control("POST", "/_fmcluster/capacity-reservations",
                              {**body, **({"state": seed["state"]} if "state" in seed else {})})["reservation_id"]
    assert _code(lambda: ec2.describe_capacity_block_extension_offerings(
        CapacityBlockExtensionDurationHours=24, CapacityReservationId=rid)) == code
