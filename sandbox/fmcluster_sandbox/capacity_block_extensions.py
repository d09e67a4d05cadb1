"""EC2 DescribeCapacityBlockExtensionOfferings and PurchaseCapacityBlockExtension, which moto 5.2.5 lacks.

The rules are the EC2 user guide's ("Extend Capacity Blocks"): a Capacity Block can be extended while it is
``active`` or ``scheduled``; by 1-day increments up to 14 days and 7-day increments up to 182 days; the request
must come at least 1 hour and at most 56 days before the block ends; "When you extend your Capacity Block, its end
date will be updated" and "Your Capacity Reservation ID will remain the same after extending the block". The
extension starts at the block's end (EC2 API reference, CapacityBlockExtensionOffering:
"CapacityBlockExtensionStartDate ... is also the same as the end date of the Capacity Block that will be
extended"). It is priced at the type's Capacity Block rate (:data:`capacity_blocks.USD_PER_ACCELERATOR_HOUR`).

The sandbox makes one extension offering per request, in the block's zone, and the purchase succeeds at once
(status ``payment-succeeded``; AWS holds it ``payment-pending`` until the bill is paid). Both operations take
``DryRun`` (``DryRunOperation`` when the request would succeed).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from dataclasses import dataclass
from xml.sax.saxutils import escape

from fmcluster_sandbox import capacity_blocks, capacity_reservations, instance_catalog
from fmcluster_sandbox.ec2_query import error, ok

EXTENDABLE_STATES = ("active", "scheduled")
EARLIEST_BEFORE_END = dt.timedelta(days=56)
LATEST_BEFORE_END = dt.timedelta(hours=1)


@dataclass(frozen=True)
class ExtensionOffering:
    offering_id: str
    reservation_id: str
    hours: int
    start: dt.datetime
    end: dt.datetime
    fee: float | None


_OFFERED: dict[str, ExtensionOffering] = {}
_LOCK = threading.Lock()


def reset() -> None:
    with _LOCK:
        _OFFERED.clear()


def _extendable(reservation_id: str, region: str, account: str
                ) -> tuple[capacity_reservations.Reservation | None, tuple[int, dict, bytes] | None]:
    block = capacity_reservations.REGISTRY.get(reservation_id, account, region)
    if block is None:
        return None, error("InvalidCapacityReservationId.NotFound",
                           f"The capacity reservation ID '{escape(reservation_id)}' does not exist")
    if not block.is_capacity_block:
        return None, error("InvalidParameterValue", f"{reservation_id} is not a Capacity Block; only Capacity Blocks "
                                                    "can be extended")
    if block.state not in EXTENDABLE_STATES:
        return None, error("InvalidParameterValue", f"Capacity Block {reservation_id} is {block.state}; only an "
                                                    "active or scheduled Capacity Block can be extended")
    left = (block.end or block.start) - dt.datetime.now(dt.timezone.utc)
    if not LATEST_BEFORE_END <= left <= EARLIEST_BEFORE_END:
        return None, error("InvalidParameterValue", f"Capacity Block {reservation_id} ends in {left}; it can be "
                                                    "extended from 56 days to 1 hour before its end")
    return block, None


def describe(params: dict[str, str], region: str, account: str) -> tuple[int, dict, bytes]:
    request, refused = capacity_blocks.checked("DescribeCapacityBlockExtensionOfferings", params)
    if refused:
        return refused
    hours = request["CapacityBlockExtensionDurationHours"]
    if not capacity_blocks.valid_duration(hours):
        return error("InvalidParameterValue", "CapacityBlockExtensionDurationHours must be 1 to 14 days in 1-day "
                                              "increments, or up to 182 days in 7-day increments")
    block, refused = _extendable(request["CapacityReservationId"], region, account)
    if refused:
        return refused
    assert block is not None and block.end is not None
    if request.get("DryRun"):
        return error("DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
    start, end = block.end, block.end + dt.timedelta(hours=hours)
    usd = capacity_blocks.rate(block.instance_type)
    facts = instance_catalog.instance_type(block.instance_type) or {}
    accelerators = capacity_blocks._accelerators(facts)
    fee = round(usd * accelerators * block.total * hours, 2) if usd is not None and accelerators else None
    digest = hashlib.sha256(f"{block.reservation_id}/{start.isoformat()}/{hours}".encode()).hexdigest()
    offering = ExtensionOffering(f"cbe-{digest[:17]}", block.reservation_id, hours, start, end, fee)
    with _LOCK:
        _OFFERED[offering.offering_id] = offering
    price = f"<upfrontFee>{fee:.2f}</upfrontFee><currencyCode>USD</currencyCode>" if fee is not None else ""
    item = (f"<item><capacityBlockExtensionOfferingId>{offering.offering_id}</capacityBlockExtensionOfferingId>"
            f"<instanceType>{escape(block.instance_type)}</instanceType><instanceCount>{block.total}</instanceCount>"
            f"<availabilityZone>{escape(block.availability_zone)}</availabilityZone>"
            f"<startDate>{_iso(block.start)}</startDate>"
            f"<capacityBlockExtensionStartDate>{_iso(start)}</capacityBlockExtensionStartDate>"
            f"<capacityBlockExtensionEndDate>{_iso(end)}</capacityBlockExtensionEndDate>"
            f"<capacityBlockExtensionDurationHours>{hours}</capacityBlockExtensionDurationHours>{price}"
            f"<tenancy>{block.tenancy}</tenancy>"
            f"<zoneType>{_zone_type(block.availability_zone)}</zoneType></item>")
    return ok("DescribeCapacityBlockExtensionOfferingsResponse",
              f"<capacityBlockExtensionOfferingSet>{item}</capacityBlockExtensionOfferingSet>")


def purchase(params: dict[str, str], region: str, account: str) -> tuple[int, dict, bytes]:
    request, refused = capacity_blocks.checked("PurchaseCapacityBlockExtension", params)
    if refused:
        return refused
    offering_id = request["CapacityBlockExtensionOfferingId"]
    with _LOCK:
        offering = _OFFERED.get(offering_id)
    if offering is None or offering.reservation_id != request["CapacityReservationId"]:
        return error("InvalidParameterValue", f"The Capacity Block extension offering ID '{escape(offering_id)}' is "
                                              f"not valid for {escape(request['CapacityReservationId'])}.")
    block, refused = _extendable(offering.reservation_id, region, account)
    if refused:
        return refused
    assert block is not None
    if block.end != offering.start:  # the block was extended since this offering was made
        return error("InvalidParameterValue", f"The Capacity Block extension offering ID '{offering_id}' has "
                                              "expired: the block's end date changed; ask for a new offering.")
    if request.get("DryRun"):
        return error("DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
    block.end = offering.end
    with _LOCK:
        _OFFERED.pop(offering_id, None)
    price = (f"<upfrontFee>{offering.fee:.2f}</upfrontFee><currencyCode>USD</currencyCode>"
             if offering.fee is not None else "")
    item = (f"<item><capacityReservationId>{block.reservation_id}</capacityReservationId>"
            f"<instanceType>{escape(block.instance_type)}</instanceType><instanceCount>{block.total}</instanceCount>"
            f"<availabilityZone>{escape(block.availability_zone)}</availabilityZone>"
            f"<capacityBlockExtensionOfferingId>{offering_id}</capacityBlockExtensionOfferingId>"
            f"<capacityBlockExtensionDurationHours>{offering.hours}</capacityBlockExtensionDurationHours>"
            "<capacityBlockExtensionStatus>payment-succeeded</capacityBlockExtensionStatus>"
            f"<capacityBlockExtensionPurchaseDate>{_iso(dt.datetime.now(dt.timezone.utc))}"
            "</capacityBlockExtensionPurchaseDate>"
            f"<capacityBlockExtensionStartDate>{_iso(offering.start)}</capacityBlockExtensionStartDate>"
            f"<capacityBlockExtensionEndDate>{_iso(offering.end)}</capacityBlockExtensionEndDate>{price}"
            f"<zoneType>{_zone_type(block.availability_zone)}</zoneType></item>")
    return ok("PurchaseCapacityBlockExtensionResponse",
              f"<capacityBlockExtensionSet>{item}</capacityBlockExtensionSet>")


def _zone_type(zone: str) -> str:
    return "local-zone" if zone in capacity_blocks.LOCAL_ZONES else "availability-zone"


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")

