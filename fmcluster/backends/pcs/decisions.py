"""Choices only a PCS cluster makes: its controller size, the OS of AWS's sample AMIs, where its nodes find
fmcluster's IMEX prolog."""

from __future__ import annotations

from fmcluster.spec.models import Spec, max_nodes

PCS_SIZE_LIMITS = {"SMALL": 32, "MEDIUM": 512, "LARGE": 2048}
# The OS AWS's PCS sample AMIs come in (PCS user guide, "Using sample AMIs": al2023 from Slurm 25.11 on).
PCS_SAMPLE_AMI_OS = "alinux2023"

# Where the PCS nodes find fmcluster's IMEX prolog (fmcluster/scripts/imex_prolog.sh installs itself there); the
# cluster's one Slurm Prolog names it.
PCS_IMEX_PROLOG = "/opt/fmcluster/prolog/imex.sh"


def pcs_size_for(total_nodes: int) -> str | None:
    for size, limit in PCS_SIZE_LIMITS.items():
        if total_nodes <= limit:
            return size
    return None


# The login node group's one node: PCS counts every node group's instances against the size.
LOGIN_NODES = 1


def pcs_nodes(spec: Spec) -> int:
    """The instances a PCS cluster's size must hold: every queue at its maximum, and the login node."""
    return sum(max_nodes(q) for q in spec.queues) + LOGIN_NODES


def pcs_size(spec: Spec) -> str:
    """The PCS controller size: as written, or the smallest that holds every node group at its maximum."""
    if spec.pcs.size != "auto":
        return spec.pcs.size
    return pcs_size_for(pcs_nodes(spec)) or "LARGE"
