"""How long each burn-in level (issue 37) takes, per instance type and node count, from published durations: the
figures ``plan`` will show. Each part of an estimate says where its number comes from; a part no source gives a
number for is ``None`` and the total says it is unknown rather than guess.

The levels (issue 37): ``quick`` — device counts, DCGM level 1, the EFA provider; ``standard`` — DCGM level 2, EFA
loopback, a short NCCL pass; ``long`` — DCGM level 3 and a longer NCCL run. The device counts and the EFA provider
query are single queries with no published duration and are not itemised. Per-node checks run on every node at
once, so they do not grow with the node count; the NCCL part is one pass over disjoint pairs and, from three nodes,
one over the whole queue (with two nodes the pair is the queue).

What the estimate leaves out, said so no one reads it as wall-clock time: instance launch, job scheduling, NCCL
start-up, and the narrowing and retest rounds a failure adds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fmcluster.catalog.hardware import hardware

Level = Literal["quick", "standard", "long"]
LEVELS: tuple[Level, ...] = ("quick", "standard", "long")
_DCGM_DOC = ("NVIDIA DCGM docs, dcgmi diag reference (docs.nvidia.com/datacenter/dcgm/latest/reference/"
             "command-line-reference/dcgmi/dcgmi-diag.html), --run")
_NCCL_TESTS = "NVIDIA/nccl-tests README.md, Arguments (commit 01d6761451d62e5b968bd8806c92898928e069ec)"
# nccl-tests' default timed iterations per size (-n 20, same README); `long` runs five times as many, fmcluster's
# choice of "a longer NCCL run".
NCCL_ITERS: dict[Level, int] = {"quick": 0, "standard": 20, "long": 100}
# The ``dcgmi diag -r`` level each burn-in level runs (issue 37's levels; the run levels are DCGM's, same reference
# as ``_DCGM_DOC``): the check jobs pass it to ``dcgmi``, ``_dcgm`` below prices it.
DCGM_LEVEL: dict[Level, int] = {"quick": 1, "standard": 2, "long": 3}


@dataclass(frozen=True)
class Part:
    name: str
    low_s: float | None  # None: no source gives a number
    high_s: float | None
    source: str


@dataclass(frozen=True)
class Sweep:
    """One published all_reduce_perf sweep: the sum over its sizes of the out-of-place and in-place times (µs), one
    timed iteration of each."""

    microseconds: float
    source: str


# Sums of the time columns of the published 2-node runs fmcluster ships (tests/data/nccl-tests/SOURCES.md).
_AWS_SAMPLES = "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md, commit 0162aacd"
SWEEPS: dict[str, Sweep] = {
    "p5.48xlarge": Sweep(278058.2, f"all_reduce_perf -b 8 -e 16G on 2x p5.48xlarge, {_AWS_SAMPLES}"),
    "p4de.24xlarge": Sweep(225765.1, f"all_reduce_perf -b 8 -e 2G on 2x p4de.24xlarge, {_AWS_SAMPLES}"),
}


@dataclass(frozen=True)
class Estimate:
    level: Level
    instance_type: str
    nodes: int
    parts: tuple[Part, ...]

    @property
    def unknown(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parts if p.low_s is None or p.high_s is None)

    @property
    def seconds(self) -> tuple[float, float] | None:
        """(low, high) in seconds, or None when a part has no published number."""
        if self.unknown:
            return None
        return (sum(p.low_s or 0.0 for p in self.parts), sum(p.high_s or 0.0 for p in self.parts))


def estimate(level: str, instance_type: str, nodes: int) -> Estimate:
    if level not in LEVELS:
        raise ValueError(f"unknown burn-in level {level!r}; the levels: {', '.join(LEVELS)}")
    if nodes < 1:
        raise ValueError("a queue has at least one node")
    kind = hardware(instance_type).accelerator_kind
    parts = [_dcgm(level, kind)]
    if level == "quick":
        return Estimate(level, instance_type, nodes, tuple(parts))
    # fi_pingpong between two p4de.24xlarge printed 0.00 s for every size it sent (aws-samples/
    # awsome-distributed-training 1.architectures/efa-cheatsheet.md, the version with "What is Elastic Fabric Adapter
    # (EFA)?"; tests/data/burn-in/README.md): the loopback is under a second.
    parts.append(Part("EFA loopback (fi_pingpong)", 0.0, 1.0, "aws-samples/awsome-distributed-training "
                      "1.architectures/efa-cheatsheet.md, fi_pingpong -p efa on 2x p4de.24xlarge"))
    if nodes >= 2:
        parts.append(_nccl(level, instance_type, kind, 1 if nodes == 2 else 2))
    return Estimate(level, instance_type, nodes, tuple(parts))


def _dcgm(level: Level, kind: str | None) -> Part:
    if kind != "gpu":
        return Part("accelerator diagnostics", None, None, "no published duration for the Neuron checks"
                    if kind == "trainium" else "the catalog does not know the type's accelerators")
    if level == "quick":
        return Part("DCGM level 1", 1.0, 59.0, _DCGM_DOC + ': level 1 "normally lasting seconds"')
    if level == "standard":
        return Part("DCGM level 2", 120.0, 120.0, _DCGM_DOC + ': level 2 "approximately two minutes"')
    return Part("DCGM level 3", 900.0, 900.0, _DCGM_DOC + ': level 3 "approximately 15 minutes"')


def _nccl(level: Level, instance_type: str, kind: str | None, passes: int) -> Part:
    name = f"all_reduce_perf, {passes} pass(es) of {NCCL_ITERS[level]} iterations"
    sweep = SWEEPS.get(instance_type)
    if kind != "gpu" or sweep is None:
        return Part(name, None, None, f"no published all_reduce_perf run for {instance_type}")
    seconds = passes * NCCL_ITERS[level] * sweep.microseconds / 1e6
    return Part(name, seconds, seconds, f"{sweep.source}; iterations: {_NCCL_TESTS}")
