"""Facts every backend's rendering shares."""

from __future__ import annotations

from fmcluster import __version__
from fmcluster.spec.models import Spec

CLUSTER_TAG = "fmcluster:cluster"
# Without an allowed network, SSH stays closed to the outside: a loopback-only rule is how ParallelCluster
# expresses "no one" (its own default would be 0.0.0.0/0).
SSH_CLOSED_CIDR = "127.0.0.1/32"
PCLUSTER_VERSION = "3.16.1"


def resource_tags(spec: Spec) -> dict[str, str]:
    """Tags on everything fmcluster creates: the user's, plus the one ``status --refresh`` and ``destroy`` scan for."""
    return {**spec.tags, CLUSTER_TAG: spec.name, "fmcluster:version": __version__}


def compute_root_volume_gib(spec: Spec) -> int:
    # Container images and NCCL/EFA installs outgrow small roots quickly.
    return max(200, spec.head_node.root_volume_gib // 2)
