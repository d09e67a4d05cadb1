"""Whether a Slurm cluster gets ``TopologyPlugin=topology/tree`` and the network tree from EC2 topology (issue 39).

On when a queue's instance type is one EC2 gives a topology (the catalog's ``network_layers``, from the EC2 user
guide's "Prerequisites for Amazon EC2 topology"): that is where placement under one switch pays. Off otherwise,
and off when the spec's own ``slurm.custom_settings`` names a ``TopologyPlugin`` (Slurm reads parameter names
case-insensitively, slurm.conf(5)): the user's choice wins, and fmcluster writes no topology.conf over theirs.
fmcluster writes no topology/block (Debian's Slurm 22.05, the one CI checks with, has none); where the backend
makes blocks itself (ParallelCluster for GB200 UltraServers) the cluster gets no tree from fmcluster either.
"""

from __future__ import annotations

from fmcluster.catalog.network_topology import network_layers
from fmcluster.spec.models import Spec, instance_types_of

TOPOLOGY_PLUGIN = "TopologyPlugin"
TREE = "topology/tree"


def user_topology_plugin(spec: Spec) -> bool:
    return any(name.lower() == TOPOLOGY_PLUGIN.lower() for name in spec.slurm.custom_settings)


def tree_topology(spec: Spec, scheduler_block_families: tuple[str, ...] = ()) -> bool:
    """True when fmcluster sets ``TopologyPlugin=topology/tree`` and keeps topology.conf for ``spec``. Never when a
    queue's family is one of ``scheduler_block_families``: the backend's own software writes Slurm's topology for
    it (ParallelCluster 3.14+ makes each p6e-gb200 UltraServer a block), and one cluster has one TopologyPlugin."""
    types = [t for queue in spec.queues for t in instance_types_of(queue)]
    if user_topology_plugin(spec) or any(t.split(".")[0] in scheduler_block_families for t in types):
        return False
    return any(network_layers(t) > 0 for t in types)
