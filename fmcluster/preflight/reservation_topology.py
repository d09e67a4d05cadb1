"""Preflight check of where a reserved queue's capacity sits in AWS's network (issue 39, "see it": a plan warning
when a queue's nodes span more of the network than they need, such as an ODCR split across spines).

For each queue on a Capacity Block or ODCR (``capacity.reservation_id``) of an instance type EC2 topology describes
(:func:`fmcluster.catalog.network_topology.network_layers`), one DescribeCapacityReservationTopology answer: the
network nodes, top-down, that all of the reservation's capacity shares (:mod:`fmcluster.aws.topology`). The first
is a spine (the top layer): the capacity sits under that one spine. An active or pending reservation of such a type
for which AWS names no node shares no spine: a job over all of its nodes crosses the spine layer. AWS does not say
how the capacity splits between spines, so the check does not either.

Only informative: it warns, never fails, and an AWS refusal (a missing ``ec2:DescribeCapacityReservationTopology``
permission) is a warning naming the permission. A type without topology is skipped without a call, and so is a
reservation AWS gives no topology in its state (only active and pending ones have one).
"""

from __future__ import annotations

from fmcluster.aws.topology import RESERVATION_PERMISSION, ReservationPlace, reservation_topology
from fmcluster.catalog.network_topology import SOURCE, network_layers
from fmcluster.checks import CheckResult
from fmcluster.errors import AwsError
from fmcluster.preflight.common import Context, aws_failure, fix
from fmcluster.spec.models import Queue, instance_types_of, max_nodes

#: EC2 API reference, CapacityReservationTopology NetworkNodes: empty "if the Capacity Reservation is in a state
#: other than active or pending".
TOPOLOGY_STATES = ("active", "pending")


def result_name(queue: Queue) -> str:
    return f"reservation topology {queue.name}"


def _type(queue: Queue) -> str:
    """A reserved queue's one instance type (the spec refuses several with a reservation: spec/instance_mix.py)."""
    return instance_types_of(queue)[0]


def check_reservation_topology(ctx: Context) -> list[CheckResult]:
    """One result per queue with a ``capacity.reservation_id``, in the spec's order."""
    reserved = [q for q in ctx.spec.queues if q.capacity.reservation_id]
    results: dict[str, CheckResult] = {}
    asked: list[Queue] = []
    for queue in reserved:
        if network_layers(_type(queue)):
            asked.append(queue)
        else:
            results[queue.name] = CheckResult(
                result_name(queue), "skipped",
                f"AWS gives no network topology for {_type(queue)}",
                [f"the types with one are listed in the {SOURCE}"])
    if asked:
        try:
            places = _read(ctx, [q.capacity.reservation_id or "" for q in asked])
        except AwsError as exc:
            for queue in asked:
                results[queue.name] = _refusal(queue, exc)
        else:
            for queue in asked:
                results[queue.name] = _judge(queue, places.get(queue.capacity.reservation_id or ""))
    return [results[q.name] for q in reserved]


def _read(ctx: Context, ids: list[str]) -> dict[str, ReservationPlace]:
    """Every id in one go; an unknown id (which the reservation check fails on) fails the whole request, so then each
    on its own, the unknown ones left out."""
    ec2 = ctx.aws("ec2")
    try:
        return reservation_topology(ec2, ids)
    except AwsError as exc:
        if not _unknown(exc):
            raise
    places: dict[str, ReservationPlace] = {}
    for rid in ids if len(ids) > 1 else []:
        try:
            places.update(reservation_topology(ec2, [rid]))
        except AwsError as exc:
            if not _unknown(exc):
                raise
    return places


def _unknown(exc: AwsError) -> bool:
    return exc.code.startswith("InvalidCapacityReservationId")


def _refusal(queue: Queue, exc: AwsError) -> CheckResult:
    """AWS's answer as the usual failed result (:func:`aws_failure`), made a warning: the topology only informs."""
    permission = exc.code in ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException")
    rid = queue.capacity.reservation_id or ""
    failed = aws_failure(result_name(queue), f"topology of {rid}", exc,
                         f"allow {RESERVATION_PERMISSION} to the credentials fmcluster runs with" if permission else "")
    why = (f"these credentials lack {RESERVATION_PERMISSION}" if permission
           else "AWS did not answer DescribeCapacityReservationTopology")
    return CheckResult(failed.name, "warning", failed.summary,
                       [f"{why}; where queue {queue.name}'s capacity sits in the network is only informative, so "
                        "create goes on without it", *failed.details])


def _judge(queue: Queue, place: ReservationPlace | None) -> CheckResult:
    """Compare one reservation's topology with the queue (pure: tests can feed it recorded answers)."""
    name = result_name(queue)
    rid = queue.capacity.reservation_id or ""
    what = "Capacity Block" if queue.capacity.type == "capacity-block" else "capacity reservation"
    nodes = max_nodes(queue)
    if place is None:
        return CheckResult(name, "skipped", f"AWS did not describe {what} {rid}'s topology",
                           ["the reservation check says whether it exists in this Region"])
    instance_type = place.instance_type or _type(queue)
    if place.state not in TOPOLOGY_STATES:
        return CheckResult(name, "skipped", f"{what} {rid} is {place.state or 'in no state AWS named'}: AWS shows a "
                           "reservation's topology once it is active or pending", [])
    layers = network_layers(instance_type) or network_layers(_type(queue))
    if place.network_nodes:
        shared = len(place.network_nodes)
        details = [f"network nodes all of its capacity shares, top-down: {', '.join(place.network_nodes)}"]
        if layers and shared >= layers:
            details.append(f"all {layers} layers of {instance_type}: every instance hangs off one bottom node")
        return CheckResult(name, "passed",
                           f"{what} {rid} ({instance_type}) sits under 1 spine, {place.network_nodes[0]}: "
                           f"{shared} of {layers} network layers shared", details)
    return CheckResult(
        name, "warning",
        f"queue {queue.name}: {what} {rid} ({instance_type}) spans more than 1 spine: a job over all {nodes} "
        "nodes crosses the spine layer",
        [f"AWS names no network node that all of {rid}'s capacity shares ({place.state}, {instance_type} has "
         f"{layers} network layers); it does not say how many spines, or how many instances under each",
         "`fmcluster topology NAME` shows each node's spine once the nodes run",
         fix("nothing blocks create; for the fastest collectives keep a job within one spine's nodes, or reserve "
             "capacity AWS places under one spine (DescribeCapacityReservationTopology then names it)")])
