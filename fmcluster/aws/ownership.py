"""What makes a resource this cluster's: three tags that fmcluster puts on everything it creates.

A resource is the cluster's only if it carries ``fmcluster:cluster=<name>``, ``fmcluster:region=<region>``
and ``fmcluster:cluster-id=<id>`` (a random id given when the cluster is first created). ``read`` adopts
nothing else, and so nothing else is ever updated or deleted: a resource that merely has the name fmcluster
would use is someone else's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fmcluster.engine import Context, ForeignResource
from fmcluster.render.common import CLUSTER_ID_TAG, CLUSTER_TAG, REGION_TAG

__all__ = ["CLUSTER_ID_TAG", "CLUSTER_TAG", "REGION_TAG", "is_ours", "require_ours", "tag_dict",
           "tagged_for_cluster"]


def tag_dict(tags: Iterable[dict[str, Any]] | dict[str, str] | None) -> dict[str, str]:
    """EC2/IAM/FSx ``[{"Key", "Value"}]`` (or PCS's plain map) → a dict."""
    if not tags:
        return {}
    if isinstance(tags, dict):
        return dict(tags)
    return {t.get("Key", t.get("key", "")): t.get("Value", t.get("value", "")) for t in tags}


def is_ours(tags: dict[str, str], ctx: Context) -> bool:
    return (tags.get(CLUSTER_TAG) == ctx.cluster and tags.get(REGION_TAG) == ctx.region
            and bool(ctx.cluster_id) and tags.get(CLUSTER_ID_TAG) == ctx.cluster_id)


def tagged_for_cluster(tags: dict[str, str], ctx: Context) -> bool:
    """Tagged for a cluster of this name in this region, whatever its id (what a teardown scan looks for)."""
    return tags.get(CLUSTER_TAG) == ctx.cluster and tags.get(REGION_TAG, ctx.region) == ctx.region


def require_ours(what: str, tags: dict[str, str], ctx: Context) -> None:
    """Refuse a resource found by name that is not this cluster's, naming it and saying why."""
    if is_ours(tags, ctx):
        return
    owner = tags.get(CLUSTER_TAG)
    if owner is None:
        why = "fmcluster did not create it (it has no fmcluster:cluster tag)"
    elif owner != ctx.cluster or tags.get(REGION_TAG, ctx.region) != ctx.region:
        why = f"it belongs to fmcluster cluster {owner} ({tags.get(REGION_TAG, '?')})"
    else:
        why = (f"it was made for an earlier cluster named {owner} (cluster id {tags.get(CLUSTER_ID_TAG, 'none')}, "
               f"this one is {ctx.cluster_id or 'new'})")
    raise ForeignResource(f"{what} already exists and is not this cluster's: {why}. fmcluster will neither "
                          "adopt nor delete it; delete or rename it, or give the cluster another name")
