"""The Capacity Blocks one cluster's spec names, as ``status`` and ``create`` show them: a countdown, a warning
when little time is left, and a problem line for a block that has ended, an impaired interconnect or unavailable
capacity.

Read inside ``status``'s read-only pass (:mod:`fmcluster.engine.reads`): one DescribeCapacityReservations for every
block, one DescribeCapacityBlockStatus for those with a Capacity Block id, each kept in the pass so no other
reader sends it again.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fmcluster.aws.capacity_blocks import block_facts, block_problems, countdown
from fmcluster.engine import reads
from fmcluster.spec.models import Spec

#: ``status`` warns when a block has fewer hours left than this (``--block-warning-hours`` changes it): a day is
#: the shortest block EC2 sells, and time enough to buy an extension or the next block.
DEFAULT_WARNING_HOURS = 24.0


def block_queues(spec: Spec) -> dict[str, list[str]]:
    """Reservation id -> the names of the ``capacity-block`` queues that launch into it."""
    named: dict[str, list[str]] = {}
    for queue in spec.queues:
        if queue.capacity.type == "capacity-block" and queue.capacity.reservation_id:
            named.setdefault(queue.capacity.reservation_id, []).append(queue.name)
    return named


def cluster_blocks(ctx: Any, spec: Spec | None, warning_hours: float = DEFAULT_WARNING_HOURS,
                   now: dt.datetime | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Each block the spec names (:func:`fmcluster.aws.capacity_blocks.block_facts` plus ``queues`` and
    ``warning``), and the problem lines for them. ([], []) when the spec names none."""
    named = block_queues(spec) if spec is not None else {}
    if not named:
        return [], []
    ids = sorted(named)
    ec2 = ctx.client("ec2")
    key = ",".join(ids)
    reservations = reads.once(ctx, "ec2.CapacityReservations", key, lambda: ec2.describe_capacity_reservations(
        CapacityReservationIds=ids)["CapacityReservations"])
    by_id = {r["CapacityReservationId"]: r for r in reservations or []}
    block_ids = sorted({r["CapacityBlockId"] for r in by_id.values() if r.get("CapacityBlockId")})
    statuses: dict[str, dict[str, Any]] = {}
    if block_ids:
        answer = reads.once(ctx, "ec2.CapacityBlockStatuses", ",".join(block_ids),
                            lambda: ec2.describe_capacity_block_status(CapacityBlockIds=block_ids)
                            ["CapacityBlockStatuses"])
        statuses = {s["CapacityBlockId"]: s for s in answer or []}
    blocks: list[dict[str, Any]] = []
    problems: list[str] = []
    for rid in ids:
        reservation = by_id.get(rid)
        if reservation is None:
            problems.append(f"Capacity Block {rid} (queue {', '.join(named[rid])}) is not in this Region")
            continue
        facts = block_facts([reservation], None, statuses.get(reservation.get("CapacityBlockId", "")), now)
        facts["queues"] = named[rid]
        facts["countdown"] = countdown(facts)
        left = facts["hours_left"]
        facts["warning"] = (f"Capacity Block {rid} has {left:.1f} h left (under {warning_hours:g} h): EC2 stops its "
                            "instances 30 minutes before the end; checkpoint, or extend it (`fmcluster capacity "
                            f"extend {rid}`)") if left and left < warning_hours else None
        blocks.append(facts)
        problems += block_problems(facts)
    return blocks, problems


def not_begun(ctx: Any, spec: Spec) -> list[dict[str, Any]]:
    """The blocks the spec names that have not begun: their nodes come at the start (``create`` says when)."""
    blocks, _ = cluster_blocks(ctx, spec)
    return [b for b in blocks if b["hours_until_start"] is not None]


def queues_waiting(ctx: Any, spec: Spec | None) -> set[str]:
    """The queues whose Capacity Block has not begun: a node group that cannot launch into it yet is waiting, not
    failing (EKS: "if the create request is made before the capacity reservation is active, then the ASG won't be
    able to launch Amazon EC2 instances until it becomes active", "Create a managed node group with Capacity Blocks
    for ML"). Empty when the blocks cannot be read: then every launch error stays a problem."""
    if spec is None or not block_queues(spec):
        return set()
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return {queue for block in not_begun(ctx, spec) for queue in block["queues"]}
    except (BotoCoreError, ClientError):  # status reports the blocks' read failing; here nothing is hidden
        return set()
