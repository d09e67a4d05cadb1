"""The NCCL rounds ``plan``'s burn-in estimate counts (fmcluster/catalog/burn_in_levels.py ``nccl_rounds``) against
the rounds fmcluster/backends/burn_in/rounds.py really runs over a simulated healthy fabric: every run, of any size,
answers the published 2x p5.48xlarge peak of 487.26 GB/s (tests/data/nccl-tests/aws-samples-2x-p5.48xlarge.txt, its
in-place 16 GiB row), above the catalog's 2-node floor of 389 GB/s (fmcluster/catalog/nccl_floors.yaml).

The expected counts in the tables are worked by hand from rounds.py's and narrow.py's docstrings, not read from the
estimate's code: without the nodes' topology, one round of disjoint pairs, one for an odd node out, then (from three
nodes) narrowing's bit rounds, ⌈log2 N⌉ of them, each with an untried link inside a half (three nodes: one, the only
link the pairs left untried). With the topology, at most: the pairs, the odd node's round, one round per kind of
crossing (EC2 gives p5.48xlarge 3 network nodes, "Prerequisites for Amazon EC2 topology": through layer 1, through
layer 2, across spines) and narrowing's bound ⌈log2 N⌉ + 1.
"""

from __future__ import annotations

import random

import pytest

from fmcluster.backends.burn_in import rounds
from fmcluster.catalog.burn_in_levels import nccl_rounds

PEAK = 487.26
FLOOR = 389.0


def _rounds_run(count: int, paths: list[tuple[str, ...]] | None = None) -> int:
    """The rounds rounds.run takes over ``count`` healthy nodes (named so that their order is their number)."""
    nodes = [f"node-{i:03d}" for i in range(count)]
    seen: list[int] = []

    def measure(runs: list[tuple[str, ...]]) -> dict[tuple[str, ...], float]:
        seen.append(len(runs))
        return {run: PEAK for run in runs}

    report = rounds.run(nodes, FLOOR, measure, dict(zip(nodes, paths, strict=True)) if paths else None)
    assert report.passed and report.rounds == len(seen)
    return report.rounds


@pytest.mark.parametrize("nodes, without, with_topology", [
    (2, 1, 2),  # the pair; with topology the same pair again when it crosses a layer; no narrowing when fast
    (3, 3, 8),  # pair, odd node's pair, 1 bit round | 1 + 1 + 3 crossings + (2 + 1)
    (4, 3, 7),  # 2 pairs, 2 bit rounds | 1 + 3 + 3
    (5, 5, 9),  # pairs, odd, 3 bit rounds | 1 + 1 + 3 + 4
    (8, 4, 8),  # pairs, 3 bit rounds | 1 + 3 + 4
    (9, 6, 10),  # pairs, odd, 4 bit rounds | 1 + 1 + 3 + 5
    (32, 6, 10),  # pairs, 5 bit rounds | 1 + 3 + 6
    (33, 8, 12),  # pairs, odd, 6 bit rounds | 1 + 1 + 3 + 7
])
def test_hand_counted_rounds_are_what_runs_without_the_topology(nodes: int, without: int, with_topology: int) -> None:
    assert _rounds_run(nodes) == without
    assert nccl_rounds(nodes, 3) == (without, with_topology)
    assert nccl_rounds(nodes, 0) == (without, without)  # a type EC2 gives no topology: nothing to add


def test_one_node_runs_no_all_reduce() -> None:
    assert nccl_rounds(1, 3) == (0, 0)


@pytest.mark.parametrize("nodes", range(2, 97))
def test_the_count_without_topology_is_exact_for_every_queue_size(nodes: int) -> None:
    assert nccl_rounds(nodes, 0)[0] == _rounds_run(nodes)


def _layout(rng: random.Random, count: int, layers: int) -> list[tuple[str, ...]]:
    """Each node's network nodes, top-down, under a random tree of 1 to 3 children per network node: nodes share
    bottom nodes, middles and spines in every mix, and their names' order has nothing to do with where they hang."""
    fan = [rng.randint(1, 3) for _ in range(layers)]
    paths = []
    for _ in range(count):
        place, path = "nn", []
        for layer in range(layers):
            place += f".{rng.randrange(fan[layer])}"
            path.append(place)
        paths.append(tuple(path))
    return paths


@pytest.mark.parametrize("layers", [3, 4])
def test_with_the_topology_the_rounds_fall_in_the_estimates_range(layers: int) -> None:
    rng = random.Random(37)
    for nodes in [*range(2, 18), 32, 33]:
        low, high = nccl_rounds(nodes, layers)
        for _ in range(25):
            ran = _rounds_run(nodes, _layout(rng, nodes, layers))
            assert low <= ran <= high, (nodes, ran, (low, high))


def test_the_sandbox_layout_of_8_p5_nodes() -> None:
    """Two instances per bottom node, two bottoms per middle, two middles per spine, nodes named in slot order
    (sandbox/fmcluster_sandbox/topology.py): neighbour pairs, one round across layers 2 and 1, 3 bit rounds."""
    paths = [(f"s{i // 8}", f"m{i // 4}", f"l{i // 2}") for i in range(8)]
    assert _rounds_run(8, paths) == 5
    assert nccl_rounds(8, 3) == (4, 8)


def test_two_nodes_under_different_bottom_nodes_take_the_high_count() -> None:
    """The pair, then the same pair again as the round across the layer it crosses (layer 2 here)."""
    assert _rounds_run(2, [("s0", "m0", "l0"), ("s0", "m0", "l1")]) == nccl_rounds(2, 3)[1] == 2
    assert _rounds_run(2, [("s0", "m0", "l0"), ("s0", "m0", "l0")]) == nccl_rounds(2, 3)[0] == 1
