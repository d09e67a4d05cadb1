"""The spec's ``budget`` section: a spend cap and a lease, both held by a guard that fmcluster puts into AWS.

``expires`` is either a time with a zone or a duration counted from the cluster's creation (so that re-running
``create`` never pushes it later). When the guard fires is computed in :mod:`fmcluster.pricing.deadline`; whether
that moment is still ahead is decided there too, never here: a stored spec has to keep loading after its deadline
has passed, so that ``status`` can say the guard fired.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, StringConstraints, model_validator

from fmcluster.spec.backend_rules import backend_rules
from fmcluster.spec.field_types import Strict
from fmcluster.spec.positions import Path_

if TYPE_CHECKING:
    from fmcluster.spec.models import Spec

# A whole or decimal number of minutes, hours or days: "90m", "72h", "3d", "1.5h".
DURATION = re.compile(r"^(\d+(?:\.\d+)?)(m|h|d)$")
SECONDS_PER_UNIT = {"m": 60, "h": 3600, "d": 86400}
# AWS Budgets: "Each notification can have one SNS subscriber and up to 10 email subscribers" (AWS Cost
# Management user guide, "Creating a budget" / Budgets API CreateNotification, Subscribers max 11 with one SNS).
MAX_EMAIL_SUBSCRIBERS = 10
OnLimit = Literal["stop", "destroy-compute"]


def _expires_text(value: Any) -> Any:
    """YAML reads an unquoted ISO time as a datetime (and a bare date as a date): both become the text the stored
    spec keeps; a time without a zone is refused, since nobody can tell which clock it means."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ValueError(f"{value.isoformat()} has no zone: add Z (UTC) or an offset such as +01:00 (which "
                             "clock is meant cannot be guessed)")
        return value.isoformat()
    if isinstance(value, dt.date):
        raise ValueError("a date alone is not a time: write the time and its zone (e.g. "
                         f"{value.isoformat()}T18:00:00Z) or a duration (72h)")
    if isinstance(value, str):
        text = value.strip()
        duration = DURATION.match(text)
        if duration is not None:
            if float(duration.group(1)) <= 0:
                raise ValueError("a duration must be longer than zero")
            return text
        try:
            parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"'{value}' is neither a duration (90m, 72h, 3d) nor an ISO 8601 time with a zone "
                             "(2026-12-09T18:00:00Z)") from None
        if parsed.tzinfo is None:
            raise ValueError(f"'{value}' has no zone: add Z (UTC) or an offset such as +01:00")
        return text
    return value


def expires_after(expires: str) -> dt.timedelta | None:
    """The duration ``expires`` names, or None when it is a time."""
    found = DURATION.match(expires)
    if found is None:
        return None
    return dt.timedelta(seconds=float(found.group(1)) * SECONDS_PER_UNIT[found.group(2)])


def expires_at(expires: str, created_at: dt.datetime) -> dt.datetime:
    """The moment ``expires`` names: a time as written, or a duration from the cluster's creation."""
    after = expires_after(expires)
    if after is not None:
        return created_at + after
    return dt.datetime.fromisoformat(expires.replace("Z", "+00:00")).astimezone(dt.timezone.utc)


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


# The shape of an address AWS Budgets can mail; AWS checks the rest when it sends.
Email = Annotated[str, StringConstraints(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=320)]
Expires = Annotated[str, BeforeValidator(_expires_text)]


class Budget(Strict):
    max_usd: float | None = Field(
        None, gt=0, description="Spend cap in US dollars for the cluster's whole life. The guard fires when the "
        "cluster, at its maximum $/h (every queue at max plus every fixed part that bills, as `plan` prices it), "
        "would reach it; `status` shows the spend so far.")
    expires: Expires | None = Field(
        None, description="The cluster's lease: an ISO 8601 time with its zone (2026-12-09T18:00:00Z), or a "
        "duration (90m, 72h, 3d) counted from the cluster's creation, so re-running create does not push it. The "
        "guard fires at the earlier of this and the spend cap's moment.")
    on_limit: OnLimit = Field(
        "stop", description="What the guard does when it fires. stop: every queue to zero nodes (storage, the "
        "head/login node and the control plane stay, and bill). destroy-compute: the queues' node groups are "
        "deleted too (pcs, eks; create asks for --yes).")
    notify: Annotated[list[Email], BeforeValidator(_as_list)] = Field(
        default_factory=list, max_length=MAX_EMAIL_SUBSCRIBERS,
        description="Email address(es) warned before the guard fires (an SNS topic the guard's schedule publishes "
        "to, 1 h before, or a quarter of a shorter lease; each address confirms AWS's subscription mail once), and "
        "that the AWS Budgets backstop notifies at 80% and 100% of max_usd (actual spend on the cluster's "
        "cost-allocation tag); at most 10.")

    @model_validator(mode="after")
    def _a_limit(self) -> Budget:
        if self.max_usd is None and self.expires is None:
            raise ValueError("a budget needs max_usd, expires or both: without either the guard never fires")
        return self


def check_budget(spec: Spec, error: Callable[[Path_, str], None], warn: Callable[[Path_, str], None]) -> None:
    """What the backend's guard cannot do (``on_limit`` it has no call for), said at the field."""
    if spec.budget is None:
        return
    problem = backend_rules(spec.backend).on_limit_problem(spec.budget.on_limit)
    if problem:
        error(("budget", "on_limit"), problem)
