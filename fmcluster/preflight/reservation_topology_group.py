"""Where a Capacity Reservation group's reservations sit (``capacity.resource_group_arn``): the queue's nodes launch
into "any Capacity Reservation in the group that has matching attributes ... and available capacity" (EC2 user guide,
"Capacity Reservation groups"), so when the usable reservations sit under different spines (the first node of each
one's DescribeCapacityReservationTopology node set), a job over the queue's nodes can cross the spine layer. The
check names the reservations under each spine with their sizes (DescribeCapacityReservations TotalInstanceCount);
reservations AWS gives no topology for are named as such, never counted as spread.

The group's own problems (missing, no permission, no usable reservation) are the reservation check's
(:mod:`fmcluster.preflight.reservation_group`): here they skip.
"""

from __future__ import annotations

from fmcluster.aws.topology import ReservationPlace
from fmcluster.checks import CheckResult
from fmcluster.errors import AwsError
from fmcluster.preflight.common import Context, aws_errors, fix
from fmcluster.preflight.reservation_group import RESERVATION_TYPE, describe_members, group_members, unusable
from fmcluster.preflight.reservation_places import EMPTY_REASONS, TOPOLOGY_STATES, read_places, refusal, result_name
from fmcluster.spec.models import Queue, max_nodes


def check_group_topology(ctx: Context, queue: Queue) -> CheckResult:
    arn = queue.capacity.resource_group_arn or ""
    group = arn.rsplit("/", 1)[-1]
    name = result_name(queue)
    unread: tuple[type[BaseException], ...] = (AwsError, *aws_errors())
    try:
        ids = [m["ResourceArn"].rsplit("/", 1)[-1] for m in group_members(ctx.aws("resource-groups"), arn)
               if m.get("ResourceType") == RESERVATION_TYPE]
        described = describe_members(ctx, ids) if ids else {}
    except unread:
        return CheckResult(name, "skipped", f"capacity reservation group {group} could not be read",
                           [f"the check `reservation {queue.name}` says why"])
    placement = ctx.compute_placement(queue)
    zone = placement[1] if placement is not None else None
    sizes = {rid: int(cr.get("TotalInstanceCount", 0)) for rid, cr in described.items()
             if cr is not None and not unusable(cr, queue, zone)}
    if not sizes:
        return CheckResult(name, "skipped", f"capacity reservation group {group} holds no reservation queue "
                           f"{queue.name} can use", [f"the check `reservation {queue.name}` says why"])
    try:
        places = read_places(ctx, list(sizes))
    except AwsError as exc:
        return refusal(queue, f"topology of group {group}'s reservations", exc)
    return judge_group(queue, group, sizes, places)


def _spine(place: ReservationPlace | None) -> str | None:
    if place is None or place.state not in TOPOLOGY_STATES or not place.network_nodes:
        return None
    return place.network_nodes[0]


def _listed(rids: list[str], sizes: dict[str, int]) -> str:
    return " + ".join(f"{rid} ({sizes[rid]})" for rid in rids)


def judge_group(queue: Queue, group: str, sizes: dict[str, int],
                places: dict[str, ReservationPlace]) -> CheckResult:
    """``sizes``: the group's usable reservations and their instance counts, in the group's order."""
    name = result_name(queue)
    spines: dict[str, list[str]] = {}
    unplaced: list[str] = []
    for rid in sizes:
        spine = _spine(places.get(rid))
        if spine is None:
            unplaced.append(rid)
        else:
            spines.setdefault(spine, []).append(rid)
    details = [f"{rid}: network nodes, top-down: {', '.join(places[rid].network_nodes)}"
               for rids in spines.values() for rid in rids]
    if unplaced:
        details.append(f"AWS gave no topology for {_listed(unplaced, sizes)}: {EMPTY_REASONS}")
    if not spines:
        return CheckResult(name, "skipped", f"AWS gave no topology for capacity reservation group {group}'s "
                           f"reservations {_listed(unplaced, sizes)}", details)
    per_spine = {spine: sum(sizes[rid] for rid in rids) for spine, rids in spines.items()}
    where = ", ".join(f"{_listed(rids, sizes)} under spine {spine}" for spine, rids in spines.items())
    if len(spines) == 1:
        unknown = f"; AWS gave no topology for {_listed(unplaced, sizes)}" if unplaced else ""
        return CheckResult(name, "passed", f"queue {queue.name}: capacity reservation group {group}'s "
                           f"reservations {where}{unknown}", details)
    reserved = sum(per_spine.values())
    nodes = min(max_nodes(queue), reserved)
    if nodes > max(per_spine.values()):
        verdict = f"a job over all {nodes} nodes crosses the spine layer"
    else:
        # one spine could hold them, but EC2 chooses the reservation each launch uses
        verdict = (f"its {nodes} nodes fit under one spine, but EC2 launches into any reservation of the group "
                   "with free capacity, so they may land under several")
    return CheckResult(name, "warning", f"queue {queue.name}: {where}: {verdict}", [
        *details,
        "`fmcluster topology NAME` shows each node's spine once the nodes run",
        fix("nothing blocks create; for the fastest collectives keep a job within one spine's nodes, or group "
            "reservations AWS places under one spine")])
