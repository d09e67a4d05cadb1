"""``fmcluster preflight``: check the account before creating anything, and say how to fix what is wrong.

Each check returns :class:`fmcluster.checks.CheckResult` items; a failed one carries AWS's code and
message, and a detail line starting with ``fix: ``. An AWS error inside a check is a failed result,
never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fmcluster.checks import CheckResult
from fmcluster.preflight.capacity import check_quotas, check_reservations
from fmcluster.preflight.checks import (
    check_buckets,
    check_credentials,
    check_key_pair,
    check_offerings,
    check_subnet,
)
from fmcluster.preflight.common import FIX, BackendChecks, Context
from fmcluster.preflight.reservation_topology import check_reservation_topology
from fmcluster.preflight.storage import check_existing_storage
from fmcluster.spec.models import Spec

__all__ = ["FIX", "CheckResult", "preflight_failed", "run_preflight"]


def run_preflight(spec: Spec, region: str, client: Callable[[str], Any], backend: BackendChecks) -> list[CheckResult]:
    """Every preflight check, in order. ``client(service)`` returns a boto3 client for ``region``; ``backend`` is
    the spec's backend's checks (``registry.get(spec.backend).checks``)."""
    ctx = Context(spec=spec, region=region, client=client, backend=backend)
    results = check_credentials(ctx)
    aws_answered = not preflight_failed(results)
    if not aws_answered:
        results.append(CheckResult("aws checks", "skipped", "need working credentials and endpoint first"))
    else:
        for check in (check_subnet, check_offerings, check_quotas, check_reservations, check_reservation_topology,
                      check_key_pair, check_buckets, check_existing_storage):
            results += check(ctx)
    results += backend.run(ctx, aws_answered)
    return results


def preflight_failed(results: Iterable[CheckResult]) -> bool:
    return any(result.status == "failed" for result in results)
