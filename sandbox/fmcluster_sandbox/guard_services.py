"""Routing of the services a budget guard uses (issue 38): EventBridge Scheduler, AWS Budgets, Cost Explorer's cost
allocation tags. Each answer comes from its own module; None lets moto answer."""

from __future__ import annotations

from typing import Any

from fmcluster_sandbox import cost_allocation_tags, protocols

BUDGETS_TARGET_PREFIX = "AWSBudgetServiceGateway."
Answer = tuple[int, dict[str, str], bytes]


def answer(cost_tags: cost_allocation_tags.CostAllocationTags, environ: dict[str, Any], service: str, target: str,
           operation: str, region: str, account: str) -> Answer | None:
    if target.startswith(cost_allocation_tags.TARGET_PREFIX) and operation in cost_allocation_tags.OPERATIONS:
        return cost_tags.handle(operation, protocols.read_body(environ), account)
    if target.startswith(BUDGETS_TARGET_PREFIX):  # moto serves Budgets unchecked, and not all of it
        from fmcluster_sandbox import budgets_extras

        body = protocols.read_body(environ)
        refusal = protocols.model_refusal("budgets", operation, body, "InvalidParameterException")
        if refusal is None and operation in budgets_extras.OPERATIONS:
            return budgets_extras.describe_subscribers(body, account)
        return refusal
    if service == "scheduler":
        from fmcluster_sandbox import scheduler_api

        return scheduler_api.handle(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", ""),
                                    environ.get("QUERY_STRING", ""), protocols.read_body(environ), region, account)
    return None
