"""AWS Budgets and Cost Explorer's cost allocation tags in the sandbox, driven with plain boto3.

Sources: AWS Budgets API Reference (CreateBudget, CreateNotification, DescribeNotificationsForBudget,
DescribeSubscribersForNotification, DeleteBudget; "Expression", "TagValues"); Cost Explorer API Reference
(ListCostAllocationTags, UpdateCostAllocationTagsStatus); Billing User Guide "Activating user-defined cost
allocation tags".
"""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

ACCOUNT = "123456789012"  # moto's account for the test credentials (the sandbox server's docstring)


def _notification(threshold: float) -> dict:
    return {"NotificationType": "ACTUAL", "ComparisonOperator": "GREATER_THAN", "Threshold": threshold,
            "ThresholdType": "PERCENTAGE"}


def test_a_budget_on_a_cost_allocation_tag_with_80_and_100_percent_email_notifications(sandbox):
    """CreateBudget with a FilterExpression on a tag (Budgets API "Expression": ``Tags`` is a TagValues of Key and
    Values) and NotificationsWithSubscribers; CreateNotification adds the 100% one; both come back, with their
    EMAIL subscriber; DeleteBudget removes it (DescribeBudget: NotFoundException)."""
    budgets = sandbox.client("budgets")
    name = f"fmcluster-{uuid.uuid4().hex[:8]}"
    budgets.create_budget(AccountId=ACCOUNT, Budget={
        "BudgetName": name, "BudgetLimit": {"Amount": "500", "Unit": "USD"}, "TimeUnit": "MONTHLY",
        "BudgetType": "COST", "FilterExpression": {"Tags": {"Key": "fmcluster:cluster", "Values": ["demo"]}}},
        NotificationsWithSubscribers=[{"Notification": _notification(80),
                                       "Subscribers": [{"SubscriptionType": "EMAIL", "Address": "ops@example.com"}]}])
    budgets.create_notification(AccountId=ACCOUNT, BudgetName=name, Notification=_notification(100),
                                Subscribers=[{"SubscriptionType": "EMAIL", "Address": "ops@example.com"}])
    budget = budgets.describe_budget(AccountId=ACCOUNT, BudgetName=name)["Budget"]
    assert budget["FilterExpression"] == {"Tags": {"Key": "fmcluster:cluster", "Values": ["demo"]}}
    assert budget["BudgetLimit"] == {"Amount": "500", "Unit": "USD"}
    notes = budgets.describe_notifications_for_budget(AccountId=ACCOUNT, BudgetName=name)["Notifications"]
    assert sorted(n["Threshold"] for n in notes) == [80.0, 100.0]
    subscribers = budgets.describe_subscribers_for_notification(AccountId=ACCOUNT, BudgetName=name,
                                                                Notification=_notification(100))["Subscribers"]
    assert subscribers == [{"SubscriptionType": "EMAIL", "Address": "ops@example.com"}]
    assert name in [b["BudgetName"] for b in budgets.describe_budgets(AccountId=ACCOUNT)["Budgets"]]
    budgets.delete_budget(AccountId=ACCOUNT, BudgetName=name)
    with pytest.raises(ClientError) as gone:
        budgets.describe_budget(AccountId=ACCOUNT, BudgetName=name)
    assert gone.value.response["Error"]["Code"] == "NotFoundException"


def test_budgets_requests_are_checked_against_the_model(sandbox):
    """A Budget without BudgetName or TimeUnit breaks the model (Budgets API, Budget: both required); the client's
    validation is off, so the sandbox is what refuses, as InvalidParameterException (CreateBudget's errors)."""
    budgets = sandbox.client("budgets", parameter_validation=False, retries={"mode": "standard", "max_attempts": 1})
    with pytest.raises(ClientError) as refused:
        budgets.create_budget(AccountId=ACCOUNT, Budget={"BudgetLimit": {"Amount": "1", "Unit": "USD"},
                                                         "BudgetType": "COST"})
    assert refused.value.response["Error"]["Code"] == "InvalidParameterException"


def test_a_user_tag_key_is_inactive_until_activated(sandbox, world):
    """"After you create and apply user-defined tags to your resources, it can take up to 24 hours for the tag keys
    to appear on your cost allocation tags page for activation" (Billing guide, "Activating user-defined cost
    allocation tags"; the sandbox lists them at once): Inactive, then Active after UpdateCostAllocationTagsStatus.
    A key no resource carries comes back in Errors (UpdateCostAllocationTagsStatus: "objects with error details
    about each cost allocation tag that can't be updated")."""
    ce = sandbox.client("ce")
    ec2_key, eks_key = f"team-{uuid.uuid4().hex[:8]}", f"fmcluster:cluster-{uuid.uuid4().hex[:6]}"

    def listed(key: str) -> list[dict]:
        return ce.list_cost_allocation_tags(TagKeys=[key])["CostAllocationTags"]

    assert listed(ec2_key) == []
    sandbox.client("ec2").create_security_group(GroupName=f"sg-{ec2_key}", Description="tagged", TagSpecifications=[
        {"ResourceType": "security-group", "Tags": [{"Key": ec2_key, "Value": "ml"}]}])
    world.cluster(tags={eks_key: "demo"})
    for key in (ec2_key, eks_key):
        (entry,) = listed(key)
        assert (entry["Type"], entry["Status"]) == ("UserDefined", "Inactive")
    never = f"never-{uuid.uuid4().hex[:8]}"
    errors = ce.update_cost_allocation_tags_status(CostAllocationTagsStatus=[
        {"TagKey": eks_key, "Status": "Active"}, {"TagKey": never, "Status": "Active"}])["Errors"]
    assert [e["TagKey"] for e in errors] == [never]
    (entry,) = listed(eks_key)
    assert entry["Status"] == "Active"
    assert [e["TagKey"] for e in ce.list_cost_allocation_tags(Status="Active")["CostAllocationTags"]
            if e["TagKey"] in (ec2_key, eks_key)] == [eks_key]
