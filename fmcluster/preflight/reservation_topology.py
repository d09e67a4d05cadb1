"""Preflight check of where a reserved queue's capacity sits in AWS's network (issue 39, "see it": a warning when a
queue's nodes are likely to span more of the network than they need, such as ODCRs split across spines).

Per queue on reserved capacity of an instance type EC2 topology describes
(:func:`fmcluster.catalog.network_topology.network_layers`), EC2 DescribeCapacityReservationTopology
(:mod:`fmcluster.aws.topology`) gives each reservation one node set, top-down; its first node is the top layer (the
spine). What AWS says, and only that:

* a queue on one reservation (``capacity.reservation_id``) whose node set AWS returns: it sits under that spine;
* a queue on a Capacity Reservation group (``capacity.resource_group_arn``) whose usable reservations sit under
  different spines: a warning naming the reservations under each spine and their sizes
  (:mod:`fmcluster.preflight.reservation_topology_group`);
* an empty node set: AWS gave no topology. The EC2 API reference documents empty only for "The instance type is not
  supported" and "The Capacity Reservation is in a state other than active or pending", and the EC2 guide says
  "Depending on the type of Capacity Reservation, you might see only 1, 2, or 3 network nodes": an empty answer is
  no statement about spread, so the check says nothing about it.

Only informative: it warns, never fails; an AWS refusal (no ``ec2:DescribeCapacityReservationTopology``) is a
warning naming the permission. A type without topology is skipped without a call.
"""

from __future__ import annotations

from fmcluster.aws.topology import ReservationPlace
from fmcluster.catalog.network_topology import SOURCE, network_layers
from fmcluster.checks import CheckResult
from fmcluster.errors import AwsError
from fmcluster.preflight.common import Context
from fmcluster.preflight.reservation_places import (
    EMPTY_REASONS,
    TOPOLOGY_STATES,
    queue_type,
    read_places,
    refusal,
    result_name,
)
from fmcluster.preflight.reservation_topology_group import check_group_topology
from fmcluster.spec.models import Queue


def check_reservation_topology(ctx: Context) -> list[CheckResult]:
    """One result per queue on a reservation or a reservation group, in the spec's order."""
    results = []
    for queue in ctx.spec.queues:
        if not (queue.capacity.reservation_id or queue.capacity.resource_group_arn):
            continue
        if not network_layers(queue_type(queue)):
            results.append(CheckResult(result_name(queue), "skipped",
                                       f"AWS gives no network topology for {queue_type(queue)}",
                                       [f"the types with one are listed in the {SOURCE}"]))
        elif queue.capacity.reservation_id:
            results.append(_single(ctx, queue, queue.capacity.reservation_id))
        else:
            results.append(check_group_topology(ctx, queue))
    return results


def _single(ctx: Context, queue: Queue, rid: str) -> CheckResult:
    try:
        place = read_places(ctx, [rid]).get(rid)
    except AwsError as exc:
        return refusal(queue, f"topology of {rid}", exc)
    return judge(queue, rid, place)


def judge(queue: Queue, rid: str, place: ReservationPlace | None) -> CheckResult:
    """One reservation's topology, as AWS gave it (pure: tests can feed it recorded answers)."""
    name = result_name(queue)
    what = "Capacity Block" if queue.capacity.type == "capacity-block" else "capacity reservation"
    if place is None:
        return CheckResult(name, "skipped", f"AWS did not describe {what} {rid}'s topology",
                           ["the reservation check says whether it exists in this Region"])
    instance_type = place.instance_type or queue_type(queue)
    if place.state not in TOPOLOGY_STATES:
        return CheckResult(name, "skipped", f"{what} {rid} is {place.state or 'in no state AWS named'}: AWS shows a "
                           "reservation's topology once it is active or pending", [])
    if not place.network_nodes:
        return CheckResult(name, "skipped", f"AWS gave no topology for {what} {rid} ({instance_type}, {place.state})",
                           [EMPTY_REASONS, "`fmcluster topology NAME` shows each node's place once the nodes run"])
    layers = network_layers(instance_type) or network_layers(queue_type(queue))
    return CheckResult(name, "passed",
                       f"{what} {rid} ({instance_type}) sits under one spine, {place.network_nodes[0]}: AWS names "
                       f"{len(place.network_nodes)} of its {layers} network layers",
                       [f"network nodes, top-down: {', '.join(place.network_nodes)}"])
