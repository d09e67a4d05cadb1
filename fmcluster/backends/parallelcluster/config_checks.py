"""Check a rendered ParallelCluster config with ParallelCluster's own schema and validators."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fmcluster.backends.parallelcluster.call_logging import log_calls_only_when_logging
from fmcluster.backends.parallelcluster.nodejs import quiet_jsii_banner

# No validator is suppressed, in the sandbox or on AWS: the sandbox emulates what they read (launch-template
# dry runs, key pair types, AMIs, capacity reservations), so create_cluster(dryrun=True) passes or fails there
# as it would on AWS. A validator the sandbox cannot serve is a sandbox gap to fix, not one to switch off.


@dataclass
class PclusterFindings:
    """ParallelCluster's verdict, grouped by level (ERROR, WARNING, INFO)."""

    by_level: dict[str, list[str]] = field(default_factory=dict)

    @property
    def errors(self) -> list[str]:
        return self.by_level.get("ERROR", [])

    def add(self, level: str, message: str) -> None:
        self.by_level.setdefault(level, []).append(message)


@contextlib.contextmanager
def _quiet_pcluster() -> Iterator[None]:
    # ParallelCluster logs to the root logger while it loads; the findings are what matter to the user.
    quiet_jsii_banner()
    log_calls_only_when_logging()
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def check_schema(cluster_name: str, config: dict[str, Any], region: str) -> PclusterFindings:
    """Load the config with ParallelCluster 3's ClusterSchema (no AWS call needed)."""
    from marshmallow import ValidationError
    from pcluster.schemas.cluster_schema import ClusterSchema

    # ParallelCluster's models read the region from the environment while they load.
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
    findings = PclusterFindings()
    with _quiet_pcluster():
        try:
            ClusterSchema(cluster_name=cluster_name).load(config)
        except ValidationError as exc:
            for line in _flatten(exc.messages):
                findings.add("ERROR", line)
    return findings


def check_with_validators(cluster_name: str, config: dict[str, Any], region: str) -> PclusterFindings:
    """Run every ParallelCluster validator through ``pcluster.lib.create_cluster(dryrun=True)``.

    Needs an AWS endpoint (real, or the sandbox).
    """
    import pcluster.lib as pc
    from pcluster.api.errors import DryrunOperationException

    findings = PclusterFindings()
    with _quiet_pcluster():
        try:
            pc.create_cluster(
                cluster_name=cluster_name,
                cluster_configuration=config,  # a str would be read as a file path
                region=region,
                validation_failure_level="WARNING",
                dryrun=True,
            )
        except DryrunOperationException as exc:  # every validator passed (warnings may remain)
            _collect(exc, findings)
        except Exception as exc:  # pcluster.lib raises its API exceptions with a content model
            _collect(exc, findings)
    return findings


def _collect(exc: Exception, findings: PclusterFindings) -> None:
    data = getattr(exc, "content", None)
    for item in getattr(data, "validation_messages", None) or []:
        findings.add(str(item.level), f"{item.type}: {item.message}")
    messages = getattr(data, "configuration_validation_errors", None) or []
    for item in messages:
        findings.add(str(item.level), f"{item.type}: {item.message}")
    if not messages and type(exc).__name__ != "DryrunOperationException":
        message = getattr(data, "message", None) or str(exc)
        findings.add("ERROR", f"{type(exc).__name__}: {message}")


def _flatten(messages: Any, prefix: str = "") -> list[str]:
    if isinstance(messages, dict):
        lines = []
        for key, value in messages.items():
            lines.extend(_flatten(value, f"{prefix}{key}." if not isinstance(key, int) else f"{prefix}[{key}]."))
        return lines
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        return [f"{prefix.rstrip('.')}: {m}" for m in messages]
    if isinstance(messages, list):
        return [line for m in messages for line in _flatten(m, prefix)]
    return [f"{prefix.rstrip('.')}: {messages}"]
