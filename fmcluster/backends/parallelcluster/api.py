"""ParallelCluster's own Python API, ``pcluster.lib`` (never the ``pcluster`` command): loading it quietly,
turning its exceptions into one clear message, and reading a failed stack's reasons."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fmcluster.backends.parallelcluster.call_logging import log_calls_only_when_logging
from fmcluster.backends.parallelcluster.nodejs import quiet_jsii_banner
from fmcluster.connection.aws import describe_error, patient_default_clients, unreachable
from fmcluster.engine import EngineFailed
from fmcluster.engine.waiting import Stop, WaitTimedOut, growing, wait_until
from fmcluster.errors import AwsError, FmclusterError

PHASES = {
    "CREATE_IN_PROGRESS": "pending", "UPDATE_IN_PROGRESS": "pending", "DELETE_IN_PROGRESS": "pending",
    "CREATE_COMPLETE": "ready", "UPDATE_COMPLETE": "ready", "CREATE_FAILED": "failed",
    "UPDATE_FAILED": "failed", "DELETE_FAILED": "failed",
}
# STOPPED is settled (ready); the fleet's ``changes`` then asks for it to be started again.
FLEET_PHASES = {"RUNNING": "ready", "STOPPED": "ready", "STOP_REQUESTED": "pending",
                 "STOPPING": "pending", "START_REQUESTED": "pending", "STARTING": "pending",
                 "PROTECTED": "failed", "ENABLED": "ready", "DISABLED": "pending", "UNKNOWN": "pending"}


@contextmanager
def pcluster() -> Iterator[Any]:
    """pcluster.lib, with its root-logger chatter kept out of the user's terminal."""
    import asyncio

    import pcluster.lib as pc

    _quiet_cdk_preload()
    log_calls_only_when_logging()
    quiet_jsii_banner()
    patient_default_clients()  # its boto3 clients get the command's patience (WRITING: they ride out throttling)
    # The engine calls from worker threads; ParallelCluster's CDK step (jsii) wants an event loop there.
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())

    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)  # its errors reach the user once, through api_error
    try:
        yield pc
    finally:
        logging.disable(previous)


def _quiet_cdk_preload() -> None:
    """pcluster preloads the CDK in a background thread; if the command ends first (say, a config that
    fails validation), that thread dies noisily at exit. Its failure changes nothing: keep it off screen."""
    import threading

    previous = threading.excepthook
    if getattr(previous, "_fmcluster", False):
        return

    def hook(args: Any) -> None:
        if args.thread is not None and "import_cdk" in args.thread.name:
            return
        previous(args)

    hook._fmcluster = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def content_of(exc: Exception) -> Any:
    return getattr(exc, "content", None)


def api_error(resource: str, exc: Exception, hint: str = "",
               locate: Callable[[str], str | None] | None = None) -> FmclusterError:
    """A pcluster.lib exception as one message, ParallelCluster's validation findings grouped by level,
    each with the spec position it is about where ``locate`` can tell."""
    content = content_of(exc)
    if content is None:
        return describe_error(resource, exc, hint)
    lines = [getattr(content, "message", None) or type(exc).__name__]
    dead = unreachable(resource, lines[0])  # ParallelCluster passes on botocore's connection error as text
    if dead is not None:
        return dead
    findings = (getattr(content, "configuration_validation_errors", None) or []) + \
        (getattr(content, "update_validation_errors", None) or [])
    by_level: dict[str, list[str]] = {}
    for item in findings:
        text = getattr(item, "message", str(item))
        where = getattr(item, "parameter", None)
        by_level.setdefault(str(getattr(item, "level", "ERROR") or "ERROR"), []).append(
            f"{getattr(item, 'type', '') or where or ''}: {text}".strip(": "))
    for level in ("ERROR", "WARNING", "INFO"):
        for text in by_level.get(level, []):
            where = locate(text) if locate else None
            lines.append(f"{level}: {text}" + (f"\n    ← {where}" if where else ""))
    return AwsError(resource, type(exc).__name__.removesuffix("Exception"), "\n".join(lines), hint)


def failure_detail(pc: Any, name: str, region: str, described: dict[str, Any]) -> str:
    parts = [f"{f.get('failureCode')}: {f.get('failureReason')}" for f in described.get("failures") or []]
    try:
        events = pc.get_cluster_stack_events(cluster_name=name, region=region)["events"]
    except Exception:  # the stack may already be rolling back or gone; the failures above still stand
        events = []
    failed = [e for e in events if str(e.get("resourceStatus", "")).endswith("FAILED")][:5]
    parts += [f"{e.get('logicalResourceId')} {e.get('resourceStatus')}: {e.get('resourceStatusReason', '')}"
              for e in failed]
    return "; ".join(parts)


def latest_event(pc: Any, name: str, region: str) -> str:
    try:
        events = pc.get_cluster_stack_events(cluster_name=name, region=region)["events"]
    except Exception:  # progress detail only; never fail a poll over it
        return ""
    if not events:
        return ""
    newest = events[0]
    return f"{newest.get('logicalResourceId')} {newest.get('resourceStatus')}"


def set_fleet(pc: Any, name: str, region: str, request: str, until: str, stop: Stop, timeout: float = 1800) -> None:
    """Request a compute-fleet state change and wait for it (ParallelCluster's fleet-stop dance), pausing on the
    command's ``stop``."""
    try:
        pc.update_compute_fleet(cluster_name=name, status=request, region=region)
    except Exception as exc:
        raise api_error(f"compute_fleet:{name}", exc) from None
    try:
        wait_until(lambda: pc.describe_compute_fleet(cluster_name=name, region=region)["status"] == until,
                   what=f"the compute fleet of {name} to reach {until}", timeout=timeout,
                   interval=growing(minimum=0.5, maximum=10.0, growth=0.15), stop=stop)
    except WaitTimedOut as exc:
        raise EngineFailed(str(exc)) from None


