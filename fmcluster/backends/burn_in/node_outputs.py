"""What a burn-in check job brings back from one node: each tool's exit code and output, as the tool printed them.

The contract between the backends, which run the tools (a Slurm job on PCS and ParallelCluster, an MPIJob on EKS)
and carry their outputs home however their transport allows, and the one judge every backend shares, which reads
them with this package's readers. Nothing here runs a tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# The per-node checks, by the name the judge and the report use, and the command each runs on the node.
# ``dcgm``'s level comes from the burn-in level (:mod:`fmcluster.catalog.burn_in_levels`).
TOOLS: Mapping[str, str] = {
    "gpus": "nvidia-smi -L",
    "neuron": "neuron-ls",
    "efa": "fi_info -p efa -t FI_EP_RDM",
    "dcgm": "dcgmi diag -r LEVEL -j",
}


@dataclass(frozen=True)
class ToolRun:
    """One tool's run on a node. ``exit_code`` None: the tool is not installed there (the shell's 127), which the
    judge counts as a failed check, never as a pass."""

    exit_code: int | None
    stdout: str
    stderr: str = ""


@dataclass(frozen=True)
class NodeOutputs:
    """Every per-node tool that ran on ``node`` (the scheduler's name for it: a Slurm NodeName, a Kubernetes Node),
    by check name (:data:`TOOLS`). A check the level does not run is absent from ``runs``; a node that never
    answered has no NodeOutputs at all."""

    node: str
    runs: Mapping[str, ToolRun] = field(default_factory=dict)
