"""What PCS logs for a cluster: its scheduler and job-completion logs, where a CloudWatch Logs delivery sends
them to a log group (PCS vends them through CloudWatch Logs deliveries; fmcluster does not set one up)."""

from __future__ import annotations

from typing import Any

from fmcluster.backends.protocol import LogLine

SCHEDULER_LOGS_PAGE = "https://docs.aws.amazon.com/pcs/latest/userguide/monitoring_scheduler-logs.html"


def cluster_logs(ctx: Any, cluster: dict[str, Any], since: float | None,
                 lines: int) -> tuple[list[LogLine], list[str]]:
    logs = ctx.client("logs")
    sources = {s["name"] for page in logs.get_paginator("describe_delivery_sources").paginate()
               for s in page.get("deliverySources", []) if cluster["arn"] in (s.get("resourceArns") or [])}
    groups = []
    for page in logs.get_paginator("describe_deliveries").paginate():
        for delivery in page.get("deliveries", []):
            if delivery.get("deliverySourceName") not in sources:
                continue
            name = delivery["deliveryDestinationArn"].rsplit(":", 1)[-1].removeprefix("delivery-destination/")
            destination = logs.get_delivery_destination(name=name)["deliveryDestination"]
            arn = destination.get("deliveryDestinationConfiguration", {}).get("destinationResourceArn", "")
            if ":log-group:" in arn:
                groups.append(arn.split(":log-group:", 1)[1].removesuffix(":*"))
    if not groups:
        where = "to S3 or Firehose only" if sources else "nowhere: no log delivery is set up for the cluster"
        return [], [f"PCS sends the scheduler logs of {cluster['name']} {where}; fmcluster reads CloudWatch Logs "
                    f"(see {SCHEDULER_LOGS_PAGE})"]
    out = []
    for group in groups:
        kwargs = {"startTime": int(since * 1000)} if since else {}
        events = [e for page in logs.get_paginator("filter_log_events").paginate(logGroupName=group, **kwargs)
                  for e in page.get("events", [])][-lines:]
        out += [LogLine(e["timestamp"] / 1000, e.get("logStreamName", group), e["message"].rstrip()) for e in events]
    return out, []
