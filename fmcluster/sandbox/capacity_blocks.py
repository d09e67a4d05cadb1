"""EC2 DescribeCapacityBlockOfferings, which moto 5.2.5 lacks: what Capacity Blocks for ML AWS would sell.

Offerings follow the EC2 model's documentation: a Capacity Block holds up to 64 instances, lasts 1 to 14
days in 1-day steps and then up to 182 days in 7-day steps, and instance types sold only as EC2 UltraServers
are offered by ``UltraserverType``/``UltraserverCount`` (u-p6e-gb200x36 = 9 and u-p6e-gb200x72 = 18
p6e-gb200.36xlarge; u-trn2x64 = 4 trn2u.48xlarge: EKS user guide and AWS Neuron "Trn2 architecture", as
compiled in /work/shared/reference/instance-facts.yaml). An offering is made for every zone where the type
is sold (:mod:`fmcluster.sandbox.instance_catalog`) to types whose DescribeInstanceTypes usage classes
include ``capacity-block``; the sandbox starts each offered block at the first 11:30 UTC on or after the
requested start (its own choice: AWS's offering times depend on its capacity). Upfront
fees are given only where AWS's Capacity Block price is known (per accelerator-hour, from
aws.amazon.com/ec2/capacityblocks/pricing as transcribed in instance-facts.yaml, marked secondary there).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from fmcluster.sandbox import instance_catalog, model_check
from fmcluster.sandbox.ec2_query import error, ok

ULTRASERVERS = {"u-p6e-gb200x36": ("p6e-gb200.36xlarge", 9), "u-p6e-gb200x72": ("p6e-gb200.36xlarge", 18),
                "u-trn2x64": ("trn2u.48xlarge", 4)}
ULTRASERVER_ONLY = {"p6e-gb200.36xlarge", "trn2u.48xlarge"}
USD_PER_ACCELERATOR_HOUR = {"p6e-gb200.36xlarge": 10.582}
MAX_INSTANCES = 64
LOCAL_ZONES = {"us-east-1-dfw-2a"}


def valid_duration(hours: int) -> bool:
    if hours % 24:
        return False
    days = hours // 24
    return 1 <= days <= 14 or (14 < days <= 182 and days % 7 == 0)


def handle(params: dict[str, str], region: str) -> tuple[int, dict, bytes]:
    request, unknown = model_check.from_query("ec2", "DescribeCapacityBlockOfferings", params)
    problems = unknown + model_check.check("ec2", "DescribeCapacityBlockOfferings", request)
    if problems:
        name, message = problems[0]
        code = "MissingParameter" if message == "is required" else (
            "InvalidParameterValue" if name in request else "UnknownParameter")
        return error(code, f"{name}: {message}")
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
        if types and member not in types:
            return error("InvalidParameterCombination", f"{ultraserver} is made of {member}, not {', '.join(types)}")
        wanted = [(member, count * size, count)]
    else:
        if not types:
            return error("MissingParameter", "InstanceType or InstanceTypePreferences is required")
        instances = request.get("InstanceCount")
        if instances is None:
            return error("MissingParameter", "InstanceCount is required")
        if instances > MAX_INSTANCES:
            return error("InvalidParameterValue", f"A Capacity Block holds at most {MAX_INSTANCES} instances")
        wanted = [(t, instances, None) for t in types if t not in ULTRASERVER_ONLY]
    start = _first_start(request.get("StartDateRange"))
    items = []
    for instance_type, instances, servers in wanted:
        facts = instance_catalog.instance_type(instance_type)
        if facts is None:
            return error("InvalidParameterValue", f"Invalid value '{instance_type}' for InstanceType.")
        if "capacity-block" not in facts.get("SupportedUsageClasses", []):
            continue
        for zone in sorted(instance_catalog.offered_zones(region, instance_type)):
            items.append(_item(instance_type, zone, instances, servers, ultraserver, start, hours, facts))
    return ok("DescribeCapacityBlockOfferingsResponse",
              f"<capacityBlockOfferingSet>{''.join(items)}</capacityBlockOfferingSet>")


def _first_start(requested: Any) -> dt.datetime:
    now = dt.datetime.now(dt.timezone.utc)
    earliest = max(now, _parse(requested)) if requested else now
    start = earliest.replace(hour=11, minute=30, second=0, microsecond=0)
    return start if start >= earliest else start + dt.timedelta(days=1)


def _parse(value: Any) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def _item(instance_type: str, zone: str, instances: int, servers: int | None, ultraserver: str | None,
          start: dt.datetime, hours: int, facts: dict[str, Any]) -> str:
    end = start + dt.timedelta(hours=hours)
    digest = hashlib.sha256(f"{instance_type}/{zone}/{instances}/{start.isoformat()}/{hours}".encode()).hexdigest()
    fee = ""
    rate = USD_PER_ACCELERATOR_HOUR.get(instance_type)
    gpus = sum(g.get("Count", 0) for g in facts.get("GpuInfo", {}).get("Gpus", []))
    if rate is not None and gpus:
        fee = f"<upfrontFee>{rate * gpus * instances * hours:.2f}</upfrontFee><currencyCode>USD</currencyCode>"
    server = (f"<ultraserverType>{ultraserver}</ultraserverType><ultraserverCount>{servers}</ultraserverCount>"
              if ultraserver else "")
    return (f"<item><capacityBlockOfferingId>cb-{digest[:17]}</capacityBlockOfferingId>"
            f"<instanceType>{instance_type}</instanceType><availabilityZone>{zone}</availabilityZone>"
            f"<instanceCount>{instances}</instanceCount><startDate>{_iso(start)}</startDate>"
            f"<endDate>{_iso(end)}</endDate><capacityBlockDurationHours>{hours}</capacityBlockDurationHours>"
            f"<capacityBlockDurationMinutes>0</capacityBlockDurationMinutes>{fee}<tenancy>default</tenancy>{server}"
            f"<zoneType>{'local-zone' if zone in LOCAL_ZONES else 'availability-zone'}</zoneType></item>")


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")
