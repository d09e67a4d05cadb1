"""The NCCL half of the gate, the same for every backend: all-reduce runs over the nodes that passed their own
checks, judged, and a slow result narrowed to its node or link (:mod:`.narrow`).

The backend supplies ``measure(runs) -> {run: bus bandwidth GB/s | None}``: it runs the given disjoint runs side by
side (one round) and says each one's peak all-reduce bus bandwidth, None for a run that did not finish.

1. **Pairs.** The nodes in disjoint pairs, one round, each pair judged against the 2-node floor (the spec's
   ``burn_in.floors`` over the catalog's, :func:`fmcluster.spec.burn_in.burn_in`). An odd node out is paired again,
   in a round of its own, with a node whose pair was fast, so every node is in a judged pair. Where the backend knows
   each node's place in the network (EC2 DescribeInstanceTopology's network nodes), the pairs are neighbours first
   (:func:`.pairs.neighbour_pairs`), then a round of pairs that cross each layer the queue spans
   (:func:`.pairs.across_rounds`), and the report gives the bus bandwidth per layer crossed (issue 39).
2. **Narrowing**, when a pair was slow or there are three or more nodes (disjoint pairs try only N/2 of the
   N(N-1)/2 links, so a slow link between two pairs hides from them): :func:`.narrow.narrow`, told what the pairs
   showed, runs its rounds of larger runs. What "slow" means there:

   * a run of two nodes: below the catalog's 2-node floor, or it did not finish;
   * a run of more nodes: it did not finish, or its bus bandwidth is below :data:`RELATIVE_SLOW` (80 %) of the
     fastest run of about its size measured so far (its own round included): the same node count, or one more or
     one fewer. The catalog has no floor for those node counts and none is made up: bus bandwidth falls as nodes
     are added (2 → 4 nodes can cost a third of it), so only runs of about one size compare; from three nodes up,
     one node more moves the hardware ceiling of :mod:`fmcluster.catalog.nccl_floors` by under 10 %, well inside
     the margin. 80 % is the margin the catalog's floors leave below their own measurements (nccl_floors.yaml):
     run-to-run spread on a healthy fabric stays inside it, while one link at half speed drags a ring all-reduce
     to about half. Narrowing numbers the nodes so each round's two halves are the same size (within one node,
     ``narrow(balanced=True)``), so each has the other to compare with. A run with nothing of about its size to
     compare with (the 3-node half beside a pair, with five nodes) counts as fast, and the report says so.

The report lists every run (nodes, bus bandwidth, the floor or the reference it was judged by, slow, round) and the
finding: the node or link, the rounds the narrowing used (at most ⌈log2 N⌉ + 1), and the rounds in all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fmcluster.backends.burn_in import narrow, pairs
from fmcluster.catalog.burn_in_levels import NCCL_ITERS, Level

Run = tuple[str, ...]
Measure = Callable[[list[Run]], Mapping[Run, float | None]]
RELATIVE_SLOW = 0.8


@dataclass
class RunResult:
    nodes: Run
    round: int
    busbw_gb_s: float | None
    slow: bool
    floor_gb_s: float | None = None  # pairs: the catalog's floor
    reference_gb_s: float | None = None  # larger runs: the fastest run of the same size it was compared with
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "round": self.round, "busbw_gb_s": self.busbw_gb_s,
                "floor_gb_s": self.floor_gb_s, "reference_gb_s": self.reference_gb_s, "slow": self.slow,
                "detail": self.detail}


@dataclass
class NcclReport:
    runs: list[RunResult] = field(default_factory=list)
    finding: narrow.Finding | None = None  # None: no narrowing was needed
    rounds: int = 0
    layers: list[pairs.LayerFigure] = field(default_factory=list)  # empty: no node's place in the network known

    @property
    def passed(self) -> bool:
        """No run slow, and no narrowing that blamed a node or a link."""
        if self.finding is not None:
            return self.finding.found is not None and self.finding.found.kind == "none"
        return not any(r.slow for r in self.runs)

    @property
    def suspects(self) -> tuple[str, ...]:
        """The nodes the NCCL part blames: a slow node, a slow link's two ends, or every candidate left."""
        if self.finding is not None:
            return self.finding.suspects
        return tuple(sorted({n for r in self.runs if r.slow for n in r.nodes}))

    def finding_json(self) -> dict[str, Any] | None:
        if self.finding is None:
            if not self.runs:
                return None
            slow = [r for r in self.runs if r.slow]
            return {"kind": "link" if slow else "none", "nodes": list(slow[0].nodes) if slow else [],
                    "summary": f"the pair {' – '.join(slow[0].nodes)} is slow" if slow else "every pair is fast",
                    "narrowing_rounds": 0, "rounds": self.rounds}
        found = self.finding.found
        return {"kind": found.kind if found else "unresolved", "nodes": list(found.nodes if found else
                                                                              self.finding.suspects),
                "summary": self.finding.summary(), "narrowing_rounds": self.finding.rounds, "rounds": self.rounds,
                "round_bound": narrow.round_bound(len({n for r in self.runs for n in r.nodes}))}

    def to_json(self) -> dict[str, Any]:
        return {"runs": [r.to_json() for r in self.runs], "finding": self.finding_json(), "rounds": self.rounds,
                "layers": [layer.to_json() for layer in self.layers]}


def after_checks(passed: Sequence[str], level: Level, pair_floor_gb_s: float | None, measure: Measure,
                 paths: Mapping[str, pairs.Path] | None = None) -> tuple[NcclReport | None, str]:
    """The all-reduce part of a burn-in over the nodes that ``passed`` their own checks: its report (None when it
    does not run) and the note that says over what it ran, or why not."""
    if not NCCL_ITERS[level]:
        return None, f"level {level} runs no all-reduce"
    if len(passed) < 2 or pair_floor_gb_s is None:
        return None, f"{len(passed)} node(s) passed their own checks: an all-reduce over EFA needs two"
    return run(passed, pair_floor_gb_s, measure, paths), f"{len(passed)} node(s) that passed their own checks"


def run(nodes: Sequence[str], pair_floor_gb_s: float, measure: Measure,
        paths: Mapping[str, pairs.Path] | None = None) -> NcclReport:
    """The rounds over ``nodes`` (the passed nodes, two or more); ``paths``: each node's network nodes from the top
    layer down, where known."""
    if len(nodes) < 2:
        raise ValueError("the NCCL rounds need two or more nodes")
    report = NcclReport()
    best: dict[int, float] = {}
    figures: dict[pairs.Pair, float | None] = {}

    def measured(runs: list[Run]) -> dict[Run, bool]:
        report.rounds += 1
        answers = measure(runs)
        for size in {len(r) for r in runs}:  # the round's own runs are their first reference
            found = [answers.get(r) for r in runs if len(r) == size]
            fastest = max((f for f in found if f is not None), default=None)
            if fastest is not None and size > 2:
                best[size] = max(best.get(size, 0.0), fastest)
        verdicts = {}
        for run_nodes in runs:
            size = len(run_nodes)
            near = [best[k] for k in (size - 1, size, size + 1) if k > 2 and k in best]
            result = _judged(run_nodes, report.rounds, answers.get(run_nodes), pair_floor_gb_s,
                             max(near, default=None))
            report.runs.append(result)
            verdicts[run_nodes] = result.slow
            if size == 2:
                figures[(run_nodes[0], run_nodes[1])] = result.busbw_gb_s
        return verdicts

    order = list(nodes)
    placed = {node: path for node, path in (paths or {}).items() if node in order and path}
    if placed:
        first: list[Run] = list(pairs.neighbour_pairs(order, placed))
    else:
        first = [tuple(order[i:i + 2]) for i in range(0, len(order) - 1, 2)]
    known = measured(first)
    paired = {node for run_nodes in first for node in run_nodes}
    for odd in (node for node in order if node not in paired):
        partner = next((p[0] for p in first if not known[p]), first[0][0])
        known.update(measured([(odd, partner)]))
    if placed:
        for crossing in pairs.across_rounds(order, placed):
            known.update(measured(list(crossing)))
    if any(known.values()) or len(order) >= 3:
        report.finding = narrow.narrow(order, measured, known, balanced=True)
    if placed:
        report.layers = pairs.bandwidth_per_layer(figures, placed)
    return report


def _judged(nodes: Run, round_: int, busbw: float | None, floor: float, reference: float | None) -> RunResult:
    if busbw is None:
        return RunResult(nodes, round_, None, True, floor if len(nodes) == 2 else None, None,
                         "the all-reduce did not finish")
    if len(nodes) == 2:
        slow = busbw < floor
        return RunResult(nodes, round_, busbw, slow, floor, None,
                         f"{busbw:.1f} GB/s {'below' if slow else 'at or above'} the 2-node floor of {floor:g} GB/s")
    if reference is None:
        return RunResult(nodes, round_, busbw, False, None, None,
                         f"{busbw:.1f} GB/s; no run of about {len(nodes)} nodes to compare with (no floor for "
                         "that size)")
    slow = busbw < RELATIVE_SLOW * reference
    return RunResult(nodes, round_, busbw, slow, None, reference,
                     f"{busbw:.1f} GB/s = {busbw / reference:.0%} of the fastest run of about {len(nodes)} nodes "
                     f"({reference:.1f} GB/s); slow below {RELATIVE_SLOW:.0%}")
