"""What a user may ask of Capacity Blocks, checked before any AWS call: each refusal is one line, exit 2.

The limits are AWS's (EC2 user guide, "Capacity Blocks for ML" and "Extend Capacity Blocks"; EC2 API reference,
DescribeCapacityBlockOfferings): a block lasts 1 to 14 days in 1-day steps, then up to 182 days in 7-day steps
(an extension too); it holds 1 to 64 instances; it starts at most eight weeks ahead. Whether EC2 sells a type as
Capacity Blocks at all is its DescribeInstanceTypes ``SupportedUsageClasses`` (``capacity-block``), as shipped
with fmcluster (:mod:`fmcluster.catalog.hardware`).
"""

from __future__ import annotations

import datetime as dt
import difflib
import re

from fmcluster.catalog import hardware
from fmcluster.errors import UsageError
from fmcluster.spec.decisions import UltraServerShape, ultraserver_shape

HOURS_PER_DAY = 24
LONGEST_DAYS = 182
DAILY_UP_TO_DAYS = 14
MAX_INSTANCES = 64
FURTHEST_START = dt.timedelta(weeks=8)
OFFERING_ID = re.compile(r"cb-[0-9a-f]{17}")
RESERVATION_ID = re.compile(r"cr-[0-9a-f]{17}")
DURATION_RULE = "Capacity Blocks last 1 to 14 days in 1-day steps, then 21, 28, … up to 182 days in 7-day steps"


def duration_hours(hours: int | None, days: int | None, option: str = "--hours") -> int:
    """The block length in hours from --hours or --days (default one day), or a usage error naming the rule."""
    if hours is not None and days is not None:
        raise UsageError("give --hours or --days, not both")
    total = days * HOURS_PER_DAY if days is not None else (hours if hours is not None else HOURS_PER_DAY)
    shown = f"--days {days}" if days is not None else f"{option} {total}"
    if total <= 0 or total % HOURS_PER_DAY:
        raise UsageError(f"{shown}: AWS sells whole days only. {DURATION_RULE} (--hours 24, 48, … or --days N)")
    whole_days = total // HOURS_PER_DAY
    if whole_days > LONGEST_DAYS or (whole_days > DAILY_UP_TO_DAYS and whole_days % 7):
        nearest = sorted({min(whole_days // 7 * 7, LONGEST_DAYS), min(-(-whole_days // 7) * 7, LONGEST_DAYS)})
        raise UsageError(f"{shown} ({whole_days} days): AWS does not sell it. {DURATION_RULE}; nearest: "
                         + " or ".join(f"--days {d}" for d in nearest))
    return total


def instance_count(count: int) -> int:
    if not 1 <= count <= MAX_INSTANCES:
        raise UsageError(f"--count {count}: a Capacity Block holds 1 to {MAX_INSTANCES} instances (256 across all "
                         "of an account's blocks); for more, buy several blocks")
    return count


def ultraserver(name: str, count: int) -> UltraServerShape:
    shape = ultraserver_shape(name)
    if shape is None:
        known = ", ".join(_ultraserver_names())
        raise UsageError(f"--ultraserver-type {name}: not an EC2 UltraServer type fmcluster knows ({known})")
    if count < 1:
        raise UsageError(f"--ultraservers {count}: buy at least one UltraServer")
    return shape


def _ultraserver_names() -> list[str]:
    from fmcluster import catalog

    names: list[str] = []
    for instance_type in catalog.instance_names():
        facts = catalog.instance(instance_type)
        if facts is not None and facts.ultraserver is not None:
            names += list(facts.ultraserver.types)
    return names


def instance_type(name: str) -> hardware.Hardware:
    """A type EC2 sells as Capacity Blocks by itself (not only as UltraServers), or a usage error saying why not."""
    if not hardware.known_instance_type(name):
        close = difflib.get_close_matches(name, hardware.known_instance_types(), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise UsageError(f"--instance-type {name}: unknown instance type{hint}")
    facts = hardware.hardware(name)
    classes = facts.usage_classes or tuple((hardware.described_type(name) or {}).get("SupportedUsageClasses") or ())
    if "capacity-block" not in classes:
        sold = ", ".join(capacity_block_types())
        raise UsageError(f"--instance-type {name}: EC2 does not sell it as Capacity Blocks (its usage classes: "
                         f"{', '.join(classes) or 'unknown'}); Capacity Blocks are sold for {sold}")
    from fmcluster import catalog

    facts_in_catalog = catalog.instance(name)
    if facts_in_catalog is not None and facts_in_catalog.is_ultraserver_only:
        shapes = ", ".join(facts_in_catalog.ultraserver.types) if facts_in_catalog.ultraserver else ""
        raise UsageError(f"--instance-type {name}: sold only as EC2 UltraServers; use --ultraserver-type ({shapes}) "
                         "and --ultraservers K")
    return facts


def capacity_block_types() -> list[str]:
    """Every type EC2's DescribeInstanceTypes (shipped with fmcluster) lists with the capacity-block usage class."""
    return sorted(name for name, described in hardware.shipped_types().items()
                  if "capacity-block" in (described.get("SupportedUsageClasses") or ()))


def parse_when(text: str, option: str, now: dt.datetime) -> dt.datetime:
    """A moment: ISO 8601 (``2026-12-24``, ``2026-12-24T11:30``, with an offset or else UTC), or from now
    (``+3d``, ``+12h``)."""
    relative = re.fullmatch(r"\+(\d+)([dh])", text.strip())
    if relative:
        amount = int(relative.group(1))
        return now + (dt.timedelta(days=amount) if relative.group(2) == "d" else dt.timedelta(hours=amount))
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option} {text!r}: not a date; write 2026-12-24, 2026-12-24T11:30 (UTC unless an offset "
                         "is given, e.g. +02:00) or +3d / +12h from now") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def window(start_after: str | None, end_before: str | None, hours: int,
           now: dt.datetime) -> tuple[dt.datetime | None, dt.datetime | None]:
    """The requested date range, checked: not in the past, start before end with room for the block, and a start
    no more than eight weeks ahead."""
    start = parse_when(start_after, "--start-after", now) if start_after else None
    end = parse_when(end_before, "--end-before", now) if end_before else None
    if start is not None and start < now - dt.timedelta(minutes=1):
        raise UsageError(f"--start-after {start_after}: that is in the past (now is {now:%Y-%m-%d %H:%M} UTC)")
    if start is not None and start > now + FURTHEST_START:
        raise UsageError(f"--start-after {start_after}: Capacity Blocks start at most eight weeks ahead (by "
                         f"{now + FURTHEST_START:%Y-%m-%d} UTC)")
    if end is not None and end <= now:
        raise UsageError(f"--end-before {end_before}: that is in the past (now is {now:%Y-%m-%d %H:%M} UTC)")
    if start is not None and end is not None and start >= end:
        raise UsageError(f"--start-after {start_after} is not before --end-before {end_before}")
    earliest = start or now
    if end is not None and end - earliest < dt.timedelta(hours=hours):
        raise UsageError(f"--end-before {end_before}: a {hours} h block cannot fit between "
                         f"{earliest:%Y-%m-%d %H:%M} UTC and then; move --end-before later or ask for fewer hours")
    return start, end


def offering_id(text: str) -> str:
    if not OFFERING_ID.fullmatch(text):
        raise UsageError(f"{text!r} is not a Capacity Block offering id (cb- and 17 hex digits, as "
                         "`fmcluster capacity find` lists them)")
    return text


def reservation_id(text: str) -> str:
    if not RESERVATION_ID.fullmatch(text):
        raise UsageError(f"{text!r} is not a Capacity Block reservation id (cr- and 17 hex digits, as "
                         "`fmcluster capacity buy` printed it)")
    return text
