"""Keep ParallelCluster's per-call log line from costing a boto3 Session per AWS call."""

from __future__ import annotations

import logging
from typing import Any


def log_calls_only_when_logging() -> None:
    """pcluster registers ``pcluster.aws.common._log_boto3_calls`` on every client it makes, and that handler builds
    a new boto3 Session on each AWS call (the default of its ``context.get("client_region", Session().region_name)``
    is evaluated first): tens of milliseconds per call, for an INFO line that fmcluster turns off while pcluster works
    (its findings reach the user another way). The replacement calls it only when the line would be logged; the
    clients pcluster makes from now on register it."""
    from pcluster.aws import common

    original = common._log_boto3_calls
    if getattr(original, "_fmcluster", False):
        return

    def log_boto3_calls(params: Any, **kwargs: Any) -> None:
        if common.LOGGER.isEnabledFor(logging.INFO):
            original(params, **kwargs)

    log_boto3_calls._fmcluster = True  # type: ignore[attr-defined]
    common._log_boto3_calls = log_boto3_calls
