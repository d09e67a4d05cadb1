"""The account's Capacity Blocks for ML as EC2 reports them, for ``fmcluster capacity list`` and each block's facts
for ``status``: their dates, what is in use, the interconnect, and which cluster uses each.

EC2 answers in three parts (botocore's EC2 model):

* DescribeCapacityBlocks: each block's id, state, AZ, dates, UltraServer type, tags and its reservations' ids;
* DescribeCapacityReservations: each reservation's instance type, ``TotalInstanceCount`` and
  ``AvailableInstanceCount`` (launching "reduces the available capacity by the number of instances launched", EC2
  user guide, "Launch instances using Capacity Blocks");
* DescribeCapacityBlockStatus: ``InterconnectStatus`` (ok | impaired | insufficient-data) and
  ``TotalUnavailableCapacity`` ("unavailable for use due to a system status check failure").

A block's cluster is read from the block's own ``fmcluster:cluster`` tag and from the launch templates that name
its reservation: fmcluster's (tagged ``fmcluster:cluster``) and those a backend's own stack makes, tagged with the
cluster's name by that backend's tag (``BackendProfile.cluster_name_tag``, handed in by the caller).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from fmcluster.render.common import CLUSTER_TAG

#: EC2 stops a Capacity Block's instances before its end: "30 minutes before the end time of the Capacity Block"
#: for instance Capacity Blocks (EC2 user guide, "Capacity Blocks for ML", "How Capacity Blocks work").
STOPS_BEFORE_END = dt.timedelta(minutes=30)
#: Interconnect statuses that are a problem (CapacityBlockInterconnectStatus; ``ok`` is healthy).
BAD_INTERCONNECT = {"impaired": "the accelerator interconnect is impaired",
                    "insufficient-data": "EC2 has too little data to judge the accelerator interconnect"}


def _pages(ec2: Any, operation: str, key: str, **request: Any) -> list[dict[str, Any]]:
    return [item for page in ec2.get_paginator(operation).paginate(**request) for item in page.get(key, [])]


def list_blocks(ec2: Any, now: dt.datetime | None = None, *, backend_tags: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Every Capacity Block of the account in ``ec2``'s Region, latest end last, each as :func:`block_facts`
    describes, with ``clusters``: the clusters whose tags or launch templates use it (tagged ``fmcluster:cluster``,
    else by one of ``backend_tags``: the backends' own tags for a cluster's name)."""
    cluster_tags = (CLUSTER_TAG, *backend_tags)
    blocks = _pages(ec2, "describe_capacity_blocks", "CapacityBlocks")
    reservation_ids = sorted({rid for block in blocks for rid in block.get("CapacityReservationIds") or []})
    reservations = {r["CapacityReservationId"]: r for r in _pages(
        ec2, "describe_capacity_reservations", "CapacityReservations",
        CapacityReservationIds=reservation_ids)} if reservation_ids else {}
    statuses = {s["CapacityBlockId"]: s for s in _pages(
        ec2, "describe_capacity_block_status", "CapacityBlockStatuses",
        CapacityBlockIds=[b["CapacityBlockId"] for b in blocks])} if blocks else {}
    users = clusters_by_reservation(ec2, cluster_tags)
    rows = []
    for block in blocks:
        ids = block.get("CapacityReservationIds") or []
        row = block_facts([reservations[rid] for rid in ids if rid in reservations], block,
                          statuses.get(block["CapacityBlockId"]), now)
        tagged = {t["Key"]: t.get("Value", "") for t in block.get("Tags") or []}
        named = {tagged[key] for key in cluster_tags if tagged.get(key)}
        row["clusters"] = sorted(named | {c for rid in ids for c in users.get(rid, ())})
        rows.append(row)
    return sorted(rows, key=lambda r: (r["end"] or "", r["capacity_block_id"] or ""))


def clusters_by_reservation(ec2: Any, cluster_tags: Sequence[str] = (CLUSTER_TAG,)) -> dict[str, set[str]]:
    """Reservation id -> the clusters whose launch templates launch into it (their latest version), each named by
    the first of ``cluster_tags`` its template carries."""
    # Every template, told apart by its tags here: one list either way, and moto 5.2.5 (the sandbox) matches a
    # ``tag-key`` filter of two values as "all of them" where EC2 matches any.
    templates = _pages(ec2, "describe_launch_templates", "LaunchTemplates")
    users: dict[str, set[str]] = {}
    for template in templates:
        tags = {t["Key"]: t.get("Value", "") for t in template.get("Tags") or []}
        cluster = next((tags[key] for key in cluster_tags if tags.get(key)), None)
        if cluster is None:
            continue
        versions = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"],
                                                         Versions=["$Latest"])["LaunchTemplateVersions"]
        for version in versions:
            target = ((version.get("LaunchTemplateData") or {}).get("CapacityReservationSpecification") or {}) \
                .get("CapacityReservationTarget") or {}
            if target.get("CapacityReservationId"):
                users.setdefault(target["CapacityReservationId"], set()).add(cluster)
    return users


def block_facts(reservations: list[dict[str, Any]], block: dict[str, Any] | None, status: dict[str, Any] | None,
                now: dt.datetime | None = None) -> dict[str, Any]:
    """One Capacity Block as fmcluster shows it (pure: tests feed it recorded answers): its id and reservations,
    state, instance type and count, AZ, start and end (ISO 8601 UTC), ``hours_left`` (until the end, once begun) or
    ``hours_until_start``, ``instances_in_use`` and ``instances_free``, ``instances_unavailable``, and
    ``interconnect_status`` (None when EC2 gave no status)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    first = reservations[0] if reservations else {}
    start = (block or {}).get("StartDate") or first.get("StartDate")
    end = (block or {}).get("EndDate") or first.get("EndDate")
    total = sum(int(r.get("TotalInstanceCount", 0)) for r in reservations)
    free = sum(int(r.get("AvailableInstanceCount", 0)) for r in reservations)
    state = (block or {}).get("State") or first.get("State")
    begun = start is None or start <= now
    over = end is not None and end <= now
    return {
        "capacity_block_id": (block or {}).get("CapacityBlockId") or first.get("CapacityBlockId"),
        "reservation_ids": [r["CapacityReservationId"] for r in reservations]
        or list((block or {}).get("CapacityReservationIds") or []),
        "state": state,
        "instance_type": first.get("InstanceType"),
        "instance_count": total if reservations else None,
        "ultraserver_type": (block or {}).get("UltraserverType"),
        "availability_zone": (block or {}).get("AvailabilityZone") or first.get("AvailabilityZone"),
        "start": _iso(start),
        "end": _iso(end),
        "hours_left": round((end - now).total_seconds() / 3600, 2) if end is not None and begun and not over
        else (0.0 if over else None),
        "hours_until_start": None if begun else round((start - now).total_seconds() / 3600, 2),
        # before its start a block's available capacity "appears as zero" (EC2 guide "View Capacity Blocks"): no
        # instance runs in it then, so none is in use
        "instances_in_use": (total - free if begun else 0) if reservations else None,
        "instances_free": free if reservations else None,
        "instances_unavailable": int(status["TotalUnavailableCapacity"]) if status and
        status.get("TotalUnavailableCapacity") is not None else None,
        "interconnect_status": (status or {}).get("InterconnectStatus"),
    }


def block_problems(facts: dict[str, Any]) -> list[str]:
    """What is wrong with a block a cluster uses, one line each: ended, impaired, capacity unavailable."""
    name = facts["reservation_ids"][0] if facts["reservation_ids"] else facts["capacity_block_id"]
    problems = []
    if facts["state"] in ("expired", "cancelled", "failed", "payment-failed", "unavailable") or \
            facts["hours_left"] == 0.0:
        problems.append(f"Capacity Block {name} is {facts['state']} (ended {_human_when(facts['end'])}): its nodes "
                        "are gone; buy a new block (`fmcluster capacity find`) and put its id in the spec")
    interconnect = facts["interconnect_status"]
    if interconnect in BAD_INTERCONNECT:
        problems.append(f"Capacity Block {name}: {BAD_INTERCONNECT[interconnect]} (DescribeCapacityBlockStatus "
                        f"InterconnectStatus {interconnect})")
    if facts["instances_unavailable"]:
        problems.append(f"Capacity Block {name}: {facts['instances_unavailable']} of {facts['instance_count']} "
                        "instances unavailable (a failed system status check, DescribeCapacityBlockStatus)")
    return problems


def countdown(facts: dict[str, Any]) -> str:
    """"21.5 h left (ends 2026-12-06 11:30 UTC)", or "starts in 25.0 h (2026-12-06 11:30 UTC)"."""
    if facts["hours_until_start"] is not None:
        return f"starts in {_hours(facts['hours_until_start'])} ({_human_when(facts['start'])})"
    if facts["hours_left"] is not None:
        return f"{_hours(facts['hours_left'])} left (ends {_human_when(facts['end'])})"
    return "no end date"


def _hours(hours: float) -> str:
    return f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.1f} h"


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _human_when(iso: str | None) -> str:
    return f"{iso[:10]} {iso[11:16]} UTC" if iso else "?"
