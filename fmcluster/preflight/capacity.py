"""Preflight checks of capacity: EC2 vCPU quotas per instance family, capacity reservations and
Capacity Blocks."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from fmcluster import catalog
from fmcluster.checks import CheckResult
from fmcluster.preflight.common import Context, aws_code, aws_errors, aws_failure, fix, guarded
from fmcluster.preflight.reservation_group import check_reservation_group
from fmcluster.spec import decisions
from fmcluster.spec.models import Queue, max_nodes

#: Quota codes (Service Quotas, service code ``ec2``) by instance-family group: (on-demand, spot).
#: The vCPU quotas count every running instance of the group in the Region.
QUOTAS: dict[str, tuple[str, str | None]] = {
    "P": ("L-417A185B", "L-7212CCBC"),
    "G": ("L-DB2E81BA", "L-3819A6DF"),
    "Trn": ("L-2C3B7624", None),
    "Standard": ("L-1216C47A", "L-34B43A08"),
}
QUOTA_NAMES = {
    "L-417A185B": "Running On-Demand P instances",
    "L-7212CCBC": "All P Spot Instance Requests",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-3819A6DF": "All G and VT Spot Instance Requests",
    "L-2C3B7624": "Running On-Demand Trn instances",
    "L-1216C47A": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
    "L-34B43A08": "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
}
_STANDARD = {"a", "c", "d", "h", "i", "im", "is", "m", "r", "t", "z"}
#: States a Capacity Block or future-dated ODCR passes through before it is active.
_NOT_YET = {"scheduled", "payment-pending", "pending", "assessing", "delayed"}


def quota_group(instance_type: str) -> str | None:
    """P (p4d … p6e-gb200), G (g*, gr*, vt*), Trn (trn1, trn2, trn2u), Standard; None when fmcluster
    does not know the family's quota."""
    prefix = re.match(r"[a-z]+", instance_type.lower())
    letters = prefix.group(0) if prefix else ""
    if letters == "p":
        return "P"
    if letters in ("g", "gr", "vt"):
        return "G"
    if letters == "trn":
        return "Trn"
    if letters in _STANDARD:
        return "Standard"
    return None


@dataclass
class _Need:
    vcpus: int = 0
    lines: list[str] = field(default_factory=list)


@guarded("vcpu quotas", "EC2 vCPU quotas")
def check_quotas(ctx: Context) -> list[CheckResult]:
    """Needed vCPUs per quota (catalog vCPUs, or DescribeInstanceTypes for other types) × max nodes."""
    spec = ctx.spec
    head = decisions.head_node_type(spec)
    vcpus = _vcpus(ctx, sorted({*([head] if head else []), *(q.instance_type for q in spec.queues)}))
    needs: dict[str, _Need] = {}
    notes: list[str] = []
    unknown: list[str] = []

    def add(instance_type: str, count: int, spot: bool, label: str) -> None:
        group = quota_group(instance_type)
        code = QUOTAS[group][1 if spot else 0] if group else None
        if code is None:
            unknown.append(f"{label}: no vCPU quota known to fmcluster for {'Spot ' if spot else ''}{instance_type}")
            return
        need = needs.setdefault(code, _Need())
        need.vcpus += vcpus[instance_type] * count
        need.lines.append(f"{label}: {count} × {instance_type} × {vcpus[instance_type]} vCPUs")

    if head:
        add(head, 1, False, "head node")
    for queue in spec.queues:
        kind = queue.capacity.type
        if kind in ("reservation", "capacity-block"):
            if queue.capacity.resource_group_arn:
                # EC2 runs what the group's reservations cannot hold On-Demand ("Capacity Reservation groups").
                notes.append(f"queue {queue.name}: launches into reservation group {queue.capacity.resource_group_arn};"
                             " nodes beyond its free reservations run On-Demand and count against the quota")
                continue
            what = "Capacity Block" if kind == "capacity-block" else "capacity reservation"
            notes.append(f"queue {queue.name}: runs in {what} {queue.capacity.reservation_id}, which does not count "
                         "against the On-Demand vCPU quota")
            continue
        add(queue.instance_type, max_nodes(queue), kind == "spot", f"queue {queue.name}")

    results = [_quota(ctx, code, need, notes if i == 0 else []) for i, (code, need) in enumerate(sorted(needs.items()))]
    if unknown:
        results.append(CheckResult("vcpu quota (other)", "skipped", "not checked", unknown))
    if not results:
        results.append(CheckResult("vcpu quotas", "passed", "no queue draws on an On-Demand or Spot vCPU quota",
                                   notes))
    return results


def _vcpus(ctx: Context, types: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    missing = []
    for instance_type in types:
        facts = catalog.instance(instance_type)
        if facts is not None:
            found[instance_type] = facts.vcpus
        else:
            missing.append(instance_type)
    if missing:
        answer = ctx.aws("ec2").describe_instance_types(InstanceTypes=missing)
        for item in answer["InstanceTypes"]:
            found[item["InstanceType"]] = int(item["VCpuInfo"]["DefaultVCpus"])
    return found


def _quota(ctx: Context, code: str, need: _Need, notes: list[str]) -> CheckResult:
    from botocore.exceptions import ClientError

    quotas = ctx.aws("service-quotas")
    label = QUOTA_NAMES.get(code, code)
    name = f"vcpu quota {code}"
    try:
        try:
            quota = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]
        except ClientError as exc:
            # GetServiceQuota can answer NoSuchResource for a quota the account never changed.
            if aws_code(exc) != "NoSuchResourceException":
                raise
            quota = quotas.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]
    except aws_errors() as exc:
        return aws_failure(name, f"quota {code} ({label})", exc)
    label = quota.get("QuotaName") or label
    value = float(quota.get("Value", 0))
    details = [*need.lines, *notes, "the quota also covers instances already running in the Region"]
    summary = f"{label}: {value:g} vCPUs, need {need.vcpus}"
    if need.vcpus > value:
        details.append(fix(
            f"request an increase to {need.vcpus} vCPUs for {label} in the Service Quotas console (or `aws "
            f"service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} "
            f"--desired-value {need.vcpus} --region {ctx.region}`)"))
        return CheckResult(name, "failed", summary, details)
    return CheckResult(name, "passed", summary, details)


def check_reservations(ctx: Context) -> list[CheckResult]:
    """Each queue's capacity reservation / Capacity Block / reservation group fits the queue: one result per queue."""
    results = []
    for queue in ctx.spec.queues:
        if queue.capacity.reservation_id:
            results += _reservation(ctx, queue)
        elif queue.capacity.resource_group_arn:
            results += check_reservation_group(ctx, queue)
    return results


def _reservation(ctx: Context, queue: Queue) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    rid = queue.capacity.reservation_id
    block = queue.capacity.type == "capacity-block"
    what = "Capacity Block" if block else "capacity reservation"
    name = f"reservation {queue.name}"

    @guarded(name, f"{what} {rid}")
    def run(ctx: Context) -> list[CheckResult]:
        try:
            found = ctx.aws("ec2").describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
        except ClientError as exc:
            if aws_code(exc).startswith("InvalidCapacityReservationId"):
                return [aws_failure(name, f"{what} {rid}", exc,
                                    f"check queues[{_index(ctx, queue)}].capacity.reservation_id and the region "
                                    f"(`aws ec2 describe-capacity-reservations --region {ctx.region}` lists yours)"
                                    + (_buy_block(queue) if block else ""))]
            raise
        if not found:
            return [CheckResult(name, "failed", f"{what} {rid} is not in {ctx.region}",
                                [fix(f"check the reservation id and the region (`aws ec2 "
                                     f"describe-capacity-reservations --region {ctx.region}`)")])]
        return [_judge(ctx, queue, found[0], name, what)]

    return run(ctx)


def _index(ctx: Context, queue: Queue) -> int:
    return ctx.spec.queues.index(queue)


def _buy_block(queue: Queue) -> str:
    return (f"; to buy a Capacity Block: `aws ec2 describe-capacity-block-offerings --instance-type "
            f"{queue.instance_type} --instance-count {max_nodes(queue)} --capacity-duration-hours 24`, then "
            "`aws ec2 purchase-capacity-block`")


def _when(value: dt.datetime | None) -> str:
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if value else "?"


def little_time_left(spec: Any) -> dt.timedelta:
    """Under this much time left a Capacity Block gets a preflight warning: one hour, or two checkpoint intervals
    of ``workload.checkpoint_every_min`` when that is longer (a job started then could not save twice)."""
    every = getattr(getattr(spec, "workload", None), "checkpoint_every_min", None)
    return max(dt.timedelta(hours=1), dt.timedelta(minutes=2 * every) if every else dt.timedelta(0))


def _least_why(spec: Any) -> str:
    every = getattr(getattr(spec, "workload", None), "checkpoint_every_min", None)
    if every and 2 * every > 60:
        return f"two checkpoints at workload.checkpoint_every_min {every:g}"
    return "one hour, or two checkpoint intervals when longer"


def _span(delta: dt.timedelta) -> str:
    minutes = delta.total_seconds() / 60
    return f"{minutes / 60:g} h" if minutes % 60 == 0 else f"{minutes:g} min"


def _judge(ctx: Context, queue: Queue, cr: dict, name: str, what: str) -> CheckResult:
    """Compare one DescribeCapacityReservations entry with the queue (pure: tests feed it recorded answers)."""
    now = dt.datetime.now(dt.timezone.utc)
    rid = cr.get("CapacityReservationId", queue.capacity.reservation_id)
    index = _index(ctx, queue)
    block = queue.capacity.type == "capacity-block"
    kind = cr.get("ReservationType", "default")
    state = cr.get("State", "?")
    start, end = cr.get("StartDate"), cr.get("EndDate")
    total = int(cr.get("TotalInstanceCount", 0))
    available = cr.get("AvailableInstanceCount")
    nodes = max_nodes(queue)
    details = [f"{rid}: {cr.get('InstanceType')} × {total} in {cr.get('AvailabilityZone')}, {state}, "
               f"{'Capacity Block' if kind == 'capacity-block' else 'On-Demand Capacity Reservation'}"
               + (f", {_when(start)} → {_when(end)}" if start or end else "")]
    failures: list[str] = []
    warnings: list[str] = []
    fixes: list[str] = []
    # EC2 InstanceMatchCriteria: a targeted ODCR serves only launches that name it; an open one serves any matching
    # launch in the account. fmcluster names it either way, so its nodes use it; an open one can also be filled by
    # other instances of the type in its AZ.
    criteria = cr.get("InstanceMatchCriteria")
    if criteria == "open" and not block:
        details.append(f"{rid} is open: other {cr.get('InstanceType', queue.instance_type)} launches in "
                       f"{cr.get('AvailabilityZone', 'its AZ')} can take its slots as well")
    elif criteria == "targeted":
        details.append(f"{rid} is targeted: only launches that name it (as this queue does) use it")

    if block and kind != "capacity-block":
        failures.append(f"{rid} is an On-Demand Capacity Reservation, not a Capacity Block")
        fixes.append(f"set queues[{index}].capacity.type: reservation, or point it at a Capacity Block")
    elif not block and kind == "capacity-block":
        failures.append(f"{rid} is a Capacity Block, not an On-Demand Capacity Reservation")
        fixes.append(f"set queues[{index}].capacity.type: capacity-block (and nodes: {total}, fixed)")
    expired = state == "expired" or (end is not None and cr.get("EndDateType") != "unlimited" and end <= now)
    if expired:
        failures.append(f"{rid} ended {_when(end)}" if end else f"{rid} has expired")
        if block:
            fixes.append("buy a new Capacity Block (`aws ec2 describe-capacity-block-offerings --instance-type "
                         f"{queue.instance_type} --instance-count {nodes} --capacity-duration-hours 24`, then "
                         "`aws ec2 purchase-capacity-block`) and put its id in "
                         f"queues[{index}].capacity.reservation_id")
        else:
            fixes.append("create a new reservation (`aws ec2 create-capacity-reservation`) or set "
                         f"queues[{index}].capacity.type: on-demand")
    elif state in ("cancelled", "cancelling", "failed", "payment-failed", "unsupported", "unavailable"):
        failures.append(f"{rid} is {state}")
        fixes.append(f"use another {what}" + (_buy_block(queue) if block else
                                              " (`aws ec2 create-capacity-reservation`)"))
    elif state in _NOT_YET or (start is not None and start > now):
        warnings.append(f"{rid} is {state}; it starts {_when(start)}: nodes launch from then on")
    elif state != "active":
        warnings.append(f"{rid} is {state}")

    if cr.get("InstanceType") and cr["InstanceType"] != queue.instance_type:
        failures.append(f"{rid} reserves {cr['InstanceType']}, the queue asks for {queue.instance_type}")
        fixes.append(f"set queues[{index}].instance_type: {cr['InstanceType']}, or use a reservation of "
                     f"{queue.instance_type}")
    zone = cr.get("AvailabilityZone")
    placement = ctx.compute_placement(queue)
    if placement is None:
        details.append("the subnet's AZ is unknown (see the subnet check), so the AZ was not compared")
    elif zone and zone != placement[1]:
        failures.append(f"{rid} is in {zone}, but the subnet {placement[0]} is in {placement[1]}"
                        if placement[0].startswith("subnet-") else
                        f"{rid} is in {zone}, but the compute subnet {placement[0]}")
        field = f"queues[{index}].subnet_id" if queue.subnet_id else "network.subnet_id"
        if placement[0].startswith("subnet-"):
            fixes.append(f"set {field} to a subnet in {zone}: reserved capacity is usable only in its zone")
        else:  # the created network's one compute subnet follows the reservations only when they share an AZ
            fixes.append(f"put every queue's reservation in one AZ (the network fmcluster creates has one compute "
                         f"subnet), or set network.subnet_id and queues[{index}].subnet_id to a subnet in {zone}")

    if total < nodes:
        failures.append(f"{rid} holds {total} instances, queue {queue.name} goes up to {nodes}")
        fixes.append(f"set queues[{index}].nodes to at most {total}, or reserve {nodes} instances")
    elif state == "active" and available is not None and int(available) < nodes:
        warnings.append(f"{rid} has {available} of {total} instances free now (others run in it); queue "
                        f"{queue.name} goes up to {nodes}")
    if end is not None and not expired and block:
        hours = (end - now).total_seconds() / 3600
        details.append(f"{hours:.1f} hours left; instances stop at {_when(end)}")
        least = little_time_left(ctx.spec)
        if hours < least.total_seconds() / 3600:
            warnings.append(f"{rid} has {hours:.1f} h left (under {_span(least)}: {_least_why(ctx.spec)}); EC2 "
                            "stops its instances 30 minutes before the end")
            fixes.append(f"extend it (`fmcluster capacity extend {rid} --hours 24`) or buy the next block "
                         "(`fmcluster capacity find`) before starting a long job")

    findings = failures + warnings
    details += findings[1:] + [fix(text) for text in fixes]
    if failures:
        return CheckResult(name, "failed", failures[0], details)
    if warnings:
        return CheckResult(name, "warning", warnings[0], details)
    return CheckResult(name, "passed", f"{what} {rid}: {total} × {queue.instance_type} in {zone}, {state}", details)
