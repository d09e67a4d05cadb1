"""What every preflight check shares: the context it reads, and how an AWS refusal becomes a result."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fmcluster.aws.placement import Placement
from fmcluster.checks import CheckResult
from fmcluster.connection.aws import describe_error
from fmcluster.errors import AwsError, FmclusterError
from fmcluster.spec.models import Spec

FIX = "fix: "


def fix(text: str) -> str:
    """A detail line that tells the user what to do; the UI and tests find it by its prefix."""
    return FIX + text


@dataclass(frozen=True)
class BackendChecks:
    """What preflight asks of the spec's backend: ``CHECKS`` in ``fmcluster/backends/<name>/preflight.py``. Preflight
    sits below the backends: the caller hands the backend's in (``Backend.checks``, from the registry)."""

    # Its own checks; the flag says whether AWS answered the credentials check (checks that call AWS skip
    # otherwise, local ones still run).
    run: Callable[[Context, bool], list[CheckResult]]
    display: str  # how messages name the backend
    # The AWS service whose interface endpoint lets nodes register without a NAT route ("pcs"), if any.
    registration_service: str | None = None
    # The status of multi-interface nodes that could not reach out: "failed" where the backend then fails.
    unreachable_nodes: str = "warning"


@dataclass
class Context:
    """The spec, where it goes, and what the earlier checks learned (account, placement)."""

    spec: Spec
    region: str
    client: Callable[[str], Any]
    account: str | None = None
    placement: Placement | None = None
    head_zone: str | None = None
    # The spec's backend's checks, handed in by the caller (run_preflight); a check that needs them asks
    # :meth:`backend_checks`.
    backend: BackendChecks | None = None
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    def backend_checks(self) -> BackendChecks:
        if self.backend is None:
            raise RuntimeError("this check needs the spec's backend's checks")
        return self.backend

    def aws(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.client(service)
        return self._clients[service]

    def compute_placement(self, queue: Any) -> tuple[str, str] | None:
        """(subnet, zone) where a queue's nodes launch: its own subnet's, else network.subnet_id's; None when
        that subnet cannot be read (its own check reports why). The subnet is its id, or for a network fmcluster
        creates the words that name it (its id does not exist before create)."""
        if not queue.subnet_id:
            if self.placement is None:
                return None
            subnet = (f"fmcluster will create in {self.placement.availability_zone}" if self.placement.created
                      else self.placement.subnet_id)
            return subnet, self.placement.availability_zone
        try:
            subnets = self.aws("ec2").describe_subnets(SubnetIds=[queue.subnet_id])["Subnets"]
        except aws_errors():
            return None
        return (queue.subnet_id, subnets[0]["AvailabilityZone"]) if subnets else None


def aws_failure(name: str, resource: str, exc: BaseException, fix_text: str = "") -> CheckResult:
    """A failed result carrying AWS's own code and message, and the fix."""
    error = exc if isinstance(exc, AwsError) else describe_error(resource, exc)
    hint = fix_text or error.hint
    message = error.aws_message.strip().split("\n")[0]  # an unparseable answer carries its whole body
    return CheckResult(name, "failed", f"{resource}: AWS said {error.code}: {message}",
                       [fix(hint)] if hint else [])


def aws_errors() -> tuple[type[BaseException], ...]:
    """What boto3 raises when AWS (or the endpoint) says no or cannot be understood."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    return ClientError, BotoCoreError, ResponseParserError


def aws_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", type(exc).__name__))


def guarded(name: str, resource: str = "") -> Callable:
    """Run a check; an AWS error (or an fmcluster error from a helper) becomes one failed result."""

    def wrap(check: Callable[[Context], list[CheckResult]]) -> Callable[[Context], list[CheckResult]]:
        @functools.wraps(check)
        def run(ctx: Context) -> list[CheckResult]:
            try:
                return check(ctx)
            except (*aws_errors(), FmclusterError) as exc:
                if isinstance(exc, FmclusterError) and not hasattr(exc, "code"):
                    return [CheckResult(name, "failed", str(exc).split("\n")[0], [])]
                return [aws_failure(name, resource or name, exc)]

        return run

    return wrap
