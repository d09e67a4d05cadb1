"""`capacity find`: EC2 DescribeCapacityBlockOfferings in every named Region at once, as comparable rows.

Each search asks one Region for one shape (an instance type and count, or an UltraServer type and count) over all
its Availability Zones and the Local Zones (``AllAvailabilityZones``), for one duration and date range. A row is
an offering with its price per instance-hour and per accelerator-hour (GPU, or Trainium chip: the catalog's
accelerator count) and its ratio to the On-Demand rate for the same hours (fmcluster's bundled prices,
:mod:`fmcluster.pricing`). The offerings found are remembered (``<state dir>/cache/capacity-offerings.json``) so
that ``capacity buy`` can show exactly what an offering id costs: EC2 has no call that describes one by id.
"""

from __future__ import annotations

import datetime as dt
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fmcluster.catalog import hardware
from fmcluster.connection import aws
from fmcluster.pricing.rates import PriceBook
from fmcluster.verbs.capacity import when

CACHE_FILE = "capacity-offerings.json"
# Offerings are kept this long after they were found: enough to decide and buy, not so long that a stale price
# is shown (AWS updates Capacity Block prices over time; a lapsed offering is refused by EC2 anyway).
CACHE_HOURS = 24


@dataclass(frozen=True)
class Search:
    """One shape to look for: ``instance_type`` × ``count``, or ``ultraserver_type`` × ``ultraservers``."""

    hours: int
    instance_type: str | None = None
    count: int | None = None
    ultraserver_type: str | None = None
    ultraservers: int | None = None
    start_after: dt.datetime | None = None
    end_before: dt.datetime | None = None
    queue: str | None = None

    def request(self) -> dict[str, Any]:
        request: dict[str, Any] = {"CapacityDurationHours": self.hours, "AllAvailabilityZones": True}
        if self.ultraserver_type:
            request.update(UltraserverType=self.ultraserver_type, UltraserverCount=self.ultraservers)
        else:
            request.update(InstanceType=self.instance_type, InstanceCount=self.count)
        if self.start_after:
            request["StartDateRange"] = self.start_after
        if self.end_before:
            request["EndDateRange"] = self.end_before
        return request

    def label(self) -> str:
        shape = (f"{self.ultraservers} × {self.ultraserver_type}" if self.ultraserver_type
                 else f"{self.count} × {self.instance_type}")
        return (f"queue {self.queue}: " if self.queue else "") + f"{shape} for {self.hours} h"


@dataclass
class Found:
    rows: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)


def find(searches: list[Search], regions: list[str], now: dt.datetime | None = None) -> Found:
    """Every offering for every search in every Region (concurrently), sorted by start then price per
    accelerator-hour. A Region that fails is an entry of ``errors``; the others still answer."""
    now = now or dt.datetime.now(dt.timezone.utc)
    jobs = [(search, region) for search in searches for region in regions]
    # Clients are made here, one per Region, and only used in the threads: a boto3 client is safe to share
    # between threads, making one from a shared session is not.
    clients: dict[str, Any] = {}
    for region in regions:
        try:
            clients[region] = aws.client("ec2", region, aws.READING)
        except Exception as exc:  # a bad profile or CA bundle: every search in that Region reports it
            clients[region] = exc
    found = Found()
    with ThreadPoolExecutor(max_workers=min(8, len(jobs)) or 1) as pool:
        answers = pool.map(lambda job: _ask(job[0], clients[job[1]]), jobs)
        for (search, region), answer in zip(jobs, answers, strict=True):
            if isinstance(answer, Exception):
                found.errors.append({"region": region, "search": search.label(),
                                     "error": str(aws.describe_error(f"EC2 DescribeCapacityBlockOfferings in {region}",
                                                                     answer))})
                continue
            found.rows += [row(offering, region, search.queue, now) for offering in answer]
    found.rows.sort(key=lambda r: (r["start"], r["usd_per_accelerator_hour"] is None,
                                   r["usd_per_accelerator_hour"] or 0, r["offering_id"]))
    remember(found.rows, now)
    return found


def _ask(search: Search, client: Any) -> list[dict[str, Any]] | Exception:
    if isinstance(client, Exception):
        return client
    try:
        offerings: list[dict[str, Any]] = []
        request = search.request()
        while True:
            answer = client.describe_capacity_block_offerings(**request)
            offerings += answer.get("CapacityBlockOfferings", [])
            token = answer.get("NextToken")
            if not token:
                return offerings
            request["NextToken"] = token
    except Exception as exc:  # reported per Region: one Region's refusal must not hide another's offerings
        return exc


def row(offering: dict[str, Any], region: str, queue: str | None, now: dt.datetime) -> dict[str, Any]:
    """One offering with its prices: the stable JSON object of ``capacity find --json``."""
    start, end = offering["StartDate"], offering["EndDate"]
    minutes = int(offering.get("CapacityBlockDurationHours", 0)) * 60 + int(
        offering.get("CapacityBlockDurationMinutes", 0) or 0)
    hours = minutes / 60 if minutes else (end - start).total_seconds() / 3600
    count = int(offering.get("InstanceCount") or 0)
    instance_type = offering.get("InstanceType", "")
    facts = hardware.hardware(instance_type)
    accelerators = facts.accelerators or 0
    fee = float(offering["UpfrontFee"]) if offering.get("UpfrontFee") not in (None, "") else None
    usd = fee if fee is not None and offering.get("CurrencyCode", "USD") == "USD" else None
    per_instance = round(usd / count / hours, 4) if usd is not None and count and hours else None
    per_accelerator = round(per_instance / accelerators, 4) if per_instance is not None and accelerators else None
    on_demand = PriceBook(region).instance_price(instance_type, "on-demand")
    od_rate = on_demand.usd_per_hour if on_demand.basis == "on-demand" else None
    return {
        "offering_id": offering.get("CapacityBlockOfferingId"),
        "region": region,
        "availability_zone": offering.get("AvailabilityZone"),
        "zone_type": offering.get("ZoneType"),
        "queue": queue,
        "instance_type": instance_type,
        "instance_count": count,
        "ultraserver_type": offering.get("UltraserverType"),
        "ultraserver_count": offering.get("UltraserverCount"),
        "start": when.iso(start),
        "end": when.iso(end),
        "starts_in": when.starts_in(start, now),
        "duration_hours": int(offering.get("CapacityBlockDurationHours", 0)),
        "duration_minutes": int(offering.get("CapacityBlockDurationMinutes", 0) or 0),
        "upfront_fee": fee,
        "currency": offering.get("CurrencyCode"),
        "usd_per_instance_hour": per_instance,
        "accelerators_per_instance": accelerators or None,
        "accelerator_kind": facts.accelerator_kind,
        "usd_per_accelerator_hour": per_accelerator,
        "on_demand_usd_per_instance_hour": od_rate,
        "on_demand_note": on_demand.note,
        "ratio_to_on_demand": round(per_instance / od_rate, 3) if per_instance is not None and od_rate else None,
        "tenancy": offering.get("Tenancy"),
        # An offering EC2 composes of several blocks (each with its own zone, type, dates and fee).
        "segments": [{"instance_type": seg.get("InstanceType"), "availability_zone": seg.get("AvailabilityZone"),
                      "instance_count": seg.get("InstanceCount"), "start": _iso(seg.get("StartDate")),
                      "end": _iso(seg.get("EndDate")), "upfront_fee": seg.get("UpfrontFee"),
                      "currency": seg.get("CurrencyCode")}
                     for seg in offering.get("CapacityBlockOfferingSegments") or []],
    }


def _iso(value: Any) -> str | None:
    return when.iso(value) if isinstance(value, dt.datetime) else None


# --- the offerings found, for `capacity buy` -------------------------------------------------------------------


def cache_path() -> Path:
    from fmcluster.state.store import home

    return home() / "cache" / CACHE_FILE


def remember(rows: list[dict[str, Any]], now: dt.datetime) -> None:
    path = cache_path()
    kept = {k: v for k, v in _read().items()
            if now - when.parse_iso(v.get("found_at", "1970-01-01T00:00:00Z")) < dt.timedelta(hours=CACHE_HOURS)}
    kept.update({r["offering_id"]: {**r, "found_at": when.iso(now)} for r in rows if r.get("offering_id")})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(kept, indent=1))
        temporary.replace(path)
    except OSError:  # a read-only state dir costs `buy` its price display, not `find` its answer
        pass


def recall(offering_id: str) -> dict[str, Any] | None:
    return _read().get(offering_id)


def _read() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
