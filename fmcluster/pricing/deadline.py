"""When the budget guard fires: the earlier of the lease (``budget.expires``) and the moment the cluster, billing at
its maximum $/h, would have spent what is left of ``budget.max_usd``. Pure: the clock and the spend come in.

The maximum rate is :func:`fmcluster.pricing.model.usd_per_hour_max` (every queue at its maximum plus every part that
bills): the guard must fire no later than the cap, so it assumes the cluster runs flat out. The spend moment is
rounded down to the whole second (EventBridge Scheduler's ``at()`` takes seconds): early by under a second, never
late.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any, Literal

from fmcluster.errors import SpecError
from fmcluster.spec.budget import Budget, expires_after, expires_at
from fmcluster.spec.positions import PositionedDocument

Limit = Literal["expires", "max_usd"]


@dataclass(frozen=True)
class GuardDeadline:
    at: dt.datetime | None  # when the guard fires; None when neither limit can be placed (no price)
    decided_by: Limit | None
    expires_at: dt.datetime | None
    spend_at: dt.datetime | None  # when max_usd is reached at the maximum rate
    max_usd: float | None
    usd_spent: float
    usd_per_hour_max: float | None
    on_limit: str
    why: str  # one sentence: which limit decides and the arithmetic behind it
    # When the guard's warning goes to ``notify`` (None: no notify, or a moment too near to warn before)
    warns_at: dt.datetime | None = None

    def hours_left(self, now: dt.datetime) -> float | None:
        return (self.at - now).total_seconds() / 3600 if self.at is not None else None

    def as_json(self, now: dt.datetime) -> dict[str, Any]:
        left = self.hours_left(now)
        return {"fires_at": iso(self.at), "decided_by": self.decided_by, "expires_at": iso(self.expires_at),
                "spend_at": iso(self.spend_at), "max_usd": self.max_usd, "usd_spent": self.usd_spent,
                "usd_per_hour_max": self.usd_per_hour_max, "on_limit": self.on_limit,
                "hours_left": round(left, 4) if left is not None else None, "why": self.why,
                "warns_at": iso(self.warns_at)}


def iso(moment: dt.datetime | None) -> str | None:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None


def guard_deadline(budget: Budget, usd_per_hour_max: float | None, created_at: dt.datetime, now: dt.datetime,
                   usd_spent: float = 0.0) -> GuardDeadline:
    """When ``budget``'s guard fires for a cluster created at ``created_at`` that has cost ``usd_spent`` by
    ``now`` and bills at most ``usd_per_hour_max``."""
    lease = expires_at(budget.expires, created_at) if budget.expires is not None else None
    spend = None
    reasons = []
    if budget.max_usd is not None:
        left = budget.max_usd - usd_spent
        if usd_per_hour_max:
            seconds = max(0.0, left) / usd_per_hour_max * 3600
            spend = _whole_second(now) + dt.timedelta(seconds=math.floor(seconds))
            reasons.append(f"max_usd ${budget.max_usd:,.2f} − ${usd_spent:,.2f} spent = ${left:,.2f} at "
                           f"${usd_per_hour_max:,.2f}/h max lasts {seconds / 3600:.2f} h")
        else:
            reasons.append("max_usd cannot be placed in time: the cluster's maximum $/h has no bundled price")
    if lease is not None:
        after = expires_after(budget.expires or "")
        reasons.append(f"expires {budget.expires}" + (" after creation" if after is not None else ""))
    candidates: list[tuple[dt.datetime, Limit]] = [(m, k) for m, k in ((lease, "expires"), (spend, "max_usd"))
                                                    if m is not None]
    if not candidates:
        return GuardDeadline(None, None, lease, spend, budget.max_usd, usd_spent, usd_per_hour_max,
                             budget.on_limit, "; ".join(reasons))
    # On a tie the lease decides: it is what the user wrote as a time.
    at, decided = min(candidates, key=lambda c: (c[0], c[1] != "expires"))
    return GuardDeadline(at, decided, lease, spend, budget.max_usd, usd_spent, usd_per_hour_max, budget.on_limit,
                         f"{decided} decides: " + "; ".join(reasons),
                         warning_at(at, created_at, now) if budget.notify else None)


# The warning goes an hour before the guard fires: time to read the mail and run `create` with a later lease or a
# higher cap. A lease shorter than four hours is warned a quarter of its length before (15 min on a 1 h lease), so
# that the warning does not come at, or before, the cluster's start.
WARN_LEAD = dt.timedelta(hours=1)
WARN_FRACTION = 4


def warning_at(fires_at: dt.datetime, created_at: dt.datetime, now: dt.datetime) -> dt.datetime | None:
    """When the guard's warning is sent, to the whole second; None when that is not after ``now`` (a moment
    decided too near to warn before it: never a schedule in the past)."""
    lead = min(WARN_LEAD, (fires_at - created_at) / WARN_FRACTION)
    warn = fires_at - dt.timedelta(seconds=math.floor(lead.total_seconds()))
    return warn if warn > now else None


def _whole_second(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.timezone.utc).replace(microsecond=0)


def budget_refusals(budget: Budget, deadline: GuardDeadline, now: dt.datetime) -> list[tuple[str, str]]:
    """(field, why) for a budget that cannot be kept from ``now``: a lease already over, or a cap the cluster
    has already spent. Checked by the commands that install the guard, not at load (a stored spec still loads after
    its deadline, so that ``status`` can say the guard fired)."""
    problems = []
    if deadline.expires_at is not None and deadline.expires_at <= now:
        problems.append(("expires", f"the lease ends {iso(deadline.expires_at)}, which is not after now "
                                    f"({iso(now)}): give a later time or a longer duration"))
    if budget.max_usd is not None and budget.max_usd <= deadline.usd_spent:
        problems.append(("max_usd", f"the cap ${budget.max_usd:,.2f} is at or below what the cluster has already "
                                    f"cost (${deadline.usd_spent:,.2f}): raise it above that"))
    return problems


def refuse_unkeepable(budget: Budget, deadline: GuardDeadline, now: dt.datetime,
                      document: PositionedDocument) -> None:
    """Raise :class:`SpecError` (exit 2) at the budget's fields when it cannot be kept from ``now``."""
    problems = budget_refusals(budget, deadline, now)
    if problems:
        raise SpecError([document.problem(("budget", name), why) for name, why in problems])
