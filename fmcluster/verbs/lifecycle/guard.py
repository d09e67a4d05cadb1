"""The budget guard as the lifecycle verbs see it: ``create`` refuses a budget that cannot be kept and says when
the guard fires (and when it moves); ``status`` counts it down with the spend so far and says when it has fired.
Time is AWS's (:mod:`fmcluster.aws.clock`); the moment is decided once (:mod:`fmcluster.verbs.guard_plan`), and
the guard's resources in AWS are :mod:`fmcluster.aws.guard`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fmcluster.aws.clock import aws_now
from fmcluster.connection import aws
from fmcluster.errors import UsageError
from fmcluster.output import ui
from fmcluster.pricing.deadline import GuardDeadline, guard_deadline, iso, refuse_unkeepable
from fmcluster.pricing.model import usd_per_hour_max
from fmcluster.spec import load_spec
from fmcluster.spec.models import Spec
from fmcluster.spec.positions import PositionedDocument
from fmcluster.state.store import ClusterRecord
from fmcluster.verbs.session import Session


def created_at(record: ClusterRecord | None, now: dt.datetime) -> dt.datetime:
    """When the cluster was made (its record's first write); ``now`` for a cluster not made yet."""
    return dt.datetime.fromtimestamp(record.created_at, dt.timezone.utc) if record is not None else now


def _document(spec_file: str) -> PositionedDocument:
    """The spec file's positions, so that a refusal points at the budget's line; the bare name when it is gone."""
    try:
        return load_spec(spec_file).document
    except Exception:  # the spec was already loaded once; a refusal without a line still names the field
        return PositionedDocument(file=spec_file, data=None)


def check_at_create(session: Session, spec: Spec, existing: ClusterRecord | None, yes: bool,
                    spent: float = 0.0) -> GuardDeadline | None:
    """Refuse (exit 2, before anything is claimed or made) a budget that cannot be kept from AWS's now, or a
    destroy-compute guard not confirmed with --yes; else the guard's moment."""
    budget = spec.budget
    if budget is None:
        return None
    now = aws_now(session.ctx)
    deadline = guard_deadline(budget, usd_per_hour_max(spec), created_at(existing, now), now, spent)
    refuse_unkeepable(budget, deadline, now, _document(session.spec_file))
    if budget.on_limit == "destroy-compute" and not yes:
        queues = ", ".join(q.name for q in spec.queues)
        raise UsageError(f"budget.on_limit destroy-compute: when the guard fires ({iso(deadline.at) or 'never'}) it "
                         f"deletes the node groups of every queue ({queues}) in AWS, not only their nodes; storage and "
                         "the rest stay. Re-run with --yes to accept that, or use on_limit: stop")
    return deadline


def after_blocks(session: Session, spec: Spec, deadline: GuardDeadline) -> list[str]:
    """A warning per Capacity Block the spec names that ends before the guard fires: allowed (the block's nodes stop at
    its end anyway), and said, since the lease then is not what ends the queue."""
    from fmcluster.aws.cluster_blocks import cluster_blocks

    if deadline.at is None:
        return []
    blocks, _ = cluster_blocks(session.ctx, spec)
    fires = iso(deadline.at) or ""
    return [f"the budget guard fires {fires}, after Capacity Block {(b.get('reservation_ids') or ['?'])[0]} ends "
            f"({b['end']}; queue {', '.join(b.get('queues') or [])}): EC2 stops that queue's nodes at the block's end, "
            "before the guard" for b in blocks if b.get("end") and str(b["end"]) < fires]


# One attempt: whether the tag is active is advice, and it must not hold create up on an endpoint that cannot say.
ADVICE = aws.Patience("advice", retries=0, connect_timeout=2, read_timeout=10)


def cost_tag_warning(session: Session) -> str | None:
    """Why the Budgets backstop would see no spend: the cluster's cost-allocation tag not active (Billing user guide,
    "Activating user-defined cost allocation tags"; Cost Explorer ListCostAllocationTags); None when it is, or when
    the spec makes no budget. A failed read is said as a note, never as a failure."""
    from botocore.exceptions import BotoCoreError, ClientError

    from fmcluster.aws.guard import COST_TAG

    spec = session.spec
    if spec is None or spec.budget is None or spec.budget.max_usd is None:
        return None
    try:
        # Cost Explorer has one endpoint, in us-east-1 (Cost Explorer API reference, "Endpoints").
        answer = aws.client("ce", "us-east-1", ADVICE).list_cost_allocation_tags(TagKeys=[COST_TAG],
                                                                                 Type="UserDefined")
    except (BotoCoreError, ClientError) as exc:
        ui.note(f"whether the cost-allocation tag {COST_TAG} is active was not checked "
                f"({aws.describe_error('Cost Explorer', exc).aws_message})")
        return None
    if any(t.get("TagKey") == COST_TAG and t.get("Status") == "Active" for t in answer.get("CostAllocationTags", [])):
        return None
    return (f"the cost-allocation tag {COST_TAG} is not active, so the AWS Budgets backstop sees none of this "
            "cluster's spend: activate it with `aws ce update-cost-allocation-tags-status "
            f"--cost-allocation-tags-status TagKey={COST_TAG},Status=Active` (AWS lists a new tag key within 24 "
            "hours of its first use)")


def say_deadline(deadline: GuardDeadline, now: dt.datetime) -> None:
    """The plan's line for the guard: when it fires, on which limit, and why."""
    left = deadline.hours_left(now)
    when = f"{iso(deadline.at)} (in {left:,.2f} h)" if left is not None else "at no placeable moment"
    ui.err_console().print(f"  budget guard: fires {ui.escape(when)}, {deadline.on_limit}; "
                           f"{ui.escape(deadline.why)}", highlight=False)
    if deadline.warns_at is not None:
        ui.err_console().print(f"  budget guard: warns {iso(deadline.warns_at)} by email (SNS; each address confirms "
                               "its subscription first)", highlight=False)


def say_no_warning(deadline: GuardDeadline, notify: list[str]) -> None:
    """Said when no warning goes before the guard fires: no ``notify``, or a moment too near to warn before (never
    a schedule in the past)."""
    if not notify and deadline.at is not None:
        ui.note("no warning will be sent before the budget guard fires: add budget.notify (email addresses)")
    elif deadline.at is not None and deadline.warns_at is None:
        ui.warning(f"the budget guard fires {iso(deadline.at)}, too near to warn before it: no warning is sent "
                   f"to {', '.join(notify)}")


# What new node counts change in the guard: its schedules' moment, and the EKS stop call's maxSize.
MOVED_BY_SCALE = frozenset({"ScheduleExpression", "Target.Input"})


def say_move(session: Session) -> GuardDeadline | None:
    """Say when the guard in force fires, and when this command moves it, from when; the moment in force."""
    from fmcluster.verbs.guard_plan import decided

    deadline, previous = decided(session)
    if deadline is None:
        return None
    now = aws_now(session.ctx)
    say_deadline(deadline, now)
    if session.spec is not None and session.spec.budget is not None:
        say_no_warning(deadline, list(session.spec.budget.notify))
    if previous is not None and previous.at != deadline.at:
        ui.note(f"the budget guard moves from {iso(previous.at)} to {iso(deadline.at)} (the cap, the lease or the "
                "maximum $/h changed; what the cluster spent since is counted at the old maximum)")
    if deadline.at is not None and deadline.at <= now:
        # The moment kept from before has passed (the guard fired): schedules cannot be set in the past, and the
        # nodes come back only with a limit that lies ahead.
        raise UsageError(f"budget: the guard's moment {iso(deadline.at)} has passed (it fired on "
                         f"{deadline.decided_by}): give a later budget.expires or a higher budget.max_usd to bring "
                         "the cluster back. Nothing changed")
    if deadline.at is None:
        ui.warning("the budget guard has no moment to fire at (max_usd alone, and the cluster's maximum $/h has no "
                   "bundled price): no schedule is made; set budget.expires")
    return deadline


def status_fields(session: Session, report: dict[str, Any]) -> dict[str, Any] | None:
    """``status``'s ``budget``: the moment the guard's schedules hold (as ``create`` decided it), its countdown on
    AWS's clock with the spend so far (``usd_so_far``, already in ``report``), and, once it has passed, what the guard
    stopped and what still bills."""
    from fmcluster.verbs.guard_plan import decided

    spec = session.spec
    if spec is None or spec.budget is None:
        return None
    deadline, _ = decided(session)
    if deadline is None:
        return None
    now = aws_now(session.ctx)
    shown = deadline.as_json(now)
    left = deadline.hours_left(now)
    at = iso(deadline.at)
    shown["usd_spent"] = float(report.get("usd_so_far") or 0.0)
    shown["now"] = iso(now)
    shown["passed"] = left is not None and left <= 0
    shown["countdown"] = ("no moment can be placed" if left is None else
                          f"passed {at}" if left <= 0 else f"{left:,.1f} h left (fires {at})")
    if deadline.warns_at is not None and left is not None and left > 0:
        shown["countdown"] += f"; {'warning was due' if deadline.warns_at <= now else 'warns'} {iso(deadline.warns_at)}"
    if shown["passed"]:
        # Said from what AWS shows, not from the clock alone: a guard whose call failed (its role changed, the
        # group gone) passes its moment with the nodes still running.
        stopped = {q.name for q in spec.queues}  # what the guard stops: not EKS's system node group
        running = {str(q["name"]): int(q.get("running_instances") or 0) for q in report.get("queues") or []
                   if q["name"] in stopped}
        still = {name: count for name, count in running.items() if count}
        shown["nodes_still_running"] = sum(still.values())
        unfinished = session.backend.guard_unfinished(report)  # what node counts cannot show (a fleet's state)
        if still or unfinished:
            shown["stop_unfinished"] = unfinished
            report.setdefault("problems", []).append(
                f"the budget guard's moment {at} has passed ({deadline.decided_by} reached) but "
                + ", ".join([f"queue {name} still runs {count} node(s)" for name, count in sorted(still.items())]
                            + ([unfinished] if unfinished else []))
                + f": its stop is still under way, or its call failed (EventBridge Scheduler's TargetErrorCount "
                  f"metric for schedule group fmcluster-{session.name} says which)")
            return shown
        what = "stopped every queue (zero nodes)" if deadline.on_limit == "stop" else "deleted every queue's nodes"
        report.setdefault("problems", []).append(
            f"the budget guard fired at {at} ({deadline.decided_by} reached) and {what}; storage, the head or login "
            f"node and the control plane still bill (${float(report.get('usd_per_hour_now') or 0.0):,.2f}/hour "
            f"now); `{session.hint(f'fmcluster create {session.spec_file}')}` with a later budget.expires or a "
            "higher budget.max_usd brings the nodes back")
    return shown
