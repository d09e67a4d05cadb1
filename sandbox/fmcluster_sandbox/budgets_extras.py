"""The AWS Budgets action moto 5.2.5 lacks: DescribeSubscribersForNotification (Budgets API reference), answered
from moto's own budgets so what CreateBudget/CreateNotification stored is what comes back."""

from __future__ import annotations

import json
from typing import Any

Answer = tuple[int, dict[str, str], bytes]
OPERATIONS = ("DescribeSubscribersForNotification",)
_IDENTITY = ("NotificationType", "ComparisonOperator", "Threshold")


def _same(stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    # A notification is named by its type, operator, threshold and threshold type (PERCENTAGE when left out).
    return (all(stored.get(k) == wanted.get(k) for k in _IDENTITY)
            and stored.get("ThresholdType", "PERCENTAGE") == wanted.get("ThresholdType", "PERCENTAGE"))


def _answer(status: int, document: dict[str, Any]) -> Answer:
    return status, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(document).encode()


def describe_subscribers(body: bytes, account: str) -> Answer:
    from moto.budgets.models import budgets_backends

    params = json.loads(body or b"{}")
    budgets = budgets_backends[account]["aws"].budgets[params["AccountId"]]
    budget = budgets.get(params["BudgetName"])
    found = next((n for n in (budget.notifications if budget else []) if _same(n.details, params["Notification"])),
                 None)
    if found is None:
        return _answer(400, {"__type": "NotFoundException",
                             "Message": f"Unable to get subscribers - the notification for budget "
                                        f"{params['BudgetName']} doesn't exist."})
    return _answer(200, {"Subscribers": list(found.subscribers)})
