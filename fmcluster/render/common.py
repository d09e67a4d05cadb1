"""Facts every backend's rendering shares."""

from __future__ import annotations

from fmcluster.catalog.hardware import hardware
from fmcluster.spec.models import Spec

# Everything fmcluster creates carries these three; together they make it this cluster's (see
# fmcluster.aws.ownership). The id is issued at the first create and filled in when a document is sent.
CLUSTER_TAG = "fmcluster:cluster"
REGION_TAG = "fmcluster:region"
CLUSTER_ID_TAG = "fmcluster:cluster-id"
CLUSTER_ID_REFERENCE = "${fmcluster.cluster_id}"
# Which of the plan's resources this is (``kind:key``): a teardown or a drift scan maps what it finds by tag
# back to the plan without the spec.
RESOURCE_TAG = "fmcluster:resource"


def resource_tags(spec: Spec, resource: str | None = None) -> dict[str, str]:
    """Tags on everything fmcluster creates: the user's, plus the ownership tags ``read``, ``status`` and
    ``destroy`` go by, and (for a resource of the plan) which one it is."""
    tags = {**spec.tags, CLUSTER_TAG: spec.name, REGION_TAG: spec.region, CLUSTER_ID_TAG: CLUSTER_ID_REFERENCE}
    if resource:
        tags[RESOURCE_TAG] = resource
    return tags


def compute_root_volume_gib(spec: Spec) -> int:
    # Container images and NCCL/EFA installs outgrow small roots quickly.
    return max(200, spec.head_node.root_volume_gib // 2)


def architecture(instance_type: str) -> str:
    """The CPU architecture an instance type's image is built for (x86_64 where the catalog does not say)."""
    return hardware(instance_type).architecture or "x86_64"
