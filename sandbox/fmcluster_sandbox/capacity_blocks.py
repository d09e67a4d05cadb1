"""EC2 DescribeCapacityBlockOfferings, which moto 5.2.5 lacks: what Capacity Blocks for ML AWS would sell.

Offerings follow the EC2 model's documentation: a Capacity Block holds up to 64 instances, lasts 1 to 14
days in 1-day steps and then up to 182 days in 7-day steps, and instance types sold only as EC2 UltraServers
are offered by ``UltraserverType``/``UltraserverCount`` (u-p6e-gb200x36 = 9 and u-p6e-gb200x72 = 18
p6e-gb200.36xlarge; u-trn2x64 = 4 trn2u.48xlarge: EKS user guide and AWS Neuron "Trn2 architecture", as
compiled in /work/shared/reference/instance-facts.yaml). An offering is made for every zone where the type
is sold (:mod:`fmcluster_sandbox.instance_catalog`) to types whose DescribeInstanceTypes usage classes
include ``capacity-block``. "All Capacity Blocks end at 11:30AM UTC" and one may start at any time (EC2 user
guide, "Find and purchase Capacity Blocks"; CapacityBlockOffering: "if a Capacity Block starts at 04:55 and ends
at 11:30, the hours field would be 6"), so each zone gets two offerings: one from the first 11:30 UTC on or after
the requested start, of exactly the requested duration, and, when the requested start range allows it, one
starting now (to the minute) and ending at the first 11:30 UTC after the requested duration (hours and minutes).
Which blocks AWS offers depends on its capacity; these are the sandbox's choice. An offering starts no later
than 8 weeks from now ("You can reserve a Capacity Block with a reservation start time up to eight weeks in the
future", EC2 user guide) and ends by ``EndDateRange`` when one is given. Upfront fees are given only where AWS's
Capacity Block price is known (:data:`USD_PER_ACCELERATOR_HOUR`, per accelerator-hour, from
aws.amazon.com/ec2/capacityblocks/pricing).

PurchaseCapacityBlock (EC2 API reference: "You must specify the ID of the Capacity Block offering you are
purchasing") buys an offering this sandbox made: a ``capacity-block`` reservation of the offering's type, zone,
count and dates, held by :mod:`fmcluster_sandbox.capacity_reservations` (``scheduled`` until its start, then
``active``). An offering id the sandbox never gave is refused with ``InvalidParameterValue``, and so is an offering
whose start has passed (more than :data:`OFFERING_GRACE` ago: one that starts "now" is good for a few minutes).
``DryRun`` checks all of that and answers ``DryRunOperation`` ("If you have the required permissions, the error
response is DryRunOperation", EC2 API reference), buying nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from fmcluster_sandbox import capacity_reservations, instance_catalog, local_zones, model_check
from fmcluster_sandbox.ec2_query import error, ok

ULTRASERVERS = {"u-p6e-gb200x36": ("p6e-gb200.36xlarge", 9), "u-p6e-gb200x72": ("p6e-gb200.36xlarge", 18),
                "u-trn2x64": ("trn2u.48xlarge", 4)}
ULTRASERVER_ONLY = {"p6e-gb200.36xlarge", "trn2u.48xlarge"}
# AWS's published Capacity Block reservation rates, USD per accelerator-hour (aws.amazon.com/ec2/capacityblocks/
# pricing, "Effective Accelerator Hourly Rate"). p6e-gb200.36xlarge 10.582 and p5e.48xlarge 5.97: as transcribed
# in /work/shared/reference/instance-facts.yaml (secondary; snapshot 2026-09-19). p5.48xlarge 4.916 (US East
# (N. Virginia) and (Ohio)), p4d.24xlarge 1.844 (US East (Ohio), US West (Oregon)) and trn1.32xlarge 0.968 (Asia
# Pacific (Melbourne)): the same page's table in a stored copy from before its 2025-01-01 update, the only
# published figures found for them. AWS updates these rates over time; the sandbox charges each type's rate in
# every Region it offers the type. Types not listed get offerings without an UpfrontFee.
USD_PER_ACCELERATOR_HOUR = {"p6e-gb200.36xlarge": 10.582, "p5e.48xlarge": 5.97, "p5.48xlarge": 4.916,
                            "p4d.24xlarge": 1.844, "trn1.32xlarge": 0.968}
MAX_INSTANCES = 64
# "You can reserve a Capacity Block with a reservation start time up to eight weeks in the future" (EC2 user guide,
# "Capacity Blocks for ML").
FURTHEST_START = dt.timedelta(weeks=8)
# How long after its start an offering can still be bought: AWS does not publish it; the sandbox's choice, so that
# an offering that starts "now" can be bought right after it is found.
OFFERING_GRACE = dt.timedelta(minutes=5)
# Zones AWS reports as ZoneType local-zone (the sandbox's Local Zones, fmcluster_sandbox.local_zones).
LOCAL_ZONES = {zone.name for zones in local_zones.LOCAL_ZONES.values() for zone in zones}
END_OF_BLOCK = dt.time(11, 30)


@dataclass(frozen=True)
class Offering:
    offering_id: str
    region: str
    ultraserver: str | None
    instance_type: str
    zone: str
    instances: int
    start: dt.datetime
    end: dt.datetime
    fee: float | None = None


#: Offerings given out, by id, so that PurchaseCapacityBlock can buy them.
_OFFERED: dict[str, Offering] = {}
_LOCK = threading.Lock()


def reset() -> None:
    with _LOCK:
        _OFFERED.clear()


def offered(offering_id: str) -> Offering | None:
    with _LOCK:
        return _OFFERED.get(offering_id)


def rate(instance_type: str) -> float | None:
    return USD_PER_ACCELERATOR_HOUR.get(instance_type)


def seed(payload: dict[str, Any]) -> dict[str, Any]:
    """An offering as AWS could have made it earlier (control route ``POST /_fmcluster/capacity-block-offerings``):
    ``{"region", "instance_type", "availability_zone", "count", "start", "end"}``, e.g. one whose start has passed.
    Returns its id. Like the offerings the sandbox makes, it must be in a zone that sells the type (AWS sells a
    Capacity Block only where EC2 offers its instance type)."""
    try:
        start, end = _parse(payload["start"]), _parse(payload["end"])
        offering = Offering("cb-" + hashlib.sha256(repr(sorted(payload.items())).encode()).hexdigest()[:17],
                            str(payload.get("region", "us-east-1")), payload.get("ultraserver"),
                            str(payload["instance_type"]), str(payload["availability_zone"]), int(payload["count"]),
                            start, end)
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"an offering needs instance_type, availability_zone, count, start and end: {exc}") from None
    sold = instance_catalog.offered_zones(offering.region, offering.instance_type)
    if offering.zone not in sold:
        raise ValueError(f"{offering.instance_type} is not sold in {offering.zone} (EC2 offers it in "
                         f"{', '.join(sorted(sold)) or 'no zone of ' + offering.region}): AWS would offer no "
                         "Capacity Block there")
    with _LOCK:
        _OFFERED[offering.offering_id] = offering
    return {"offering_id": offering.offering_id}


def valid_duration(hours: int) -> bool:
    if hours % 24:
        return False
    days = hours // 24
    return 1 <= days <= 14 or (14 < days <= 182 and days % 7 == 0)


def checked(operation: str, params: dict[str, str]) -> tuple[dict, tuple[int, dict, bytes] | None]:
    """The request as botocore's EC2 model reads it, or the error EC2 gives for the first problem in it."""
    request, unknown = model_check.from_query("ec2", operation, params)
    problems = unknown + model_check.check("ec2", operation, request)
    if not problems:
        return request, None
    name, message = problems[0]
    code = "MissingParameter" if message == "is required" else (
        "InvalidParameterValue" if name in request else "UnknownParameter")
    return request, error(code, f"{name}: {message}")


def handle(params: dict[str, str], region: str) -> tuple[int, dict, bytes]:
    request, refused = checked("DescribeCapacityBlockOfferings", params)
    if refused:
        return refused
    hours = request["CapacityDurationHours"]
    if not valid_duration(hours):
        return error("InvalidParameterValue", "CapacityDurationHours must be 1 to 14 days in 1-day increments, "
                                              "or up to 182 days in 7-day increments")
    ultraserver = request.get("UltraserverType")
    preferences = [p.get("InstanceType") for p in request.get("InstanceTypePreferences") or []]
    types = [t for t in [request.get("InstanceType"), *preferences] if t]
    if ultraserver:
        if ultraserver not in ULTRASERVERS:
            return error("InvalidParameterValue", f"UltraserverType {ultraserver} is not an EC2 UltraServer type")
        member, size = ULTRASERVERS[ultraserver]
        count = request.get("UltraserverCount") or 1
        if count < 1:
            return error("InvalidParameterValue", "UltraserverCount must be at least 1")
        if types and member not in types:
            return error("InvalidParameterCombination", f"{ultraserver} is made of {member}, not {', '.join(types)}")
        wanted = [(member, count * size, count)]
    else:
        if not types:
            return error("MissingParameter", "InstanceType or InstanceTypePreferences is required")
        instances = request.get("InstanceCount")
        if instances is None:
            return error("MissingParameter", "InstanceCount is required")
        if not 1 <= instances <= MAX_INSTANCES:
            return error("InvalidParameterValue", f"A Capacity Block holds 1 to {MAX_INSTANCES} instances")
        wanted = [(t, instances, None) for t in types if t not in ULTRASERVER_ONLY]
    latest_end = _parse(request["EndDateRange"]) if request.get("EndDateRange") else None
    starts = [(start, end) for start, end in _starts(request.get("StartDateRange"), hours)
              if latest_end is None or end <= latest_end]
    items = []
    for instance_type, instances, servers in wanted:
        facts = instance_catalog.instance_type(instance_type)
        if facts is None:
            return error("InvalidParameterValue", f"Invalid value '{instance_type}' for InstanceType.")
        if "capacity-block" not in facts.get("SupportedUsageClasses", []):
            continue
        for zone in sorted(instance_catalog.offered_zones(region, instance_type)):
            items += [_item(region, instance_type, zone, instances, servers, ultraserver, start, end, facts)
                      for start, end in starts]
    return ok("DescribeCapacityBlockOfferingsResponse",
              f"<capacityBlockOfferingSet>{''.join(items)}</capacityBlockOfferingSet>")


def _starts(requested: Any, hours: int) -> list[tuple[dt.datetime, dt.datetime]]:
    """(start, end) of the blocks offered: from the first 11:30 UTC for exactly ``hours``, and (when the
    requested range starts by now) from now until the first 11:30 UTC at least ``hours`` later."""
    now = dt.datetime.now(dt.timezone.utc).replace(second=0, microsecond=0)
    earliest = max(now, _parse(requested)) if requested else now
    first = _next_end_of_block(earliest)
    if first > now + FURTHEST_START:
        return []
    starts = [(first, first + dt.timedelta(hours=hours))]
    if earliest == now and now != first:
        starts.append((now, _next_end_of_block(now + dt.timedelta(hours=hours))))
    return starts


def _next_end_of_block(moment: dt.datetime) -> dt.datetime:
    candidate = dt.datetime.combine(moment.date(), END_OF_BLOCK, tzinfo=dt.timezone.utc)
    return candidate if candidate >= moment else candidate + dt.timedelta(days=1)


def _parse(value: Any) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def _item(region: str, instance_type: str, zone: str, instances: int, servers: int | None, ultraserver: str | None,
          start: dt.datetime, end: dt.datetime, facts: dict[str, Any]) -> str:
    minutes = int((end - start).total_seconds() // 60)
    hours = minutes // 60
    digest = hashlib.sha256(f"{region}/{instance_type}/{zone}/{instances}/{start.isoformat()}/{end.isoformat()}"
                            .encode()).hexdigest()
    usd = rate(instance_type)
    accelerators = _accelerators(facts)
    total = round(usd * accelerators * instances * minutes / 60, 2) if usd is not None and accelerators else None
    offering = Offering(f"cb-{digest[:17]}", region, ultraserver, instance_type, zone, instances, start, end, total)
    with _LOCK:
        _OFFERED[offering.offering_id] = offering
    fee = f"<upfrontFee>{total:.2f}</upfrontFee><currencyCode>USD</currencyCode>" if total is not None else ""
    server = (f"<ultraserverType>{ultraserver}</ultraserverType><ultraserverCount>{servers}</ultraserverCount>"
              if ultraserver else "")
    return (f"<item><capacityBlockOfferingId>{offering.offering_id}</capacityBlockOfferingId>"
            f"<instanceType>{instance_type}</instanceType><availabilityZone>{zone}</availabilityZone>"
            f"<instanceCount>{instances}</instanceCount><startDate>{_iso(start)}</startDate>"
            f"<endDate>{_iso(end)}</endDate><capacityBlockDurationHours>{hours}</capacityBlockDurationHours>"
            f"<capacityBlockDurationMinutes>{minutes % 60}</capacityBlockDurationMinutes>{fee}"
            f"<tenancy>default</tenancy>{server}"
            f"<zoneType>{'local-zone' if zone in LOCAL_ZONES else 'availability-zone'}</zoneType></item>")


def _accelerators(facts: dict[str, Any]) -> int:
    """GPUs or Neuron devices (Trainium chips) per instance, as DescribeInstanceTypes lists them."""
    gpus = sum(g.get("Count", 0) for g in facts.get("GpuInfo", {}).get("Gpus", []))
    return gpus or sum(d.get("Count", 0) for d in facts.get("NeuronInfo", {}).get("NeuronDevices", []))


def purchase(params: dict[str, str], region: str, account: str) -> tuple[int, dict, bytes]:
    request, refused = checked("PurchaseCapacityBlock", params)
    if refused:
        return refused
    with _LOCK:
        offering = _OFFERED.get(request["CapacityBlockOfferingId"])
    if offering is None or offering.region != region:
        return error("InvalidParameterValue", f"The Capacity Block offering ID "
                                              f"'{escape(request['CapacityBlockOfferingId'])}' is not valid.")
    if dt.datetime.now(dt.timezone.utc) > offering.start + OFFERING_GRACE:
        return error("InvalidParameterValue", f"The Capacity Block offering '{offering.offering_id}' has expired: "
                                              f"its start date {_iso(offering.start)} has passed.")
    if request.get("DryRun"):
        return error("DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
    tags = {t["Key"]: t.get("Value", "") for spec in request.get("TagSpecifications") or []
            if spec.get("ResourceType") in (None, "capacity-reservation") for t in spec.get("Tags") or []}
    reservation = capacity_reservations.REGISTRY.add(capacity_reservations.Reservation(
        capacity_reservations.new_id(), account, region, offering.instance_type, offering.zone,
        offering.instances, reservation_type="capacity-block", start=offering.start, end=offering.end,
        platform=request["InstancePlatform"], match_criteria="targeted", tags=tags,
        capacity_block_id=capacity_reservations.new_id("cb-") if offering.ultraserver else None,
        ultraserver=offering.ultraserver))
    return ok("PurchaseCapacityBlockResponse", f"<capacityReservation>{reservation.to_xml()}</capacityReservation>")


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")
