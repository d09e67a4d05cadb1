"""EKS's default service quotas that a spec can pass, checked offline when the spec is loaded.

Amazon EKS User Guide, "Amazon EKS service quotas" (docs.aws.amazon.com/eks/latest/userguide/service-quotas.html):
"Managed node groups per cluster: 30" and "Nodes per managed node group: 450". Both are adjustable through
Service Quotas. Offline (``plan``, ``validate``, load) fmcluster holds a spec to these defaults; preflight reads the
account's applied values (:mod:`fmcluster.backends.eks.nodes.quota_check`), so a lowered quota is refused there. A
raised quota is still refused here: the offline check cannot know it.
"""

from __future__ import annotations

from fmcluster.spec.models import Queue

GUIDE_PAGE = "Amazon EKS User Guide, \"Amazon EKS service quotas\""
MANAGED_NODE_GROUPS_PER_CLUSTER = 30
NODES_PER_MANAGED_NODE_GROUP = 450


def most_nodes(queue: Queue) -> int:
    """The node group's maxSize: a fixed count, or the top of a range."""
    return queue.nodes if isinstance(queue.nodes, int) else queue.nodes.max
