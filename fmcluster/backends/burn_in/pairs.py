"""Pairing nodes by the network's shape (issue 39: "pair nodes by topology: neighbours first, then across layers, and
report bandwidth per layer").

A node's path is what EC2 DescribeInstanceTopology gives for its instance: ``NetworkNodes``, "listed from the top of
the hierarchy" (layer 1, the spine) down to the node the instance hangs off (EC2 API reference,
InstanceTopology.NetworkNodes). Two nodes meet at the deepest network node their paths share; a pair whose paths
part at layer *k* sends its traffic up through layer *k*. An empty path (a type AWS gives no topology for) shares
nothing and is paired last.

Pure: the backends measure the pairs (a Slurm srun or an MPIJob per pair) and hand the figures back here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Path = tuple[str, ...]
Pair = tuple[str, str]


def shared_depth(a: Path, b: Path) -> int:
    """How many network nodes, from the top, the two paths share."""
    depth = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        depth += 1
    return depth


def crossing(pair: Pair, paths: Mapping[str, Path]) -> str:
    """The highest network node a pair's traffic passes through, as the label ``bandwidth_per_layer`` groups by:
    "through layer 3" for two nodes under one bottom node (of three layers), "through layer 1" for two that meet
    only at their spine, "across spines" for two that share no node AWS names."""
    a, b = (paths.get(node, ()) for node in pair)
    if not a or not b:
        return "no topology"
    depth = shared_depth(a, b)
    return f"through layer {depth}" if depth else "across spines"


def neighbour_pairs(nodes: Sequence[str], paths: Mapping[str, Path]) -> list[Pair]:
    """Disjoint pairs, nearest first: nodes under the same bottom network node are paired together, the ones left
    over go up a layer and are paired there, and so on to the spine; with an odd count one node is left out (the
    caller pairs it again with a node that already has a pair)."""
    waiting: dict[Path, list[str]] = {}
    for node in sorted(nodes):
        waiting.setdefault(paths.get(node, ()), []).append(node)
    pairs: list[Pair] = []
    depth = max((len(path) for path in waiting), default=0)
    while depth >= 0:
        above: dict[Path, list[str]] = {}
        for path, members in sorted(waiting.items()):
            if len(path) < depth:
                above.setdefault(path, []).extend(members)
                continue
            while len(members) >= 2:
                pairs.append((members.pop(0), members.pop(0)))
            if members:
                above.setdefault(path[:-1] if path else (), []).extend(members)
        waiting = {path: sorted(members) for path, members in above.items() if members}
        depth -= 1
    return pairs


def nearest(node: str, candidates: Sequence[str], paths: Mapping[str, Path]) -> str | None:
    """The candidate that meets ``node`` lowest in the network (the most network nodes shared from the top); ties go
    to the first in ``candidates``; None when there is none."""
    here = paths.get(node, ())
    return max(candidates, key=lambda other: shared_depth(here, paths.get(other, ())), default=None)


def across_rounds(nodes: Sequence[str], paths: Mapping[str, Path]) -> list[list[Pair]]:
    """One pair for each way traffic can leave a bottom node among these nodes (through layer *k*, across spines),
    grouped into rounds of disjoint pairs: as few rounds as a greedy choice finds, the crossing with the fewest
    candidate pairs chosen first in each round."""
    candidates: dict[str, list[Pair]] = {}
    ordered = sorted(nodes)
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            pa, pb = paths.get(a, ()), paths.get(b, ())
            if pa and pb and shared_depth(pa, pb) < min(len(pa), len(pb)):  # not under one bottom node
                label = crossing((a, b), paths)
                candidates.setdefault(label, []).append((a, b))
    rounds: list[list[Pair]] = []
    while candidates:
        used: set[str] = set()
        chosen: dict[str, Pair] = {}
        for label in sorted(candidates, key=lambda k: (len(candidates[k]), _height(k))):
            pair = next((p for p in candidates[label] if not set(p) & used), None)
            if pair is not None:
                chosen[label] = pair
                used |= set(pair)
        rounds.append([chosen[label] for label in sorted(chosen, key=_height)])
        candidates = {label: pairs for label, pairs in candidates.items() if label not in chosen}
    return rounds


def _height(label: str) -> int:
    return 0 if label == "across spines" else int(label.rsplit(" ", 1)[1])


@dataclass(frozen=True)
class LayerFigure:
    crossing: str
    pairs: int
    lowest_gb_s: float | None  # None: no pair of this crossing finished
    highest_gb_s: float | None

    def to_json(self) -> dict[str, object]:
        return {"crossing": self.crossing, "pairs": self.pairs, "lowest_gb_s": self.lowest_gb_s,
                "highest_gb_s": self.highest_gb_s}


def bandwidth_per_layer(results: Mapping[Pair, float | None], paths: Mapping[str, Path]) -> list[LayerFigure]:
    """The measured pairs grouped by the layer their traffic crosses, nearest first: the lowest and highest bus
    bandwidth in each group (a pair that did not finish counts, and shows no figure)."""
    groups: dict[str, list[float | None]] = {}
    for pair, gb_s in results.items():
        groups.setdefault(crossing(pair, paths), []).append(gb_s)
    figures = []
    for label, values in groups.items():
        measured = [v for v in values if v is not None]
        figures.append(LayerFigure(label, len(values), min(measured) if measured else None,
                                   max(measured) if measured else None))
    return sorted(figures, key=_nearest_first)


def _nearest_first(figure: LayerFigure) -> tuple[int, int]:
    return (1, 0) if figure.crossing == "no topology" else (0, -_height(figure.crossing))
