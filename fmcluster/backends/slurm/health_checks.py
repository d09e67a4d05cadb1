"""The GPU health checks of the two Slurm backends (PCS's ``instanceHealthChecks``, ParallelCluster's
``HealthChecks.Gpu``): one switch, written as ``gpu_health_checks`` or as ``auto_repair`` (the spec refuses the two
with different values, :func:`fmcluster.spec.auto_repair.contradiction`)."""

from __future__ import annotations

from fmcluster.spec.models import Queue


def health_checks_field(queue: Queue) -> str:
    """The field a Slurm backend's GPU health checks follow: auto_repair where written, else gpu_health_checks."""
    return "auto_repair" if queue.auto_repair is not None else "gpu_health_checks"


def slurm_health_checks(queue: Queue) -> bool:
    """Whether the Slurm backends turn on their GPU health checks for the queue (before their own limits)."""
    return queue.auto_repair if queue.auto_repair is not None else queue.gpu_health_checks
