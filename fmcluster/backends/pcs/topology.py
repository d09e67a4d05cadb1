"""Slurm's network topology on AWS PCS (issue 39): what PCS does itself, what fmcluster leaves alone, and why.

AWS runs the PCS controller, so fmcluster cannot keep a topology.conf there as it does on ParallelCluster's head
node. Two PCS user guide pages say what PCS does instead:

* "Network topology-aware scheduling in AWS PCS" (docs.aws.amazon.com/pcs/latest/userguide/network-topology.html):
  "AWS PCS tells Slurm where each compute node sits in the network. Slurm's topology/tree plugin then allocates
  each multi-node job under the lowest-level switch that can satisfy it", enabled per queue. The setting that
  enables it was not readable in the copy of the page fmcluster was checked against, botocore's PCS model has no
  topology field (Queue/QueueSlurmConfiguration hold only ``slurmCustomSettings``), and PCS's queue allow-list
  ("Custom Slurm settings for AWS PCS queues") names no topology setting: fmcluster does not guess one, and says
  so in ``render``/``validate``.
* "Configure UltraServer instances" (docs.aws.amazon.com/pcs/latest/userguide/capacity-blocks-nvidia-imex.html):
  "When you create a AWS PCS cluster with UltraServer compute node groups, the system inspects the Capacity Block,
  identifies the UltraServer type, and configures Slurm with the appropriate topology plugin". fmcluster sets no
  topology setting beside it, and says so in ``plan``.

A Slurm setting named ``Topology…`` (TopologyPlugin, TopologyParam, a partition's Topology; Slurm reads names
case-insensitively, slurm.conf(5)) is refused on PCS with these reasons rather than the allow-list's alone.
"""

from __future__ import annotations

from fmcluster.catalog.network_topology import network_layers
from fmcluster.spec import decisions
from fmcluster.spec.backend_rules import Report
from fmcluster.spec.models import Queue, Spec, instance_types_of

NETWORK_PAGE = "PCS user guide, 'Network topology-aware scheduling in AWS PCS'"
ULTRASERVER_PAGE = "PCS user guide, 'Configure UltraServer instances'"
ULTRASERVER_QUOTE = ("the system inspects the Capacity Block, identifies the UltraServer type, and configures Slurm "
                     "with the appropriate topology plugin")


def is_topology_setting(name: str) -> bool:
    return name.lower().startswith("topology")


def setting_problem(name: str) -> str | None:
    """The refusal for a topology setting of the user's on PCS, or None for any other name."""
    if not is_topology_setting(name):
        return None
    return (f"not supported on pcs: {name} is not a custom setting PCS takes, and PCS keeps Slurm's topology itself: "
            f"it tells Slurm where each compute node sits ({NETWORK_PAGE}) and, for UltraServer node groups, "
            f"{ULTRASERVER_QUOTE} ({ULTRASERVER_PAGE}); use the parallelcluster backend to choose the plugin "
            "yourself")


def ultraserver_queues(spec: Spec) -> list[tuple[int, Queue]]:
    """The NVIDIA UltraServer queues, the ones the UltraServer page is about (p6e-gb200, p6e-gb300)."""
    return [(index, queue) for index, queue in enumerate(spec.queues) if decisions.needs_imex(queue)]


def check(spec: Spec, warn: Report) -> None:
    """Say, where ``plan`` prints it, that PCS picks the UltraServer queues' topology plugin and fmcluster none."""
    queues = ultraserver_queues(spec)
    if not queues:
        return
    names = ", ".join(queue.name for _, queue in queues)
    index, _ = queues[0]
    warn(("queues", index, "instance_type"),
         f"queue {names}: PCS chooses Slurm's topology itself ({ULTRASERVER_PAGE}: \"{ULTRASERVER_QUOTE}\"); "
         "fmcluster sets no topology setting beside it")


def network_tree_note(spec: Spec) -> str | None:
    """The ``render``/``validate`` note for queues of types EC2 gives a network topology (not UltraServers): their
    tree is PCS's to enable, and fmcluster does not enable it."""
    ultra = {queue.name for _, queue in ultraserver_queues(spec)}
    names = [queue.name for queue in spec.queues
             if queue.name not in ultra and any(network_layers(t) > 0 for t in instance_types_of(queue))]
    if not names:
        return None
    return (f"queue {', '.join(names)}: no Slurm network tree from fmcluster on PCS. PCS's own topology-aware "
            f"scheduling is enabled per queue ({NETWORK_PAGE}); botocore's PCS model has no field for it and PCS's "
            "queue allow-list no setting fmcluster could send, so fmcluster does not turn it on. "
            "`fmcluster topology NAME` shows where the nodes sit")
