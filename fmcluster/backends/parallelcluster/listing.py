"""The ParallelCluster clusters a region holds for fmcluster: their CloudFormation stacks, by their tags.
CloudFormation through boto3, not pcluster.lib, so ``status`` lists them without the extra installed."""

from __future__ import annotations

from fmcluster.backends.parallelcluster.profile import PROFILE
from fmcluster.connection import aws
from fmcluster.render.common import CLUSTER_TAG


def tagged_clusters(region: str) -> list[tuple[str, str]]:
    """(name, status in the common vocabulary) of every live stack in ``region`` whose ``fmcluster:cluster``
    tag names it (every page)."""
    cloudformation = aws.client("cloudformation", region)
    found = []
    for page in cloudformation.get_paginator("describe_stacks").paginate():
        for stack in page["Stacks"]:
            tags = {t["Key"]: t["Value"] for t in stack.get("Tags") or []}
            if tags.get(CLUSTER_TAG) == stack["StackName"] and stack["StackStatus"] != "DELETE_COMPLETE":
                found.append((stack["StackName"], PROFILE.common_status(stack["StackStatus"])))
    return found
