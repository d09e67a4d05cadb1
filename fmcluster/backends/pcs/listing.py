"""The PCS clusters a region holds for fmcluster, by their tags: boto3 alone, so ``status`` lists them
whatever extras are installed."""

from __future__ import annotations

from fmcluster.backends.pcs.profile import PROFILE
from fmcluster.connection import aws
from fmcluster.render.common import CLUSTER_TAG


def tagged_clusters(region: str) -> list[tuple[str, str]]:
    """(name, status in the common vocabulary) of every PCS cluster in ``region`` whose
    ``fmcluster:cluster`` tag names it (every page)."""
    pcs = aws.client("pcs", region)
    found = []
    for page in pcs.get_paginator("list_clusters").paginate():
        for cluster in page["clusters"]:
            tags = pcs.list_tags_for_resource(resourceArn=cluster["arn"]).get("tags") or {}
            if tags.get(CLUSTER_TAG) == cluster["name"]:
                found.append((cluster["name"], PROFILE.common_status(cluster["status"])))
    return found
