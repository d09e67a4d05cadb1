"""SNS Publish as an EventBridge Scheduler universal target in the sandbox, driven with plain boto3: the run calls
sns:Publish as the schedule's role on the topic the Input names, and the role's policy decides.

Sources: EventBridge Scheduler user guide, "Using universal targets" (``arn:aws:scheduler:::aws-sdk:sns:publish``);
Amazon SNS API reference, Publish (TopicArn, Subject, Message); Service Authorization Reference, Amazon SNS
(Publish acts on the ``topic`` resource type, ``arn:${Partition}:sns:${Region}:${Account}:${TopicName}``).
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid

from fixtures.sandbox_eks import REGION, trust

PUBLISH = "arn:aws:scheduler:::aws-sdk:sns:publish"


def _role_publishing_to(sandbox, topic_arn: str) -> str:
    iam = sandbox.client("iam")
    name = f"warn-{uuid.uuid4().hex[:8]}"
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust("scheduler.amazonaws.com"))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="warn", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sns:Publish", "Resource": topic_arn}]}))
    return arn


def _in_an_hour(sandbox) -> tuple[str, float]:
    now = dt.datetime.fromisoformat(sandbox.clock()["now"].replace("Z", "+00:00"))
    due = now.replace(microsecond=0) + dt.timedelta(hours=1)
    return f"at({due.strftime('%Y-%m-%dT%H:%M:%S')})", due.timestamp()


def _advance_to(sandbox, epoch: float) -> dict:
    offset = sandbox.clock()["offset_seconds"]
    return sandbox.clock({"advance_seconds": max(0.0, epoch - (time.time() + offset))})


def test_a_scheduled_publish_reaches_its_own_topic_when_due_and_is_denied_on_another(sandbox):
    """The role may publish to topic A only: the schedule that publishes to A publishes once, at its at() time and
    not a minute before; the one that publishes to B is denied by the role's policy and B receives nothing."""
    sns, scheduler = sandbox.client("sns", REGION), sandbox.client("scheduler", REGION)
    suffix = uuid.uuid4().hex[:8]
    own = sns.create_topic(Name=f"warn-a-{suffix}", Tags=[{"Key": "fmcluster:cluster", "Value": "a"}])["TopicArn"]
    other = sns.create_topic(Name=f"warn-b-{suffix}", Tags=[{"Key": "fmcluster:cluster", "Value": "b"}])["TopicArn"]
    role = _role_publishing_to(sandbox, own)
    expression, due = _in_an_hour(sandbox)
    names = {own: f"warn-own-{suffix}", other: f"warn-other-{suffix}"}
    for topic, name in names.items():
        scheduler.create_schedule(
            Name=name, ScheduleExpression=expression, ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"}, ActionAfterCompletion="NONE",
            Target={"Arn": PUBLISH, "RoleArn": role, "Input": json.dumps(
                {"TopicArn": topic, "Subject": "fmcluster a: the guard fires soon", "Message": "stops at 12:00"})})

    _advance_to(sandbox, due - 60)
    assert sandbox.sns_published(own) == [] and sandbox.sns_published(other) == []
    ran = [r for r in _advance_to(sandbox, due + 1)["ran"] if r["schedule"] in names.values()]
    outcomes = {r["schedule"]: (r["outcome"], r["message"]) for r in ran}
    assert outcomes[names[own]] == ("succeeded", f"sns:Publish on {own}"), outcomes
    outcome, message = outcomes[names[other]]
    assert outcome == "denied" and f"not authorized to perform sns:Publish on {other}" in message, outcomes
    [published] = sandbox.sns_published(own)
    assert (published["subject"], published["message"]) == ("fmcluster a: the guard fires soon", "stops at 12:00")
    assert sandbox.sns_published(other) == []
