"""The budget guard in AWS, as resources of the cluster: an IAM role that EventBridge Scheduler assumes, allowed
exactly the calls that stop this cluster's compute on exactly its resources; the schedule group
``fmcluster-<cluster>`` with one one-time schedule per call; an AWS Budgets budget on the cluster's
cost-allocation tag as a backstop that mails at 80% and 100%; and, with ``notify``, the warning before the guard
fires (:mod:`fmcluster.aws.guard_warning`).

Every backend's calls come as data (``Backend.guard_calls``); what is built here is the same for all of them.
The schedules keep their ``at()`` in UTC, fire once with no flexible window and stay after firing
(``ActionAfterCompletion NONE``), so that ``status`` can still read what fired and when (EventBridge Scheduler
user guide, "Schedule types": one-time schedules; API reference, CreateSchedule).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Protocol

import yaml
from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code, tolerate
from fmcluster.aws.guard_schedule import GuardSchedule
from fmcluster.aws.iam import IamRole, _policy
from fmcluster.aws.ownership import require_ours, tag_dict
from fmcluster.engine import AttributeChange, Context, Observed, Resource, reads
from fmcluster.engine.unknown import Unknown
from fmcluster.render.documents import Document

ROLE_KEY = "budget-guard"
GROUP_KEY = "guard"
BUDGET_KEY = "guard"
# AWS Budgets: notifications at these percentages of the limit, on ACTUAL spend (the issue: 80% and 100%).
NOTIFY_PERCENT = (80, 100)
# The cost-allocation tag the budget filters on: fmcluster's own cluster tag, as Budgets names a user tag
# ("user:<key>$<value>", AWS Budgets API reference, CostFilters / Expression Tags).
COST_TAG = "fmcluster:cluster"


class CallLike(Protocol):
    """What the guard needs of a backend's call (``fmcluster.backends.protocol.GuardCall``, a layer above)."""

    name: str
    input: dict[str, Any]
    resource_arns: tuple[str, ...]
    iam_action: str
    does: str

    @property
    def target_arn(self) -> str: ...


def account_of(ctx: Context) -> str:
    """The account's id (STS GetCallerIdentity, read once per read-only pass)."""
    answer = reads.once(ctx, "sts.CallerIdentity", "", lambda: ctx.client("sts").get_caller_identity())
    return str(answer["Account"])


def _missing_is_none(call: Any, code: str) -> Any:
    try:
        return call()
    except ClientError as exc:
        if error_code(exc) == code:
            return None
        raise


def group_name(cluster: str) -> str:
    return f"fmcluster-{cluster}"[:64]  # ScheduleGroup Name: [0-9a-zA-Z-_.]{1,64}


def role_name(cluster: str, region: str) -> str:
    return f"fmcluster-guard-{region}-{cluster}"[:64]  # IAM role names are per account: the Region in it


def budget_name(cluster: str, region: str) -> str:
    return f"fmcluster-{cluster}-{region}"  # Budget names are per account


def at_expression(moment: dt.datetime) -> str:
    """EventBridge Scheduler's one-time expression, ``at(yyyy-mm-ddThh:mm:ss)``, in UTC."""
    return f"at({moment.astimezone(dt.timezone.utc):%Y-%m-%dT%H:%M:%S})"


def _document(kind: str, key: str, service: str, operation: str, body: dict[str, Any]) -> Document:
    return Document(f"guard-{kind}-{key}.yaml", kind, key, service, {"": operation},
                    yaml.safe_dump(body, sort_keys=False), body)


def guard_documents(cluster: str, region: str, account: str, tags: dict[str, str], calls: list[CallLike],
                    fires_at: dt.datetime, max_usd: float | None, notify: list[str],
                    extra_statements: tuple[dict[str, Any], ...] = ()) -> list[Document]:
    """The guard's request documents: its role (allowed the calls and ``extra_statements``: the warning's
    publish), group, one schedule per call and, with a cap, the budget."""
    role = role_name(cluster, region)
    tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    # IAM User Guide, "The confused deputy problem": a service principal's trust conditioned on aws:SourceAccount.
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "scheduler.amazonaws.com"}, "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"aws:SourceAccount": account}}}]}
    statements = [{"Sid": "".join(ch for ch in call.name.title() if ch.isalnum()), "Effect": "Allow",
                   "Action": call.iam_action,
                   "Resource": [arn.replace("{account}", account) for arn in call.resource_arns]} for call in calls]
    statements += list(extra_statements)
    documents = [_document("iam_role", ROLE_KEY, "iam", "CreateRole", {
        "role": {"RoleName": role, "Path": "/", "Description": f"fmcluster {cluster}: the budget guard's schedules",
                 "AssumeRolePolicyDocument": json.dumps(trust), "Tags": tag_list},
        "inline_policy": {"RoleName": role, "PolicyName": "budget-guard",
                          "PolicyDocument": json.dumps({"Version": "2012-10-17", "Statement": statements})},
        "managed_policies": []})]
    documents.append(_document("schedule_group", GROUP_KEY, "scheduler", "CreateScheduleGroup",
                               {"Name": group_name(cluster), "Tags": tag_list}))
    for call in calls:
        documents.append(_document("schedule", call.name, "scheduler", "CreateSchedule", {
            "Name": call.name, "GroupName": f"${{schedule_group.{GROUP_KEY}.name}}",
            "Description": f"fmcluster budget guard of {cluster}: {call.does}"[:512],
            "ScheduleExpression": at_expression(fires_at), "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"}, "ActionAfterCompletion": "NONE", "State": "ENABLED",
            "Target": {"Arn": call.target_arn, "RoleArn": f"${{iam_role.{ROLE_KEY}.arn}}",
                       "Input": json.dumps(call.input, sort_keys=True)}}))
    if max_usd is not None:
        subscribers = [{"SubscriptionType": "EMAIL", "Address": address} for address in notify]
        documents.append(_document("budget", BUDGET_KEY, "budgets", "CreateBudget", {
            "AccountId": account,
            "Budget": {"BudgetName": budget_name(cluster, region), "BudgetType": "COST", "TimeUnit": "ANNUALLY",
                       "BudgetLimit": {"Amount": f"{max_usd:.2f}", "Unit": "USD"},
                       "CostFilters": {"TagKeyValue": [f"user:{COST_TAG}${cluster}"]}},
            "NotificationsWithSubscribers": [{
                "Notification": {"NotificationType": "ACTUAL", "ComparisonOperator": "GREATER_THAN",
                                 "Threshold": float(percent), "ThresholdType": "PERCENTAGE"},
                "Subscribers": subscribers} for percent in NOTIFY_PERCENT] if subscribers else [],
            "ResourceTags": tag_list}))
    return documents


class GuardRole(IamRole):
    """The guard's role: its policies name ARNs AWS issues (node groups'), so what it compares is resolved."""

    teardown_rank = 62

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        policy = body["inline_policy"]["PolicyDocument"]
        return {"RoleName": body["role"]["RoleName"], "Path": "/",
                "AssumeRolePolicyDocument": _policy(body["role"]["AssumeRolePolicyDocument"]),
                "managed_policies": [],
                "inline_policy.budget-guard": policy if isinstance(policy, Unknown) else _policy(policy)}


def _read_group(ctx: Context, name: str) -> dict[str, Any] | None:
    return reads.once(ctx, "scheduler.ScheduleGroup", name, lambda: _missing_is_none(
        lambda: ctx.client("scheduler").get_schedule_group(Name=name), "ResourceNotFoundException"))


class ScheduleGroup(Resource):
    kind = "schedule_group"
    teardown_rank = 6

    def __init__(self, key: str, document: Document | None = None, name: str | None = None):
        self.key = key
        self.document = document
        self.group = document.body["Name"] if document is not None else (name or key)

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        scheduler = ctx.client("scheduler")
        group = _read_group(ctx, self.group)
        if group is None:
            return None
        tags = tag_dict(reads.once(ctx, "scheduler.Tags", group["Arn"], lambda: scheduler.list_tags_for_resource(
            ResourceArn=group["Arn"]).get("Tags")))
        require_ours(f"EventBridge Scheduler schedule group {self.group}", tags, ctx)
        state = group.get("State", "ACTIVE")
        return Observed(group["Arn"], state, "gone" if state == "DELETING" else "ready",
                        {f"schedule_group.{self.key}.name": self.group})

    def create(self, ctx: Context, token: str) -> Observed:
        body = ctx.resolve(self.document.body)
        arn = ctx.client("scheduler").create_schedule_group(ClientToken=token[:64], **body)["ScheduleGroupArn"]
        return Observed(arn, "ACTIVE", "ready", {f"schedule_group.{self.key}.name": self.group})

    def delete(self, ctx: Context, observed: Observed) -> None:
        # DeleteScheduleGroup deletes the schedules in it as well (EventBridge Scheduler API reference).
        tolerate(lambda: ctx.client("scheduler").delete_schedule_group(Name=self.group),
                 "ResourceNotFoundException")


class GuardBudget(Resource):
    """The AWS Budgets backstop: found by its name (Budgets is one account-wide service)."""

    kind = "budget"
    teardown_rank = 7

    def __init__(self, key: str, document: Document | None = None, account: str | None = None,
                 name: str | None = None):
        self.key = key
        self.document = document
        self.account = document.body["AccountId"] if document is not None else account
        self.budget = document.body["Budget"]["BudgetName"] if document is not None else name

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        answer = reads.once(ctx, "budgets.Budget", str(self.budget), lambda: _missing_is_none(
            lambda: ctx.client("budgets").describe_budget(AccountId=self.account, BudgetName=self.budget),
            "NotFoundException"))
        if answer is None:
            return None
        item = answer["Budget"]
        limit = item.get("BudgetLimit") or {}
        notes = ctx.client("budgets").describe_notifications_for_budget(
            AccountId=self.account, BudgetName=self.budget).get("Notifications") or []
        return Observed(self.budget, "available", "ready", attributes={
            "Budget.BudgetLimit.Amount": f"{float(limit.get('Amount', 0)):.2f}",
            "Budget.CostFilters": item.get("CostFilters"),
            "notifications": sorted(float(n["Threshold"]) for n in notes)})

    def desired(self, ctx: Context) -> dict[str, Any]:
        # The notifications' thresholds (present with notify, absent without); their subscribers are not compared.
        budget = self.document.body["Budget"]
        return {"Budget.BudgetLimit.Amount": budget["BudgetLimit"]["Amount"],
                "Budget.CostFilters": budget["CostFilters"],
                "notifications": sorted(float(n["Notification"]["Threshold"])
                                        for n in self.document.body["NotificationsWithSubscribers"])}

    def create(self, ctx: Context, token: str) -> Observed:
        body = ctx.resolve(self.document.body)
        tolerate(lambda: ctx.client("budgets").create_budget(**body), "DuplicateRecordException")
        return Observed(self.budget, "available", "ready")

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        budgets = ctx.client("budgets")
        body = ctx.resolve(self.document.body)
        if any(not c.path.startswith("notifications") for c in changes):
            budgets.update_budget(AccountId=self.account, NewBudget=body["Budget"])
        if any(c.path.startswith("notifications") for c in changes):  # made again as the spec has them
            for note in budgets.describe_notifications_for_budget(
                    AccountId=self.account, BudgetName=self.budget).get("Notifications") or []:
                budgets.delete_notification(AccountId=self.account, BudgetName=self.budget, Notification=note)
            for wanted in body["NotificationsWithSubscribers"]:
                budgets.create_notification(AccountId=self.account, BudgetName=self.budget, **wanted)
        return Observed(self.budget, "available", "ready")

    def delete(self, ctx: Context, observed: Observed) -> None:
        tolerate(lambda: ctx.client("budgets").delete_budget(AccountId=self.account, BudgetName=self.budget),
                 "NotFoundException")


def guard_resources(documents: list[Document]) -> list[Resource]:
    """One resource per guard document."""
    group = next((d.body["Name"] for d in documents if d.kind == "schedule_group"), None)
    made: list[Resource] = []
    for document in documents:
        if document.kind == "iam_role":
            made.append(GuardRole(document.key, document))
        elif document.kind == "schedule_group":
            made.append(ScheduleGroup(document.key, document))
        elif document.kind == "schedule":
            made.append(GuardSchedule(document.key, document, group=group))
        elif document.kind == "sns_topic":
            from fmcluster.aws.guard_warning import GuardTopic

            topic = GuardTopic(document.key, document)
            topic.extra_edges = (f"iam_role:{ROLE_KEY}",)  # made after the role, which discovery finds it by
            made.append(topic)
        else:
            budget = GuardBudget(document.key, document)
            budget.extra_edges = (f"iam_role:{ROLE_KEY}",)  # made after the role, which discovery finds it by
            made.append(budget)
    return made


def scan_guard(ctx: Context) -> list[Any]:
    """The guard's schedule group, warning topic and budget as AWS holds them, by the names fmcluster gives them
    (Budgets, Scheduler and SNS have no tag filter on lists); the role is found with the other roles
    (``discovery.scan_role``)."""
    from fmcluster.aws import unread
    from fmcluster.aws.discovery import scan_role

    found: list[Any] = scan_role(ctx, ROLE_KEY, role_name(ctx.cluster, ctx.region))
    try:
        found += _scan_group(ctx)
    except ClientError as exc:
        if error_code(exc) not in DENIED:
            raise
        # a caller without Scheduler rights still sees (and destroys) the rest; status names what it could not read
        unread.note(ctx, "eventbridge scheduler", f"the budget guard's schedules were not read: {exc}")
    # The budget and the topic are made after the role (an edge, below): no role, nothing to look for, and the
    # role's ARN carries the account they are named in (no STS call of its own).
    from fmcluster.aws.discovery import _entity

    role = reads.once(ctx, "iam.Role", role_name(ctx.cluster, ctx.region), lambda: _entity(
        lambda: ctx.client("iam").get_role(RoleName=role_name(ctx.cluster, ctx.region)), "Role"))
    if role is None:
        return found
    from fmcluster.aws.guard_warning import scan_topic

    try:  # the warning's topic is made after the role too
        found += scan_topic(ctx, str(role["Arn"]).split(":")[4])
    except ClientError as exc:
        if error_code(exc) not in DENIED:
            raise
        unread.note(ctx, "sns", f"the budget guard's warning topic was not read: {exc}")
    try:
        found += _scan_budget(ctx, str(role["Arn"]).split(":")[4])
    except ClientError as exc:
        if error_code(exc) not in DENIED:
            raise
        unread.note(ctx, "aws budgets", f"the budget guard's backstop was not read: {exc}")
    return found


# What AWS answers a caller its policy does not allow (IAM "Troubleshoot access denied error messages").
DENIED = ("AccessDenied", "AccessDeniedException")


def _scan_group(ctx: Context) -> list[Any]:
    from fmcluster.aws.discovery import Discovered
    from fmcluster.aws.ownership import is_ours
    from fmcluster.render.common import CLUSTER_ID_TAG

    found: list[Any] = []
    group = ScheduleGroup(GROUP_KEY, name=group_name(ctx.cluster))
    item = _read_group(ctx, group.group)
    if item is not None:
        tags = tag_dict(reads.once(ctx, "scheduler.Tags", item["Arn"], lambda: ctx.client(
            "scheduler").list_tags_for_resource(ResourceArn=item["Arn"]).get("Tags")))
        if tags.get("fmcluster:cluster") == ctx.cluster:
            ours = is_ours(tags, ctx)
            found.append(Discovered(f"schedule_group:{GROUP_KEY}", item["Arn"], item.get("State", "ACTIVE"),
                                    f"EventBridge Scheduler schedule group {group.group} (the budget guard)", ours,
                                    group if ours else None, tags.get(CLUSTER_ID_TAG, "")))
            if ours:  # the warning's schedule, so that emptying notify deletes it (the group stays)
                from fmcluster.aws.guard_warning import scan_warning

                found += scan_warning(ctx, group.group, tags.get(CLUSTER_ID_TAG, ""))
    return found


def _scan_budget(ctx: Context, account: str) -> list[Any]:
    from fmcluster.aws.discovery import Discovered

    found: list[Any] = []
    budget = GuardBudget(BUDGET_KEY, account=account, name=budget_name(ctx.cluster, ctx.region))
    if budget.read(ctx, None) is not None:
        # Named for this cluster and Region, which the name's claim keeps to one owner per account.
        found.append(Discovered(f"budget:{BUDGET_KEY}", str(budget.budget), "available",
                                f"AWS Budgets budget {budget.budget} (the budget guard's backstop)", True, budget))
    return found
