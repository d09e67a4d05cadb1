"""What ParallelCluster logs for a cluster, through ``pcluster.lib``: its stack's CloudFormation events and
its CloudWatch log streams."""

from __future__ import annotations

import datetime
from typing import Any

from fmcluster.backends.parallelcluster.api import api_error, content_of, pcluster
from fmcluster.backends.protocol import LogLine


def epoch(value: object) -> float:
    """ISO 8601 (what pcluster.lib returns), a datetime, or milliseconds (CloudWatch) → seconds."""
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if isinstance(value, (int, float)):
        return value / 1000 if value > 1e11 else float(value)
    return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def cluster_logs(name: str, region: str, since: float | None, lines: int) -> tuple[list[LogLine], list[str]]:
    """The last ``lines`` stack events and, per log stream, the last ``lines`` events (after ``since``)."""
    out: list[LogLine] = []
    with pcluster() as pc:
        try:
            events, token = [], None
            while True:
                page = pc.get_cluster_stack_events(cluster_name=name, region=region,
                                                   **({"next_token": token} if token else {}))
                events += page.get("events") or []
                token = page.get("nextToken") or page.get("next_token")
                if not token:
                    break
        except Exception as exc:
            if type(exc).__name__ == "NotFoundException":
                return [], [f"ParallelCluster has no cluster {name} in {region}"]
            raise api_error(f"pcluster_cluster:{name}", exc) from None
        for event in sorted(events, key=lambda e: epoch(e["timestamp"]))[-lines:]:
            reason = event.get("resourceStatusReason")
            out.append(LogLine(epoch(event["timestamp"]), "cloudformation",
                               f"{event.get('logicalResourceId')} {event.get('resourceStatus')}"
                               + (f": {reason}" if reason else "")))
        try:
            streams = pc.list_cluster_log_streams(cluster_name=name, region=region).get("logStreams") or []
        except Exception as exc:  # logging off, or no log group yet: say so, keep the stack events
            message = getattr(content_of(exc), "message", None) or exc
            return out, [f"no CloudWatch log streams for {name}: {message}"]
        start: dict[str, Any] = {}
        if since:
            start["start_time"] = datetime.datetime.fromtimestamp(since, datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        for item in streams:
            stream = item["logStreamName"]
            page = pc.get_cluster_log_events(cluster_name=name, log_stream_name=stream, region=region,
                                             start_from_head=False, limit=lines, **start)
            out += [LogLine(epoch(e["timestamp"]), stream, str(e.get("message", "")).rstrip())
                    for e in page.get("events") or []]
    return out, [] if streams else [f"the CloudWatch log group of {name} has no streams yet"]
