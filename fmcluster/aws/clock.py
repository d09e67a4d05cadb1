"""AWS's time, for the budget guard: the ``Date`` header of an AWS answer (RFC 7231 §7.1.1.2: the moment the
server made the response), not the laptop's clock.

The guard fires by EventBridge Scheduler's clock; whether its deadline has passed, and how long is left, must be
measured on the same side, or a laptop whose clock drifts would report a guard as pending after it fired (or the
reverse). The sandbox's ``Date`` follows its movable clock, so the tests see the same.
"""

from __future__ import annotations

import datetime as dt
from email.utils import parsedate_to_datetime
from typing import Any

from fmcluster.engine import reads


def date_of(response: dict[str, Any]) -> dt.datetime | None:
    """The ``Date`` header of a boto3 response, in UTC; None when it has none or it does not parse."""
    header = (response.get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
    if not header:
        return None
    try:
        moment = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)).astimezone(dt.timezone.utc)


def aws_now(ctx: Any) -> dt.datetime:
    """Now, as AWS says it: the Date of an STS GetCallerIdentity answer (the one call every principal may make), read
    once per read-only pass. The laptop's clock only when AWS's answer carries no Date."""
    answer = reads.once(ctx, "sts.CallerIdentity", "", lambda: ctx.client("sts").get_caller_identity())
    return date_of(answer or {}) or dt.datetime.now(dt.timezone.utc)
