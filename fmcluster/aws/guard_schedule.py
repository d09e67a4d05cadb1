"""One one-time schedule of the budget guard (a stop call, or the warning), in the cluster's schedule group."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code, tolerate
from fmcluster.engine import AttributeChange, Context, Observed, Resource, flatten
from fmcluster.render.documents import Document

# What a schedule's read compares: the members CreateSchedule sets that GetSchedule answers with.
_SCHEDULE_MEMBERS = ("ScheduleExpression", "ScheduleExpressionTimezone", "FlexibleTimeWindow",
                     "ActionAfterCompletion", "State", "Target")


class GuardSchedule(Resource):
    """One one-time schedule; it has no tags of its own (its group has): found by name in the cluster's group."""

    kind = "schedule"
    teardown_rank = 5

    def __init__(self, key: str, document: Document | None = None, group: str | None = None):
        self.key = key
        self.document = document
        self.group = group

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        try:
            item = ctx.client("scheduler").get_schedule(Name=self.key, GroupName=self.group)
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        target = item.get("Target") or {}
        live = {k: item.get(k) for k in _SCHEDULE_MEMBERS}
        live["Target"] = {k: target.get(k) for k in ("Arn", "RoleArn", "Input")}
        return Observed(item["Arn"], item.get("State", "ENABLED"), "ready", attributes=flatten(live))

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        return flatten({k: body.get(k) for k in _SCHEDULE_MEMBERS})

    def create(self, ctx: Context, token: str) -> Observed:
        arn = ctx.client("scheduler").create_schedule(ClientToken=token[:64],
                                                      **ctx.resolve(self.document.body))["ScheduleArn"]
        return Observed(arn, "ENABLED", "ready")

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        # UpdateSchedule replaces the whole schedule: every member is sent again.
        arn = ctx.client("scheduler").update_schedule(ClientToken=token[:64],
                                                      **ctx.resolve(self.document.body))["ScheduleArn"]
        return Observed(arn, "ENABLED", "ready")

    def delete(self, ctx: Context, observed: Observed) -> None:
        tolerate(lambda: ctx.client("scheduler").delete_schedule(Name=self.key, GroupName=self.group),
                 "ResourceNotFoundException")
