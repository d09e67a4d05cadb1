"""What an elastic queue's node group tells the Cluster Autoscaler about nodes it has not launched yet ("scale from
zero").

With no node to copy, the autoscaler builds a template node from the instance type (vCPUs, memory, GPU count) and,
for an EKS managed node group, from ``eks:DescribeNodegroup``: the node group's labels and taints, and the
``k8s.io/cluster-autoscaler/node-template/resources/<resource>`` entries among the node group's tags (reference
kubernetes-addons/README.md, "Scale from zero", read from ``aws_manager.go`` and ``managed_nodegroup_cache.go`` at
1.34.5 and 1.36.1). EKS copies no node group tag to the node group's Auto Scaling group (EKS API reference,
CreateNodegroup ``tags``: "Node group tags do not propagate to any other resources associated with the node group,
such as the Amazon EC2 instances or subnets"), so fmcluster puts them where the autoscaler reads them for a managed
node group: on the node group. Its labels and taints are the node group's own (fmcluster's queue,
device-plugin and system labels; the system taint), which the autoscaler reads the same way, so nothing about them is
repeated in tags. What the template cannot know without a tag is an extended resource a device plugin advertises:
NVIDIA GPUs (also derived from the instance type, but not for a type missing from the autoscaler's list), Neuron
devices, and EFA interfaces (never derived), so each goes in a tag, at what one node of the queue offers.
"""

from __future__ import annotations

from fmcluster.backends.eks.nodes import quotas
from fmcluster.spec.models import Queue

RESOURCE_TAG_PREFIX = "k8s.io/cluster-autoscaler/node-template/resources/"
DEVICE_RESOURCES = (quotas.NVIDIA_GPU, quotas.NEURON, quotas.EFA)


def nodegroup_tags(queue: Queue) -> dict[str, str]:
    """The node-template resource tags of an elastic queue's node group: one per device resource its nodes offer.
    The autoscaler uses a node group's first instance type for its template (its AWS README, mixed instance types),
    so the counts are the queue's first type's."""
    offered = quotas.node_resources(queue).quantities()
    return {f"{RESOURCE_TAG_PREFIX}{name}": offered[name] for name in DEVICE_RESOURCES if name in offered}
