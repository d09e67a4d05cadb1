"""Preflight check of a queue that launches into a Capacity Reservation group (``capacity.resource_group_arn``).

The group is the user's (fmcluster never creates or deletes it). EC2 launches a group's instances into "any
Capacity Reservation in the group that has matching attributes (instance type, platform, Availability Zone,
and tenancy) and available capacity", and runs the rest On-Demand (EC2 user guide, "Capacity Reservation
groups"); only a group with the ``AWS::EC2::CapacityReservationPool`` configuration can be targeted by launches
("Create a Capacity Reservation group"). So the check reads the group's configuration and members
(``resource-groups:GetGroupConfiguration``, ``resource-groups:ListGroupResources``) and its reservations
(``ec2:DescribeCapacityReservations``), and counts what the queue's nodes can use.
"""

from __future__ import annotations

from typing import Any

from fmcluster.checks import CheckResult
from fmcluster.preflight.common import Context, aws_code, aws_failure, fix, guarded
from fmcluster.spec.models import Queue, max_nodes

POOL = "AWS::EC2::CapacityReservationPool"
RESERVATION_TYPE = "AWS::EC2::CapacityReservation"
#: What the check calls, for the fix of an AccessDenied answer.
PERMISSIONS = ("resource-groups:GetGroupConfiguration", "resource-groups:ListGroupResources",
               "ec2:DescribeCapacityReservations")


def _create_group(name: str) -> str:
    return (f"`aws resource-groups create-group --name {name} --configuration "
            f"'{{\"Type\": \"{POOL}\"}}' '{{\"Type\": \"AWS::ResourceGroups::Generic\", \"Parameters\": "
            f"[{{\"Name\": \"allowed-resource-types\", \"Values\": [\"{RESERVATION_TYPE}\"]}}]}}'`")


def check_reservation_group(ctx: Context, queue: Queue) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    arn = queue.capacity.resource_group_arn or ""
    group_name = arn.rsplit("/", 1)[-1]
    index = ctx.spec.queues.index(queue)
    name = f"reservation {queue.name}"
    what = f"capacity reservation group {group_name}"

    @guarded(name, what)
    def run(ctx: Context) -> list[CheckResult]:
        groups = ctx.aws("resource-groups")
        try:
            configuration = groups.get_group_configuration(Group=arn)["GroupConfiguration"]
            members = group_members(groups, arn)
        except ClientError as exc:
            code = aws_code(exc)
            if code == "NotFoundException":
                return [aws_failure(name, what, exc, f"create the group in {ctx.region} ({_create_group(group_name)}"
                                                     ", then `aws resource-groups group-resources`) or correct "
                                                     f"queues[{index}].capacity.resource_group_arn")]
            if code in ("ForbiddenException", "AccessDeniedException", "UnauthorizedException"):
                return [aws_failure(name, what, exc, f"allow {PERMISSIONS[0]} and {PERMISSIONS[1]} on {arn}, and "
                                                     f"{PERMISSIONS[2]}, to the credentials fmcluster runs with")]
            raise
        if POOL not in {item.get("Type") for item in configuration.get("Configuration") or []}:
            return [CheckResult(name, "failed", f"{what} is not a Capacity Reservation group (no {POOL} "
                                                "configuration), so launches cannot target it",
                                [fix(f"create one as the EC2 user guide shows: {_create_group(group_name)}")])]
        reservation_ids = [m["ResourceArn"].rsplit("/", 1)[-1] for m in members
                           if m.get("ResourceType") == RESERVATION_TYPE]
        if not reservation_ids:
            return [CheckResult(name, "failed", f"{what} holds no capacity reservations",
                                [fix(f"add reservations of {queue.instance_type}: `aws resource-groups "
                                     f"group-resources --group {arn} --resource-arns <reservation ARN>...`")])]
        return [_judge(ctx, queue, what, name, index, describe_members(ctx, reservation_ids))]

    return run(ctx)


def group_members(groups: Any, arn: str) -> list[dict]:
    found, token = [], None
    while True:
        page = groups.list_group_resources(Group=arn, **({"NextToken": token} if token else {}))
        found += [item["Identifier"] for item in page.get("Resources") or []]
        token = page.get("NextToken")
        if not token:
            return found


def describe_members(ctx: Context, reservation_ids: list[str]) -> dict[str, dict | None]:
    """Each member's DescribeCapacityReservations entry; None for one EC2 no longer knows."""
    from botocore.exceptions import ClientError

    ec2 = ctx.aws("ec2")
    try:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=reservation_ids)["CapacityReservations"]
        known = {cr["CapacityReservationId"]: cr for cr in found}
    except ClientError as exc:
        if not aws_code(exc).startswith("InvalidCapacityReservationId") or len(reservation_ids) == 1:
            if aws_code(exc).startswith("InvalidCapacityReservationId"):
                return {reservation_ids[0]: None}
            raise
        known = {}
        for rid in reservation_ids:  # one answer per member, to name the one that is gone
            known.update(describe_members(ctx, [rid]))
    return {rid: known.get(rid) for rid in reservation_ids}


def _judge(ctx: Context, queue: Queue, what: str, name: str, index: int,
           reservations: dict[str, dict | None]) -> CheckResult:
    """Count the reserved instances the queue's nodes can use: active ODCRs of its type in the subnet's AZ."""
    placement = ctx.compute_placement(queue)  # the queue's own subnet where it has one
    zone = placement[1] if placement is not None else None
    nodes = max_nodes(queue)
    details, usable_total, usable_free = [], 0, 0
    for rid, cr in reservations.items():
        if cr is None:
            details.append(f"{rid}: not found in {ctx.region} (a member EC2 no longer knows)")
            continue
        total, free = int(cr.get("TotalInstanceCount", 0)), int(cr.get("AvailableInstanceCount", 0))
        line = (f"{rid}: {cr.get('InstanceType')} × {total} in {cr.get('AvailabilityZone')}, {cr.get('State')}, "
                f"{free} free")
        why = unusable(cr, queue, zone)
        details.append(line + (f": not usable, {why}" if why else ""))
        if not why:
            usable_total += total
            usable_free += free
    if zone is None:
        details.append("the subnet's AZ is unknown (see the subnet check), so the AZ was not compared")
    where = f" in {zone}" if zone else ""
    on_demand = "EC2 runs the nodes beyond the group's free reservations On-Demand"
    if usable_total == 0:
        return CheckResult(name, "failed", f"{what} holds no active {queue.instance_type} reservation{where}",
                           [*details, on_demand, fix(_reserve(queue, zone, nodes) + f", or set queues[{index}]."
                                                     "instance_type / network.subnet_id to match a reservation "
                                                     "of the group")])
    if usable_total < nodes:
        # EC2 launches the rest On-Demand rather than refuse them: a queue that bursts past its reservations is
        # a choice, so this warns (with the price of it) instead of stopping the create.
        missing = nodes - usable_total
        return CheckResult(name, "warning", f"{what} reserves {usable_total} {queue.instance_type}{where}, queue "
                                            f"{queue.name} goes up to {nodes}: {missing} would run On-Demand",
                           [*details, on_demand, fix(_reserve(queue, zone, missing) + f", or set queues[{index}]."
                                                     f"nodes to at most {usable_total}")])
    summary = f"{what}: {usable_total} × {queue.instance_type}{where} reserved, {usable_free} free"
    if usable_free < nodes:
        return CheckResult(name, "warning", f"{what} has {usable_free} of {usable_total} {queue.instance_type}"
                                            f"{where} free now (others run in it); queue {queue.name} goes up to "
                                            f"{nodes}", [*details, on_demand])
    return CheckResult(name, "passed", summary, details)


def _reserve(queue: Queue, zone: str | None, count: int) -> str:
    return (f"reserve them (`aws ec2 create-capacity-reservation --instance-type {queue.instance_type} "
            f"--instance-platform Linux/UNIX --availability-zone {zone or '<the subnet AZ>'} --instance-count {count} "
            "--instance-match-criteria targeted`) and add them to the group (`aws resource-groups group-resources "
            f"--group {queue.capacity.resource_group_arn} --resource-arns <its ARN>`)")


def unusable(cr: dict, queue: Queue, zone: str | None) -> str:
    """Why the queue's launches cannot use this member, or ''."""
    if cr.get("ReservationType") == "capacity-block":
        return "a Capacity Block (a reservation-type queue launches into On-Demand Capacity Reservations)"
    if cr.get("State") != "active":
        return f"it is {cr.get('State')}"
    if cr.get("InstanceType") != queue.instance_type:
        return f"the queue runs {queue.instance_type}"
    if zone and cr.get("AvailabilityZone") != zone:
        return f"the subnet is in {zone}"
    if cr.get("Tenancy", "default") != "default":
        return f"its tenancy is {cr.get('Tenancy')}"
    if cr.get("InstancePlatform") not in (None, "Linux/UNIX"):
        return f"it is for {cr.get('InstancePlatform')}, the nodes run Linux/UNIX"
    return ""
