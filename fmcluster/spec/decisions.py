"""Defaults that depend on more than one field: the single place each such choice is made.

Templates never decide; they lay out what these functions return.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster import catalog
from fmcluster.catalog.hardware import hardware
from fmcluster.spec.backend_rules import backend_rules, runs_head_node
from fmcluster.spec.field_types import Backend
from fmcluster.spec.models import Queue, Spec


def operating_system(spec: Spec) -> str:
    """The nodes' OS: the spec's, else that of the image the backend boots by default."""
    if spec.os is not None:
        return spec.os
    return backend_rules(spec.backend).default_os


def head_node_type(spec: Spec) -> str | None:
    """The instance type of the cluster's own node besides the queues' (head or login node), or None when the
    backend runs none (its scheduler lives on a managed control plane)."""
    return spec.head_node.instance_type if runs_head_node(spec.backend) else None


def efa_enabled(queue: Queue) -> bool:
    """EFA is on wherever the instance supports it, unless the spec says otherwise."""
    if queue.efa is not None:
        return queue.efa
    return bool(hardware(queue.instance_type).efa_supported)


def efa_network_interfaces(queue: Queue) -> list[dict[str, int | bool]]:
    """The launch template's interfaces: one EFA interface per EFA-capable network card.

    Where card 0 cannot carry EFA (p6-b300), it keeps a plain ENA interface for the security groups
    and EFA goes on cards 1..N. A card EC2 allows only ``efa-only`` interfaces on (p6e-gb200's odd cards,
    DescribeInstanceTypes NetworkCards[].InterfaceTypes) gets one (``efa_only``). Returns [] when EFA is off;
    raises LookupError when the layout is unknown.
    """
    if not efa_enabled(queue):
        return []
    facts = hardware(queue.instance_type)
    if not facts.efa_supported or not facts.network_cards:
        return [{"card": 0, "device": 0, "efa": True, "efa_only": False}]
    count = facts.efa_interfaces
    if count is None:
        raise LookupError(f"the EFA interface layout of {queue.instance_type} is not in fmcluster's catalog and not "
                          "read from EC2 yet (DescribeInstanceTypes MaximumEfaInterfaces; run with an AWS "
                          "endpoint once)")
    # One EFA interface per card: a type that allows more EFA interfaces than it has cards still gets one per card.
    count = min(count, facts.network_cards)
    # AWS: the primary interface is card 0, device 0; every additional one takes the next card, device 1.
    only = facts.efa_only_cards
    if facts.network_cards > count:
        return [{"card": 0, "device": 0, "efa": False, "efa_only": False}] + [
            {"card": card, "device": 1, "efa": True, "efa_only": card in only} for card in range(1, count + 1)
        ]
    return [{"card": 0, "device": 0, "efa": True, "efa_only": 0 in only}] + [
        {"card": card, "device": 1, "efa": True, "efa_only": card in only} for card in range(1, count)
    ]


def placement_group_enabled(queue: Queue) -> bool:
    """auto: on for on-demand and spot; off for ODCRs and Capacity Blocks, which AWS places itself."""
    if queue.placement_group != "auto":
        return bool(queue.placement_group)
    return queue.capacity.type in ("on-demand", "spot") and efa_enabled(queue)


def compute_resource_name(queue: Queue, backend: Backend) -> str:
    """What the backend calls the queue's group of nodes (compute resource, compute node group)."""
    return backend_rules(backend).compute_resource_name(queue)


@dataclass(frozen=True)
class UltraServerShape:
    """One EC2 UltraServer type: its instance type, how many instances, and accelerators in its one domain."""

    name: str
    instance_type: str
    instances: int
    accelerators: int | None
    domain: str | None  # the link that spans it (NVLink 5, NeuronLink-v3)


def ultraserver_shape(name: str) -> UltraServerShape | None:
    """From the catalog's UltraServer facts (instance-facts.yaml: EKS user guide, AWS Neuron 'Trn2 architecture')."""
    for instance_type in catalog.instance_names():
        facts = catalog.instance(instance_type)
        if facts is None or facts.ultraserver is None or name not in facts.ultraserver.types:
            continue
        shape = facts.ultraserver.types[name]
        link = facts.interconnect.name if facts.interconnect else None
        return UltraServerShape(name, instance_type, shape.instances, shape.accelerators, link)
    return None


# Where AWS publishes Neuron packages (Neuron documentation, setup: Ubuntu 22.04 / 24.04 and Amazon Linux 2023).
NEURON_OS = ("ubuntu2204", "ubuntu2404", "alinux2023")


def needs_neuron(queue: Queue) -> bool:
    """Trainium and Inferentia nodes: their accelerators work only with the Neuron driver."""
    return hardware(queue.instance_type).accelerator_kind in ("trainium", "inferentia")


def needs_imex(queue: Queue) -> bool:
    """NVIDIA nodes whose NVLink domain spans instances (the p6e-gb200 UltraServers): their GPUs reach each other's
    memory only through NVIDIA IMEX, configured per job (PCS user guide, 'Configure UltraServer instances')."""
    facts = catalog.instance(queue.instance_type)
    return facts is not None and facts.ultraserver is not None and hardware(queue.instance_type).has_gpus


def imex_prolog(spec: Spec) -> bool:
    return any(needs_imex(queue) for queue in spec.queues)


def job_exclusive(queue: Queue) -> bool:
    """Whole nodes per job: on for accelerator queues (training uses every GPU and EFA interface of a node, and a
    second job on the node would contend for them), off for CPU queues (preprocessing packs many small jobs)."""
    if queue.job_exclusive is not None:
        return queue.job_exclusive
    return bool(hardware(queue.instance_type).accelerators)


def queue_root_volume_gib(spec: Spec, queue: Queue) -> int:
    """A compute node's root volume: as written, else room for container images and NCCL/EFA installs."""
    if queue.root_volume_gib is not None:
        return queue.root_volume_gib
    return max(200, spec.head_node.root_volume_gib // 2)


DEFAULT_SCRATCH_MOUNT = "/local_scratch"


def scratch_mount(queue: Queue) -> str | None:
    """Where the instance-store NVMe goes: as written, else /local_scratch on types that have it."""
    if queue.scratch_mount is not None:
        return queue.scratch_mount
    return DEFAULT_SCRATCH_MOUNT if hardware(queue.instance_type).nvme_gb else None
