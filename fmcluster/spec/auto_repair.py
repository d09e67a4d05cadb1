"""``queues[].auto_repair``: one knob for finding and repairing unhealthy nodes, on every backend.

What it becomes is each backend's own mechanism: on eks the node group's ``nodeRepairConfig`` and the
``eks-node-monitoring-agent`` add-on (:mod:`fmcluster.backends.eks.nodes.repair`), on pcs ``instanceHealthChecks``
and on parallelcluster ``HealthChecks.Gpu``. On the two Slurm backends those were, and stay, ``gpu_health_checks``;
``auto_repair`` is the same switch there, so a spec that writes both with different values is refused (which of
the two a Slurm backend follows: :mod:`fmcluster.backends.slurm.health_checks`).
"""

from __future__ import annotations

from fmcluster.catalog.hardware import hardware
from fmcluster.spec.models import Queue

# Accelerators the repair machinery of each backend watches: GPUs, and Trainium's Neuron devices (the EKS node
# monitoring agent's AcceleratedHardwareReady covers "GPU, Neuron", EKS User Guide "Automatically repair nodes").
REPAIRED_ACCELERATORS = ("gpu", "trainium", "inferentia")


def accelerated(queue: Queue) -> bool:
    facts = hardware(queue.instance_type)
    return facts.accelerator_kind in REPAIRED_ACCELERATORS and bool(facts.accelerators)


def auto_repair(queue: Queue) -> bool:
    """As written, else on for a queue of GPUs or Neuron devices."""
    if queue.auto_repair is not None:
        return queue.auto_repair
    return accelerated(queue)


def in_reservation(queue: Queue) -> bool:
    """A Capacity Block or an ODCR: a replaced instance needs a free slot in the reservation to come back."""
    return queue.capacity.type in ("capacity-block", "reservation")


def contradiction(queue: Queue) -> str | None:
    """Why a queue that writes both switches with different values is refused, or None."""
    written = queue.model_fields_set
    if "auto_repair" in written and "gpu_health_checks" in written and queue.auto_repair != queue.gpu_health_checks:
        return (f"auto_repair: {str(queue.auto_repair).lower()} contradicts gpu_health_checks: "
                f"{str(queue.gpu_health_checks).lower()}: on pcs and parallelcluster they are one switch (the GPU "
                "health checks); write only auto_repair")
    return None
