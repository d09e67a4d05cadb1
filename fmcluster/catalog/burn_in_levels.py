"""How long each burn-in level (issue 37) takes, per instance type and node count, from published durations: the
figures ``plan`` will show. Each part of an estimate says where its number comes from; a part no source gives a
number for is ``None`` and the total says it is unknown rather than guess.

The levels (issue 37): ``quick`` — device counts, DCGM level 1, the EFA provider; ``standard`` — DCGM level 2, EFA
loopback, a short NCCL pass; ``long`` — DCGM level 3 and a longer NCCL run. The device counts and the EFA provider
query are single queries with no published duration and are not itemised. Per-node checks run on every node at
once, so they do not grow with the node count.

The NCCL part counts the rounds fmcluster/backends/burn_in/rounds.py runs over N healthy nodes (:func:`nccl_rounds`;
the runs of one round go side by side, so a round takes one run's time), each run one all_reduce_perf sweep of the
level's iterations, timed from the published 2-node capture (no larger run's time is published: a larger run is
counted at the pair's time). The count is a range, because one part of it depends on what the backend knows of the
network: ``low`` is the count without the nodes' EC2 topology (the Slurm backends, and any type EC2 gives none for),
``high`` the most rounds the topology can add on a type EC2 gives one for (EKS reads it from the nodes' labels).

What the estimate leaves out, said so no one reads it as wall-clock time: instance launch, job scheduling, NCCL
start-up, and the rounds a failure adds (a retest after a repair; without the topology, one more narrowing round).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from fmcluster.catalog.hardware import hardware
from fmcluster.catalog.network_topology import network_layers

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
        parts.append(_nccl(level, instance_type, kind, nccl_rounds(nodes, network_layers(instance_type))))
    return Estimate(level, instance_type, nodes, tuple(parts))


def nccl_rounds(nodes: int, layers: int) -> tuple[int, int]:
    """(low, high): the all-reduce rounds fmcluster/backends/burn_in/rounds.py runs over ``nodes`` healthy nodes
    (every run fast), without and with the nodes' EC2 topology; ``layers``: the network nodes EC2 gives the type
    (:func:`fmcluster.catalog.network_topology.network_layers`, 0: none, and then low == high).

    Without the topology:

    * one round of disjoint pairs, and a round of its own for an odd node out;
    * from three nodes, narrowing (fmcluster/backends/burn_in/narrow.py, ``balanced``) told the pairs were fast: the
      pairs ruled out every slow node and the links they tried, so the candidates left are "none" and the untried
      links. Bit round *j* runs the two halves bit *j* of the nodes' numbers splits them into, when some untried
      link lies inside a half. The balanced numbers pair complements (``x``, ``2^k - 1 - x``) in the pairs' own order,
      so the links the bit rounds cannot try (ends differing in every bit) are the pairs already tried and no last
      round of pairs is needed; from four nodes every one of the ⌈log2 N⌉ bit rounds still has an untried link
      inside a half; with three, the odd node's extra pair leaves one untried link, which the first bit round tries.

    With the topology the pairs are neighbours first (not the narrowing's complements, so its last round of pairs
    may run: its bound, ⌈log2 N⌉ + 1), and each kind of crossing (through layer 1 .. ``layers`` - 1, across spines:
    ``layers`` kinds) adds at most a round of pairs; with two nodes, at most one (the pair again, when its two ends
    hang off different bottom nodes). Checked against the rounds themselves on simulated healthy fabrics
    (tests/catalog/test_burn_in_rounds_count.py)."""
    if nodes < 2:
        return (0, 0)
    odd = nodes % 2
    if nodes == 2:
        low = 1
        narrowing_bound = 0
    else:
        bits = math.ceil(math.log2(nodes))
        low = 1 + odd + (1 if nodes == 3 else bits)
        narrowing_bound = bits + 1
    if not layers:
        return (low, low)
    if nodes == 2:
        return (low, low + 1)
    return (low, 1 + odd + layers + narrowing_bound)


def _dcgm(level: Level, kind: str | None) -> Part:
    if kind != "gpu":
        return Part("accelerator diagnostics", None, None, "no published duration for the Neuron checks"
                    if kind == "trainium" else "the catalog does not know the type's accelerators")
    if level == "quick":
        return Part("DCGM level 1", 1.0, 59.0, _DCGM_DOC + ': level 1 "normally lasting seconds"')
    if level == "standard":
        return Part("DCGM level 2", 120.0, 120.0, _DCGM_DOC + ': level 2 "approximately two minutes"')
    return Part("DCGM level 3", 900.0, 900.0, _DCGM_DOC + ': level 3 "approximately 15 minutes"')


def _nccl(level: Level, instance_type: str, kind: str | None, rounds: tuple[int, int]) -> Part:
    low, high = rounds
    counted = f"{low} round{'s' if low != 1 else ''}" if low == high else f"{low} to {high} rounds"
    name = f"all_reduce_perf, {counted} of {NCCL_ITERS[level]} iterations"
    sweep = SWEEPS.get(instance_type)
    if kind != "gpu" or sweep is None:
        return Part(name, None, None, f"no published all_reduce_perf run for {instance_type}")
    run_s = NCCL_ITERS[level] * sweep.microseconds / 1e6
    return Part(name, low * run_s, high * run_s, f"{sweep.source}; iterations: {_NCCL_TESTS}; rounds: those "
                "fmcluster/backends/burn_in/rounds.py runs on healthy nodes, fewest without the nodes' EC2 "
                "topology, most with it")
