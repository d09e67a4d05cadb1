"""Narrow a slow all-reduce to the node or the link that causes it, in at most ⌈log2 N⌉ + 1 rounds.

The model (the sandbox's too, sandbox/fmcluster_sandbox/kube/node_health.py): one fault, either a slow node (every
run it joins is slow) or a slow link between two nodes (a run is slow when both ends are in it). A run of one node
tells nothing about the network and is never made.

Why not pairs alone: a round of disjoint pair runs tries at most N/2 of the N(N-1)/2 links, so covering every link
takes N-1 rounds (a round-robin), not ⌈log2 N⌉ + 1. Instead each node gets a number, and round *j* runs the two
halves that bit *j* of the number splits the queue into, side by side. A slow node is slow in exactly the half
holding its number's bits, which spells the number out. A slow link's ends agree on some bits (that half is slow)
and differ on the others (both halves fast): what is left is a set of links ``{u, u xor mask}``, which share no
node, so the last round runs each as a pair at once and one of them is slow. ``none`` is the answer when every run
stayed fast. Each round keeps only the hypotheses every run so far agrees with, and stops as soon as one is left.

``measure(runs)`` runs the given disjoint runs together (one round) and says which were slow; what "slow" means
(a floor for that node count, or the other runs of the round) is the caller's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

Run = tuple[str, ...]
Measure = Callable[[list[Run]], Mapping[Run, bool]]
Kind = Literal["none", "node", "link"]


@dataclass(frozen=True)
class Hypothesis:
    kind: Kind
    nodes: tuple[str, ...] = ()

    def slows(self, run: Run) -> bool:
        return self.kind != "none" and all(node in run for node in self.nodes)

    def __str__(self) -> str:
        return {"none": "no slow node or link", "node": f"node {self.nodes[0] if self.nodes else '?'}",
                "link": "the link " + " – ".join(self.nodes)}[self.kind]


@dataclass(frozen=True)
class Finding:
    rounds: int
    # What the runs could not tell apart: one when narrowed down; none when no single slow node or link explains
    # them (two faults, or a run that was slow once and fast once).
    candidates: tuple[Hypothesis, ...]

    @property
    def found(self) -> Hypothesis | None:
        return self.candidates[0] if len(self.candidates) == 1 else None

    def summary(self) -> str:
        if not self.candidates:
            return (f"after {self.rounds} round(s) no single slow node or link explains the runs: more than one "
                    "fault, or a run that changed speed")
        if self.found is not None:
            return f"{self.found}, found in {self.rounds} round(s)"
        return f"after {self.rounds} round(s) the runs cannot tell apart: " + ", ".join(map(str, self.candidates))

    @property
    def suspects(self) -> tuple[str, ...]:
        """Every node some remaining candidate blames: the node, the link's two ends, or (two nodes) the pair."""
        return tuple(sorted({node for h in self.candidates for node in h.nodes}))


def round_bound(nodes: int) -> int:
    return math.ceil(math.log2(nodes)) + 1 if nodes > 1 else 0


def narrow(nodes: Sequence[str], measure: Measure, known: Mapping[Run, bool] | None = None,
           balanced: bool = False) -> Finding:
    """``known``: runs already measured (slow or not), e.g. a first round of pairs; every candidate they rule out
    is gone before the first round, which can only make the rounds fewer. ``balanced``: number the nodes in pairs
    of complements (``x`` and ``2^k - 1 - x``) instead of 0..N-1, so that every bit round's two halves hold the same
    number of nodes (within one for an odd N): a caller that can only compare runs of one size needs that. Any
    distinct numbers keep the argument above (a node's bits spell its number; a link's remaining candidates are
    ``{u, u xor mask}``)."""
    if len(nodes) < 2 or len(set(nodes)) != len(nodes):
        raise ValueError(f"narrowing needs two or more distinct nodes, got {list(nodes)}")
    order = list(nodes)
    candidates = [Hypothesis("none")] + [Hypothesis("node", (n,)) for n in order] + [
        Hypothesis("link", pair) for pair in combinations(order, 2)]
    if known:
        candidates = _keep(candidates, list(known), known)
    rounds = 0
    code = _complement_codes(len(order)) if balanced else list(range(len(order)))
    for bit in range(math.ceil(math.log2(len(order)))):
        if len(candidates) == 1:
            break
        halves = [tuple(n for i, n in enumerate(order) if (code[i] >> bit) & 1 == side) for side in (0, 1)]
        runs = [half for half in halves if len(half) >= 2]
        if not runs or not _splits(runs, candidates):
            continue
        candidates = _keep(candidates, runs, measure(runs))
        rounds += 1
    while len(candidates) > 1:
        runs = _pair_round(order, candidates)
        if not runs:
            break  # two nodes and a slow pair: nothing left to run tells node from node from link
        candidates = _keep(candidates, runs, measure(runs))
        rounds += 1
    return Finding(rounds, tuple(candidates))


def _complement_codes(count: int) -> list[int]:
    """``count`` distinct numbers below the next power of two, taken as pairs ``x``, ``top - x``: each pair has each
    bit set exactly once, so every bit splits the pairs evenly (the odd one out adds one to a side)."""
    top = (1 << math.ceil(math.log2(count))) - 1
    codes: list[int] = []
    for low in range(top // 2 + 1):
        codes += [low, top - low]
    return codes[:count]


def _keep(candidates: list[Hypothesis], runs: list[Run], slow: Mapping[Run, bool]) -> list[Hypothesis]:
    missing = [run for run in runs if run not in slow]
    if missing:
        raise ValueError(f"measure() answered nothing for run(s) {missing}")
    return [h for h in candidates if all(h.slows(run) == bool(slow[run]) for run in runs)]


def _splits(runs: list[Run], candidates: list[Hypothesis]) -> bool:
    return len({tuple(h.slows(run) for run in runs) for h in candidates}) > 1


def _pair_round(order: list[str], candidates: list[Hypothesis]) -> list[Run]:
    """Disjoint pairs that tell the remaining candidates apart, greedily: each pair is kept if it separates more
    candidates than the round without it."""
    chosen: list[Run] = []
    used: set[str] = set()
    # The links still suspected first (after the bit rounds they share no node), then every other pair.
    suspects = [h.nodes for h in candidates if h.kind == "link"]
    others = [pair for pair in combinations(order, 2) if pair not in suspects]
    classes = 1
    for pair in suspects + others:
        if classes == len(candidates):
            break  # every candidate already has its own outcome
        if used.intersection(pair):
            continue
        split = _classes(chosen + [pair], candidates)
        if split > classes:
            chosen.append(pair)
            used.update(pair)
            classes = split
    return chosen


def _classes(runs: list[Run], candidates: list[Hypothesis]) -> int:
    return len({tuple(h.slows(run) for run in runs) for h in candidates})
