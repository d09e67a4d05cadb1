"""What the reservation topology checks share (:mod:`fmcluster.preflight.reservation_topology` and its group
part): the result's name, reading DescribeCapacityReservationTopology past unknown ids, and AWS refusing it."""

from __future__ import annotations

from fmcluster.aws.topology import REFUSED_CODES, RESERVATION_PERMISSION, ReservationPlace, reservation_topology
from fmcluster.checks import CheckResult
from fmcluster.errors import AwsError
from fmcluster.preflight.common import Context, aws_failure
from fmcluster.spec.models import Queue, instance_types_of

#: EC2 API reference, CapacityReservationTopology NetworkNodes: empty "if the Capacity Reservation is in a state
#: other than active or pending".
TOPOLOGY_STATES = ("active", "pending")
#: AWS's documented reasons for an empty node set (EC2 API reference, CapacityReservationTopology).
EMPTY_REASONS = ("the EC2 API reference gives two reasons for an empty answer: the instance type is not supported, "
                 "or the reservation is in a state other than active or pending; it is not a statement about where "
                 "the capacity sits")


def result_name(queue: Queue) -> str:
    return f"reservation topology {queue.name}"


def queue_type(queue: Queue) -> str:
    """A reserved queue's one instance type (the spec refuses several with a reservation: spec/instance_mix.py)."""
    return instance_types_of(queue)[0]


def read_places(ctx: Context, ids: list[str]) -> dict[str, ReservationPlace]:
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


def refusal(queue: Queue, resource: str, exc: AwsError) -> CheckResult:
    """AWS's answer as the usual failed result (:func:`aws_failure`), made a warning: the topology only informs."""
    permission = exc.code in REFUSED_CODES
    failed = aws_failure(result_name(queue), resource, exc,
                         f"allow {RESERVATION_PERMISSION} to the credentials fmcluster runs with" if permission else "")
    why = (f"these credentials lack {RESERVATION_PERMISSION}" if permission
           else "AWS did not answer DescribeCapacityReservationTopology")
    return CheckResult(failed.name, "warning", failed.summary,
                       [f"{why}; where queue {queue.name}'s capacity sits in the network is only informative, so "
                        "create goes on without it", *failed.details])
