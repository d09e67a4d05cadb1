"""Dates as a Capacity Block buyer reads them: UTC (AWS's clock: blocks end at 11:30 UTC), local time, and how
long until."""

from __future__ import annotations

import datetime as dt


def utc(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def local(moment: dt.datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M %Z")


def span(delta: dt.timedelta) -> str:
    """``3 d 4 h``, ``5 h 20 min``, ``12 min``."""
    minutes = int(abs(delta).total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min"


def starts_in(start: dt.datetime, now: dt.datetime) -> str:
    if start <= now:
        return "starts now" if now - start < dt.timedelta(minutes=5) else f"started {span(now - start)} ago"
    return f"starts in {span(start - now)}"


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
