"""The UltraServer each node of an EKS UltraServer queue belongs to, written on the node as a label of fmcluster's,
so that Kueue's and KAI's ``Topology`` can put an UltraServer level under the network layers.

No label EKS or the node's own software sets names the UltraServer on a managed node group's nodes: EKS labels a
node with its network layers (EKS user guide, "Place distributed AI/ML workloads with network topology labels"),
NVIDIA's GPU Feature Discovery sets ``nvidia.com/gpu.clique`` (EKS user guide, "Use P6e-GB200 UltraServers with
Amazon EKS"), which fmcluster does not install. EC2 publishes the domain: DescribeInstanceTopology's
``CapacityBlockId`` "is only supported for UltraServer instances and identifies instances within the UltraServer
domain" (EC2 API reference, InstanceTopology), and may be null "immediately after launching instances" (the
operation's eventual-consistency note) as it is for an instance not yet running ("Topology views are only available
for: Instances in the running state", EC2 user guide, "Amazon EC2 topology").

One pass (:func:`label_queue`) reads the queue's nodes (``eks.amazonaws.com/nodegroup``, the label EKS gives a
managed node group's nodes), maps each to its instance by ``spec.providerID`` (``aws:///<zone>/<instance id>``),
asks EC2 for their topology, and patches only :data:`ULTRASERVER_LABEL` on a node whose value is missing or wrong.
A node EC2 gives no ``CapacityBlockId`` yet is left for the next pass and said. A value more nodes carry than one
UltraServer of the queue's type holds would name more than one NVLink domain: no node gets it, and the pass says so
(AWS's pages name the value the UltraServer domain; this guards the label's meaning should a block hold more).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fmcluster.aws.topology import instance_topology

#: fmcluster's node label naming the node's UltraServer (its value: EC2's CapacityBlockId for the instance).
ULTRASERVER_LABEL = "fmcluster.io/ultraserver"
#: EKS's label on a managed node group's nodes (EKS user guide, "Managed node groups").
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"


@dataclass(frozen=True)
class Node:
    name: str
    instance_id: str | None
    current: str | None  # its ULTRASERVER_LABEL now


@dataclass
class LabelPass:
    """What one pass did to a queue's nodes."""

    queue: str
    labelled: dict[str, str] = field(default_factory=dict)  # node -> value written now
    kept: dict[str, str] = field(default_factory=dict)  # node -> value it already had
    current: dict[str, str] = field(default_factory=dict)  # node -> its label now, where it has one
    waiting: list[str] = field(default_factory=list)  # nodes EC2 gives no UltraServer yet
    too_many: dict[str, list[str]] = field(default_factory=dict)  # value -> nodes, more than one UltraServer holds

    def lines(self) -> list[str]:
        said = []
        if self.labelled:
            said.append(f"{self.queue}: labelled {len(self.labelled)} node(s) {ULTRASERVER_LABEL} with their "
                        "UltraServer (EC2 DescribeInstanceTopology CapacityBlockId): "
                        + ", ".join(f"{n}={v}" for n, v in sorted(self.labelled.items())))
        if self.kept:
            said.append(f"{self.queue}: {len(self.kept)} node(s) already carry their UltraServer")
        if self.waiting:
            said.append(f"{self.queue}: {', '.join(sorted(self.waiting))}: EC2 gives no UltraServer yet (not running, "
                        "or just launched); labelled by the next `fmcluster create`, and until then Kueue leaves "
                        "the node out of the queue's topology")
        for value, nodes in sorted(self.too_many.items()):
            said.append(f"{self.queue}: {len(nodes)} nodes share {value}, more than one UltraServer holds: not "
                        f"labelled, as the label would name more than one NVLink domain ({', '.join(sorted(nodes))})")
        return said


def instance_of(provider_id: str | None) -> str | None:
    """The instance id of an EKS node's ``spec.providerID`` (``aws:///us-east-1a/i-0abc…``); None otherwise."""
    if not provider_id or not provider_id.startswith("aws://"):
        return None
    last = provider_id.rsplit("/", 1)[-1]
    return last if last.startswith("i-") else None


def decide(queue: str, nodes: list[Node], blocks: dict[str, str | None], per_ultraserver: int) -> LabelPass:
    """What to write: ``blocks`` is instance id -> CapacityBlockId (None or absent: not known yet)."""
    found = LabelPass(queue)
    wanted = {n.name: blocks.get(n.instance_id or "") for n in nodes}
    counts = Counter(v for v in wanted.values() if v)
    for node in nodes:
        if node.current:
            found.current[node.name] = node.current
        value = wanted[node.name]
        if not value:
            found.waiting.append(node.name)
        elif counts[value] > per_ultraserver:
            found.too_many.setdefault(value, []).append(node.name)
        elif node.current == value:
            found.kept[node.name] = value
        else:
            found.labelled[node.name] = value
    return found


def label_queue(api: Any, ec2: Any, queue: str, per_ultraserver: int, write: bool = True) -> LabelPass:
    """One pass over ``queue``'s nodes through the cluster's :class:`~fmcluster.backends.eks.kubernetes.access.KubeApi`
    and an EC2 client; patches only :data:`ULTRASERVER_LABEL` (a JSON merge patch of ``metadata.labels``), unless
    ``write`` is False (a plan: what it would write)."""
    from lightkube.resources.core_v1 import Node as KubeNode
    from lightkube.types import PatchType

    listed = api.call(f"listing the nodes of queue {queue}",
                      lambda: list(api.client.list(KubeNode, labels={NODEGROUP_LABEL: queue})))
    nodes = [Node(n.metadata.name, instance_of(n.spec.providerID if n.spec else None),
                  (n.metadata.labels or {}).get(ULTRASERVER_LABEL)) for n in listed]
    ids = [n.instance_id for n in nodes if n.instance_id]
    places = instance_topology(ec2, ids) if ids else {}
    found = decide(queue, nodes, {i: p.capacity_block_id for i, p in places.items()}, per_ultraserver)
    for name, value in found.labelled.items() if write else ():
        api.call(f"labelling node {name} with its UltraServer", lambda name=name, value=value: api.client.patch(
            KubeNode, name, {"metadata": {"labels": {ULTRASERVER_LABEL: value}}}, patch_type=PatchType.MERGE))
    return found


def ultraserver_queues(spec: Any) -> dict[str, int]:
    """The spec's queues whose nodes get :data:`ULTRASERVER_LABEL`: those on an UltraServer Capacity Block
    (``capacity.ultraserver``), each with how many instances one of its UltraServers holds (the catalog's
    UltraServer facts: EKS user guide, u-p6e-gb200x36 = 9, u-p6e-gb200x72 = 18)."""
    from fmcluster.spec.decisions import ultraserver_shape

    found: dict[str, int] = {}
    for queue in spec.queues:
        shape = ultraserver_shape(queue.capacity.ultraserver) if queue.capacity.ultraserver else None
        if shape is not None:
            found[queue.name] = shape.instances
    return found
