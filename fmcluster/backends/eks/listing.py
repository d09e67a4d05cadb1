"""The EKS clusters a region holds for fmcluster, by their tags: boto3 alone, so ``status`` lists them whatever
extras are installed."""

from __future__ import annotations

from fmcluster.backends.eks.profile import PROFILE
from fmcluster.connection import aws
from fmcluster.render.common import CLUSTER_TAG


def tagged_clusters(region: str) -> list[tuple[str, str]]:
    """(name, status in the common vocabulary) of every EKS cluster in ``region`` whose ``fmcluster:cluster`` tag
    names it (every page)."""
    eks = aws.client("eks", region)
    found = []
    for page in eks.get_paginator("list_clusters").paginate():
        for name in page["clusters"]:
            try:
                cluster = eks.describe_cluster(name=name)["cluster"]
            except eks.exceptions.ResourceNotFoundException:  # deleted between the list and the read
                continue
            if (cluster.get("tags") or {}).get(CLUSTER_TAG) == name:
                found.append((name, PROFILE.common_status(cluster["status"])))
    return found
