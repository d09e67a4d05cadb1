"""The network topology the EKS schedulers are given: per instance type, the node labels of its levels, top-down,
and one named level list per distinct shape (Kueue's and KAI's ``Topology`` objects).

Levels, top-down (Kueue's Topology-Aware Scheduling: the lowest level should be ``kubernetes.io/hostname``; the
pinned Kueue and KAI Topology CRDs allow the hostname label only as the last level):

* ``topology.k8s.aws/network-node-layer-1`` .. ``-N``: the labels EKS puts on a node of a type EC2 topology
  describes (EKS user guide, "Place distributed AI/ML workloads with network topology labels"), N from
  :func:`fmcluster.catalog.network_topology.network_layers`;
* for a type whose NVLink domain spans an UltraServer (p6e-gb200), the UltraServer, when the caller names the node
  label that carries it (``ultraserver_label``): :data:`ULTRASERVER_LABEL`, fmcluster's own, which `create` writes on
  every node of an UltraServer queue with EC2 DescribeInstanceTopology's ``CapacityBlockId`` for its instance ("only
  supported for UltraServer instances and identifies instances within the UltraServer domain", EC2 API reference,
  InstanceTopology; :mod:`fmcluster.backends.eks.nodes.ultraserver_labels`). Not NVIDIA's ``nvidia.com/gpu.clique``:
  GPU Feature Discovery sets it, and fmcluster installs none. A node without the label drops out of the level: Kueue's
  TAS lists a flavor's nodes with every level label required (``client.HasLabels`` of the levels in
  ``TASFlavorCache.snapshot``; read in Kueue's source, not run), so a node that joined after the last `create` (a
  replacement) takes no topology-aware workload until the next `create` labels it; Volcano's label discovery starts
  each node's walk at the lowest level above the hostname and stops at the first label missing;
* ``kubernetes.io/hostname``.

A type without topology (0 layers) has no levels: its queues get no Topology.
"""

from __future__ import annotations

from collections.abc import Iterable

from fmcluster.backends.eks.nodes import ultraserver_labels
from fmcluster.catalog import instance
from fmcluster.catalog.hardware import hardware
from fmcluster.catalog.network_topology import network_layers

LAYER_LABEL = "topology.k8s.aws/network-node-layer-{}"
ULTRASERVER_LABEL = ultraserver_labels.ULTRASERVER_LABEL
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _nvlink_ultraserver(instance_type: str) -> bool:
    """An NVIDIA type sold as UltraServers, whose NVLink domain spans instances (same test as
    :func:`fmcluster.spec.decisions.needs_imex`, by type)."""
    facts = instance(instance_type)
    return facts is not None and facts.ultraserver is not None and hardware(instance_type).has_gpus


def levels(instance_type: str, ultraserver_label: str | None = None) -> list[str]:
    """The node labels of ``instance_type``'s topology levels, top-down; [] when EC2 gives it no topology. An
    UltraServer type gets ``ultraserver_label`` under the network layers when the caller names one (its nodes carry
    it)."""
    layers = network_layers(instance_type)
    if not layers:
        return []
    labels = [LAYER_LABEL.format(n) for n in range(1, layers + 1)]
    if ultraserver_label is not None and _nvlink_ultraserver(instance_type):
        labels.append(ultraserver_label)
    return [*labels, HOSTNAME_LABEL]


def name(level_list: list[str]) -> str:
    """The name of the Topology for ``level_list``: ``network-3-layers``, ``network-4-layers``, or
    ``ultraserver-3-layers`` when an UltraServer level sits under the network layers. At most 20 characters (the
    longest topology type name Volcano's label discovery accepts, should Volcano get it)."""
    layers = sum(1 for label in level_list if label.startswith(LAYER_LABEL.format("")))
    kind = "network" if len(level_list) == layers + 1 else "ultraserver"  # the layers and the hostname, or more
    return f"{kind}-{layers}-layers"


def topologies(instance_types: Iterable[str], ultraserver_label: str | None = None) -> dict[str, list[str]]:
    """One named level list per distinct shape among ``instance_types``, in first-seen order."""
    found: dict[str, list[str]] = {}
    for instance_type in instance_types:
        level_list = levels(instance_type, ultraserver_label)
        if level_list:
            found.setdefault(name(level_list), level_list)
    return found
