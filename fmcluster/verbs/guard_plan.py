"""When the cluster's guard fires, decided once and kept, and the guard's resources for the session's spec.

The spend limit's moment depends on "now" and on what the cluster has cost; computed afresh at each read it would
drift by the seconds between two commands, and ``diff`` would never be in sync. So the moment is decided when the
budget or the cluster's maximum rate changes, from AWS's clock, and recorded in the state with what it was decided
from (the pseudo-resource ``guard:deadline``) once ``create`` or ``scale`` has installed it; every later reader
recomputes the same moment from that record. Spend since the last decision is counted at the old maximum rate:
never less than the cluster spent, so a moved guard never fires late.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from fmcluster.aws.clock import aws_now
from fmcluster.pricing.deadline import GuardDeadline, guard_deadline, iso
from fmcluster.pricing.model import usd_per_hour_max

if TYPE_CHECKING:
    from fmcluster.engine import Resource
    from fmcluster.verbs.session import Session

KIND, KEY = "guard", "deadline"


def _created(session: Session, now: dt.datetime) -> dt.datetime:
    record = session.record or session.store.cluster(session.name, session.region)
    return dt.datetime.fromtimestamp(record.created_at, dt.timezone.utc) if record is not None else now


def decided(session: Session) -> tuple[GuardDeadline | None, GuardDeadline | None]:
    """(the moment in force, the one recorded before when this decision moves it; else None)."""
    spec = session.spec
    if spec is None or spec.budget is None:
        return None, None
    budget = spec.budget
    rate = usd_per_hour_max(spec)
    basis = {"max_usd": budget.max_usd, "expires": budget.expires, "usd_per_hour_max": rate}
    kept = session.store.resource(session.name, session.region, KIND, KEY)
    # This command's own decision first: every step of one command installs the same moment.
    kept_outputs: dict[str, Any] = session.guard_pending or (dict(kept.outputs) if kept is not None else {})
    previous = _from(session, kept_outputs) if kept_outputs else None
    if kept_outputs.get("basis") == basis and previous is not None:
        return previous, session.guard_moved_from
    now = aws_now(session.ctx)
    spent = 0.0
    if kept_outputs:  # spent since then, at the maximum rate of then (an upper bound: the guard moves earlier)
        since = dt.datetime.fromisoformat(kept_outputs["decided_at"])
        spent = kept_outputs["usd_spent"] + (kept_outputs["basis"].get("usd_per_hour_max") or 0.0) * max(
            0.0, (now - since).total_seconds() / 3600)
    created = kept_outputs.get("created_at") or _created(session, now).isoformat()
    outputs = {"basis": basis, "decided_at": now.isoformat(), "usd_spent": round(spent, 4), "created_at": created}
    session.guard_pending = outputs  # kept in the state once the walk has installed it (:func:`keep`)
    session.guard_moved_from = previous  # said once by the command, whichever of its steps decided it
    return _from(session, outputs), previous


def keep(session: Session) -> None:
    """Record the moment this command installed, so that later commands (and ``diff``, which installs nothing and
    records nothing) read the same one."""
    if session.guard_pending is not None and not session.store.readonly:
        session.store.record_resource(session.name, session.region, KIND, KEY, None, "resolved",
                                      session.guard_pending)


def _from(session: Session, outputs: dict[str, Any]) -> GuardDeadline | None:
    spec = session.spec
    if spec is None or spec.budget is None:
        return None
    at = dt.datetime.fromisoformat(outputs["decided_at"])
    created = dt.datetime.fromisoformat(outputs["created_at"]) if outputs.get("created_at") else _created(session, at)
    return guard_deadline(spec.budget, outputs["basis"].get("usd_per_hour_max"), created, at,
                          float(outputs.get("usd_spent") or 0.0))


def guard_resources(session: Session) -> list[Resource]:
    """The guard's resources for the session's spec ([] without a budget, or with no moment to place)."""
    from fmcluster.aws.guard import account_of, at_expression, guard_documents, guard_resources
    from fmcluster.aws.guard_warning import publish_statement, warning_documents
    from fmcluster.render.common import resource_tags

    spec = session.spec
    deadline, _ = decided(session)
    if spec is None or spec.budget is None or deadline is None or deadline.at is None:
        return []
    calls = session.backend.guard_calls(spec, spec.budget.on_limit, iso(deadline.at) or "")
    account, tags = account_of(session.ctx), resource_tags(spec)
    # warns_at is None without notify, or with a moment too near to warn before (pricing.deadline.guard_deadline)
    extra = (publish_statement(spec.name, session.region, account),) if deadline.warns_at is not None else ()
    documents = guard_documents(spec.name, session.region, account, tags, calls, deadline.at,
                                spec.budget.max_usd, list(spec.budget.notify), extra)
    if deadline.warns_at is not None:
        subject, message = warning_text(spec.name, session.region, deadline)
        documents += warning_documents(spec.name, session.region, account, tags, list(spec.budget.notify),
                                       deadline.warns_at, subject, message, at_expression(deadline.warns_at))
    return guard_resources(documents)


def warning_text(cluster: str, region: str, deadline: GuardDeadline) -> tuple[str, str]:
    """The warning's subject and message: which cluster, when it stops, what the guard does, how to move it. No
    spec path (the laptop's, which would make the schedule drift between two machines)."""
    from fmcluster.cost_report.figures import ON_LIMIT_DOES

    at = iso(deadline.at) or ""
    subject = f"fmcluster {cluster}: the budget guard fires at {at}"
    message = (f"The budget guard of fmcluster cluster {cluster} ({region}) fires at {at} "
               f"({deadline.decided_by} reached). on_limit {deadline.on_limit}: {ON_LIMIT_DOES[deadline.on_limit]}.\n"
               f"To move the moment, give the spec a later budget.expires or a higher budget.max_usd and run "
               f"`fmcluster create <spec file>`; `fmcluster status {cluster}` counts it down.")
    return subject, message
