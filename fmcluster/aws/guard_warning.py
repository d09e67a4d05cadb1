"""The budget guard's warning, as resources of the cluster: an SNS topic with one EMAIL subscription per ``notify``
address, and a one-time schedule in the guard's group that publishes to it before the guard fires (EventBridge
Scheduler universal target ``arn:aws:scheduler:::aws-sdk:sns:publish``, "Using universal targets"). The guard's
role may ``sns:Publish`` on this topic's ARN only (Service Authorization Reference, Amazon SNS: Publish acts on the
``topic`` resource type).

An EMAIL subscription stays "pending confirmation" until its recipient follows the link AWS mails (SNS developer
guide, "Email notifications"); a pending one cannot be unsubscribed and AWS deletes it after three days unconfirmed.
So an address removed from ``notify`` is unsubscribed once confirmed, and deleting the topic (``destroy``) deletes
every subscription with it (SNS API reference, DeleteTopic).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import yaml
from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code, tolerate
from fmcluster.aws.guard_schedule import GuardSchedule
from fmcluster.aws.ownership import require_ours, tag_dict
from fmcluster.engine import AttributeChange, Context, Observed, Resource, reads
from fmcluster.render.documents import Document

TOPIC_KEY = "warning"
SCHEDULE_NAME = "warn"
PUBLISH_TARGET = "arn:aws:scheduler:::aws-sdk:sns:publish"
TOPIC_ARN_REF = f"${{sns_topic.{TOPIC_KEY}.arn}}"  # the schedule's edge to the topic
# SNS Publish: "Subject ... must be ASCII text ... and must be less than 100 characters long" (API reference).
SUBJECT_MAX = 99


def topic_name(cluster: str) -> str:
    # Topic names: up to 256 alphanumerics, hyphens and underscores, per account and Region (CreateTopic)
    return f"fmcluster-{cluster}-guard"[:256]


def topic_arn(cluster: str, region: str, account: str) -> str:
    return f"arn:aws:sns:{region}:{account}:{topic_name(cluster)}"


def publish_statement(cluster: str, region: str, account: str) -> dict[str, Any]:
    """The role's one SNS statement: Publish, on the cluster's topic alone. Its ARN is written out, not referenced:
    the role comes first (discovery finds the topic through it) and IAM takes an ARN that exists later."""
    return {"Sid": "Warn", "Effect": "Allow", "Action": "sns:Publish",
            "Resource": [topic_arn(cluster, region, account)]}


def warning_documents(cluster: str, region: str, account: str, tags: dict[str, str], notify: list[str],
                      warns_at: dt.datetime, subject: str, message: str, at: str) -> list[Document]:
    """The topic (with its subscriptions) and the schedule that publishes ``message`` at ``warns_at``."""
    tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    topic = {"Name": topic_name(cluster), "Arn": topic_arn(cluster, region, account), "Tags": tag_list,
             "Subscriptions": [{"Protocol": "email", "Endpoint": address} for address in notify]}
    schedule = {"Name": SCHEDULE_NAME, "GroupName": "${schedule_group.guard.name}",
                "Description": f"fmcluster budget guard of {cluster}: the warning to {', '.join(notify)}"[:512],
                "ScheduleExpression": at, "ScheduleExpressionTimezone": "UTC",
                "FlexibleTimeWindow": {"Mode": "OFF"}, "ActionAfterCompletion": "NONE", "State": "ENABLED",
                "Target": {"Arn": PUBLISH_TARGET, "RoleArn": "${iam_role.budget-guard.arn}",
                           "Input": json.dumps({"TopicArn": TOPIC_ARN_REF, "Subject": subject[:SUBJECT_MAX],
                                                "Message": message}, sort_keys=True)}}
    return [Document(f"guard-sns_topic-{TOPIC_KEY}.yaml", "sns_topic", TOPIC_KEY, "sns", {"": "CreateTopic"},
                     yaml.safe_dump(topic, sort_keys=False), topic),
            Document(f"guard-schedule-{SCHEDULE_NAME}.yaml", "schedule", SCHEDULE_NAME, "scheduler",
                     {"": "CreateSchedule"}, yaml.safe_dump(schedule, sort_keys=False), schedule)]


def _email_subscriptions(ctx: Context, arn: str) -> list[dict[str, Any]]:
    sns = ctx.client("sns")
    found: list[dict[str, Any]] = []
    for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=arn):
        found += [s for s in page.get("Subscriptions", []) if s.get("Protocol") == "email"]
    return found


class GuardTopic(Resource):
    """The warning's topic, found by its ARN (account, Region and the cluster's name); what is compared is the set
    of addresses subscribed to it."""

    kind = "sns_topic"
    teardown_rank = 8  # after the schedules that publish to it, before the role

    def __init__(self, key: str, document: Document | None = None, arn: str | None = None):
        self.key = key
        self.document = document
        self.arn = str(document.body["Arn"]) if document is not None else str(arn)

    def _outputs(self) -> dict[str, Any]:
        return {f"sns_topic.{self.key}.arn": self.arn}

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        sns = ctx.client("sns")
        try:
            reads.once(ctx, "sns.Topic", self.arn, lambda: sns.get_topic_attributes(TopicArn=self.arn))
        except ClientError as exc:
            if error_code(exc) in ("NotFound", "NotFoundException"):
                return None
            raise
        tags = tag_dict(reads.once(ctx, "sns.Tags", self.arn, lambda: sns.list_tags_for_resource(
            ResourceArn=self.arn).get("Tags")))
        require_ours(f"SNS topic {self.arn}", tags, ctx)
        addresses = sorted({s["Endpoint"] for s in _email_subscriptions(ctx, self.arn)})
        return Observed(self.arn, "available", "ready", self._outputs(), attributes={"email": addresses})

    def desired(self, ctx: Context) -> dict[str, Any]:
        return {"email": sorted({s["Endpoint"] for s in self.document.body["Subscriptions"]})}

    def create(self, ctx: Context, token: str) -> Observed:
        body = ctx.resolve(self.document.body)  # the tags' cluster id
        # CreateTopic is idempotent for a name with the same attributes and tags (API reference)
        arn = ctx.client("sns").create_topic(Name=body["Name"], Tags=body["Tags"])["TopicArn"]
        self._subscribe(ctx, arn, [s["Endpoint"] for s in body["Subscriptions"]])
        return Observed(arn, "available", "ready", self._outputs())

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        wanted = {s["Endpoint"] for s in self.document.body["Subscriptions"]}
        live = _email_subscriptions(ctx, self.arn)
        self._subscribe(ctx, self.arn, sorted(wanted - {s["Endpoint"] for s in live}))
        for gone in live:
            # a pending subscription has no ARN yet ("PendingConfirmation") and cannot be unsubscribed
            if gone["Endpoint"] not in wanted and str(gone.get("SubscriptionArn", "")).startswith("arn:"):
                ctx.client("sns").unsubscribe(SubscriptionArn=gone["SubscriptionArn"])
        return Observed(self.arn, "available", "ready", self._outputs())

    @staticmethod
    def _subscribe(ctx: Context, arn: str, addresses: list[str]) -> None:
        for address in addresses:
            ctx.client("sns").subscribe(TopicArn=arn, Protocol="email", Endpoint=address)

    def delete(self, ctx: Context, observed: Observed) -> None:
        # DeleteTopic deletes the topic's subscriptions too, and succeeds for a topic that is gone (API reference)
        tolerate(lambda: ctx.client("sns").delete_topic(TopicArn=self.arn), "NotFound")


def scan_topic(ctx: Context, account: str) -> list[Any]:
    """The warning's topic as AWS holds it, by the ARN fmcluster gives it (for ``destroy`` without the spec)."""
    from fmcluster.aws.discovery import Discovered
    from fmcluster.aws.ownership import is_ours
    from fmcluster.render.common import CLUSTER_ID_TAG

    arn = topic_arn(ctx.cluster, ctx.region, account)
    sns = ctx.client("sns")
    try:
        reads.once(ctx, "sns.Topic", arn, lambda: sns.get_topic_attributes(TopicArn=arn))
    except ClientError as exc:
        if error_code(exc) in ("NotFound", "NotFoundException"):
            return []
        raise
    tags = tag_dict(reads.once(ctx, "sns.Tags", arn, lambda: sns.list_tags_for_resource(
        ResourceArn=arn).get("Tags")))
    if tags.get("fmcluster:cluster") != ctx.cluster:
        return []
    ours = is_ours(tags, ctx)
    return [Discovered(f"sns_topic:{TOPIC_KEY}", arn, "available",
                       f"SNS topic {topic_name(ctx.cluster)} (the budget guard's warning)", ours,
                       GuardTopic(TOPIC_KEY, arn=arn) if ours else None, tags.get(CLUSTER_ID_TAG, ""))]


def scan_warning(ctx: Context, group: str, cluster_id: str) -> list[Any]:
    """The warning's schedule in the cluster's (own) group, when it is there."""
    from fmcluster.aws.discovery import Discovered

    schedule = GuardSchedule(SCHEDULE_NAME, group=group)
    seen = schedule.read(ctx, None)
    if seen is None:
        return []
    return [Discovered(f"schedule:{SCHEDULE_NAME}", str(seen.id), seen.status,
                       f"EventBridge Scheduler schedule {group}/{SCHEDULE_NAME} (the budget guard's warning)", True,
                       schedule, cluster_id)]
