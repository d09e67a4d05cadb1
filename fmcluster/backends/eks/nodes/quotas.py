"""What one node of a queue offers Kubernetes, and the quota its scheduler queue holds, from fmcluster's facts.

The resource names are what the device plugins advertise: ``nvidia.com/gpu`` (NVIDIA's device plugin),
``vpc.amazonaws.com/efa`` (AWS's EFA device plugin: one per EFA interface the node has) and
``aws.amazon.com/neuron`` (the Neuron device plugin: one per Neuron device, i.e. Trainium chip). A queue's pods ask
for exactly the resources its nodes offer, so those are what its ClusterQueue must cover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from fmcluster.catalog.hardware import hardware
from fmcluster.spec import decisions
from fmcluster.spec.models import Queue, instance_types_of, max_nodes

CPU = "cpu"
MEMORY = "memory"
NVIDIA_GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
NEURON = "aws.amazon.com/neuron"
# The order Kueue lists them in: a ClusterQueue's flavors must name their resources in coveredResources' order.
RESOURCE_ORDER = (CPU, MEMORY, NVIDIA_GPU, NEURON, EFA)


@dataclass(frozen=True)
class NodeResources:
    """One node's capacity as Kubernetes counts it (before kubelet and system reservations)."""

    cpu: int
    memory_gib: int
    nvidia_gpus: int
    efa: int
    neuron_devices: int

    def quantities(self, nodes: int = 1) -> dict[str, str]:
        """Resource name -> Kubernetes quantity for ``nodes`` such nodes; only the nonzero ones, in RESOURCE_ORDER."""
        values = {CPU: (self.cpu * nodes, ""), MEMORY: (self.memory_gib * nodes, "Gi"),
                  NVIDIA_GPU: (self.nvidia_gpus * nodes, ""), NEURON: (self.neuron_devices * nodes, ""),
                  EFA: (self.efa * nodes, "")}
        return {name: f"{values[name][0]}{values[name][1]}" for name in RESOURCE_ORDER if values[name][0]}


def efa_interfaces(queue: Queue) -> int:
    """EFA devices a node of the queue advertises: the EFA interfaces fmcluster's launch template attaches (not a
    card-0 ENA interface a p6-b300 keeps), or 0 when EFA is off or the type has none."""
    if queue.efa is False or not hardware(queue.instance_type).efa_supported:
        return 0
    return sum(1 for interface in decisions.efa_network_interfaces(queue) if interface["efa"])


def node_resources(queue: Queue) -> NodeResources:
    """What one node of ``queue`` offers. LookupError when fmcluster cannot know its counts (a type outside the
    catalog whose DescribeInstanceTypes answer was never read): a quota guessed low would strand pods."""
    facts = hardware(queue.instance_type)
    if facts.source == "name" or facts.vcpus is None or facts.memory_gib is None:
        raise LookupError(
            f"the vCPUs, memory and accelerators of {queue.instance_type} are not in fmcluster's catalog and were "
            "not read from EC2 (DescribeInstanceTypes; run with an AWS endpoint once), so queue "
            f"'{queue.name}' has no quota its pods' requests could be checked against")
    accelerators = facts.accelerators or 0
    return NodeResources(
        cpu=facts.vcpus,
        memory_gib=math.floor(facts.memory_gib),
        nvidia_gpus=accelerators if facts.has_gpus else 0,
        efa=efa_interfaces(queue),
        neuron_devices=accelerators if facts.accelerator_kind in ("trainium", "inferentia") else 0,
    )


def per_type(queue: Queue) -> dict[str, NodeResources]:
    """What one node of each of the queue's instance types offers, in the spec's order (one entry for one type)."""
    return {name: node_resources(queue.model_copy(update={"instance_type": name})) for name in instance_types_of(queue)}


def largest_node(queue: Queue) -> NodeResources:
    """Per resource, the most any one node of the queue can offer: a node group of several types (EKS takes them in
    one ``instanceTypes`` list) may launch any of them, so each resource is bounded by the type with the most of it,
    not by the priciest type's figures for every resource."""
    nodes = list(per_type(queue).values())
    return NodeResources(*(max(getattr(node, field.name) for node in nodes) for field in fields(NodeResources)))


def queue_quota(queue: Queue) -> dict[str, str]:
    """Kubernetes resource name -> quantity the queue holds at its most nodes (only nonzero resources), for a
    scheduler queue with one quota whatever type its nodes are (Volcano, KAI): the largest node per resource."""
    return largest_node(queue).quantities(max_nodes(queue))


def flavor_quotas(queue: Queue) -> dict[str, dict[str, str]]:
    """Instance type -> its quota at the queue's most nodes, for each of ``covered_resources`` ("0" where the type
    has none): a Kueue flavor of one type holds what that type offers, so pods asking for a p5's resources are not
    admitted against g6.xlarge nodes (each flavor lists every covered resource, as Kueue requires)."""
    covered = covered_resources(queue)
    quotas = {}
    for name, node in per_type(queue).items():
        held = node.quantities(max_nodes(queue))
        quotas[name] = {resource: held.get(resource, "0") for resource in covered}
    return quotas


def covered_resources(queue: Queue) -> list[str]:
    """The resource names the queue's pods ask for (what its ClusterQueue must cover), in RESOURCE_ORDER."""
    return list(queue_quota(queue))
