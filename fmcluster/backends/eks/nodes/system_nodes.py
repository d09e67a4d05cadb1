"""Where an EKS cluster's own software runs: the ``system`` managed node group.

Cluster software (the scheduler's controllers and webhooks, CoreDNS, the FSx CSI controller, the MPI Operator)
must outlive any Capacity Block's end or Spot reclaim, so it runs on a small On-Demand node group of its own,
selected by a label and kept free of other pods by a taint. The taint is the ``CriticalAddonsOnly`` one that EKS
uses for the same purpose (EKS Auto Mode's ``system`` NodePool; CoreDNS's add-on tolerates it), so EKS's own
add-ons land there with at most a nodeSelector.
"""

from __future__ import annotations

from typing import Any

NODEGROUP_NAME = "system"
# The node label that a controller's nodeSelector names (a label under fmcluster's own prefix).
LABEL_KEY = "fmcluster.io/node-role"
LABEL_VALUE = "system"
# As EKS's CreateNodegroup takes it (effect NO_SCHEDULE) and as the kubelet registers it on the Node.
TAINT_KEY = "CriticalAddonsOnly"
TAINT_VALUE = "true"
EKS_TAINT = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": "NO_SCHEDULE"}
KUBE_TAINT = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": "NoSchedule"}
# What a pod spec carries to land on the system nodes and only there.
NODE_SELECTOR = {LABEL_KEY: LABEL_VALUE}
TOLERATION = {"key": TAINT_KEY, "operator": "Equal", "value": TAINT_VALUE, "effect": "NoSchedule"}

# EKS's DescribeNodegroup statuses of a group at rest: nodes missing then are an outage, not a launch under way.
AT_REST = ("ACTIVE", "DEGRADED")


def problems(row: dict[str, Any]) -> list[str]:
    """A problem line when the system group, at rest, has fewer Ready nodes (as its Kubernetes API sees them) than
    its desired size: every controller and webhook of the cluster runs there, so jobs stop being admitted."""
    if row.get("name") != NODEGROUP_NAME or "nodes_ready" not in row or row.get("status") not in AT_REST:
        return []
    ready, desired = row["nodes_ready"], row.get("desired") or 0
    if ready >= desired:
        return []
    return [f"node group {NODEGROUP_NAME}: {ready} of {desired} nodes Ready: the cluster's own software (the "
            "scheduler's controllers and webhooks, CoreDNS, the MPI Operator) runs only there"]
