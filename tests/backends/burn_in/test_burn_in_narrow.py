"""Narrowing a slow all-reduce on a simulated fabric: one slow node, one slow link, or none; the answer and the
round bound ⌈log2 N⌉ + 1 (typed per N below) checked for N = 2, 3, 5, 7, 8, 31, 32."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import pytest

from fmcluster.backends.burn_in.narrow import Hypothesis, Run, narrow, round_bound

# ⌈log2 N⌉ + 1, by hand.
BOUND = {2: 2, 3: 3, 5: 4, 7: 4, 8: 4, 31: 6, 32: 6}


class Fabric:
    """Nodes where one node or one link is slow: a run is slow when it holds the slow node, or both ends of the
    slow link (the sandbox's model, sandbox/fmcluster_sandbox/kube/node_health.py)."""

    def __init__(self, nodes: list[str], slow_node: str | None = None, slow_link: tuple[str, str] | None = None):
        self.nodes, self.slow_node, self.slow_link = nodes, slow_node, slow_link
        self.rounds: list[list[Run]] = []

    def measure(self, runs: list[Run]) -> Mapping[Run, bool]:
        used = [node for run in runs for node in run]
        assert len(used) == len(set(used)), f"runs of one round share a node: {runs}"
        assert all(len(run) >= 2 for run in runs), f"a one-node run tells nothing about EFA: {runs}"
        assert set(used) <= set(self.nodes)
        self.rounds.append(runs)
        return {run: (self.slow_node in run) or (self.slow_link is not None and set(self.slow_link) <= set(run))
                for run in runs}


def _nodes(n: int) -> list[str]:
    return [f"ip-10-0-0-{i}" for i in range(n)]


@pytest.mark.parametrize("n", sorted(BOUND))
def test_round_bound_is_ceil_log2_plus_one(n: int) -> None:
    assert round_bound(n) == BOUND[n]


@pytest.mark.parametrize("n", sorted(BOUND))
def test_no_fault_is_none(n: int) -> None:
    fabric = Fabric(_nodes(n))
    finding = narrow(fabric.nodes, fabric.measure)
    assert finding.found == Hypothesis("none")
    assert finding.rounds == len(fabric.rounds) <= BOUND[n]


@pytest.mark.parametrize("n, slow", [(3, 1), (5, 4), (7, 6), (8, 5), (31, 30), (32, 0), (32, 19)])
def test_one_slow_node_is_found(n: int, slow: int) -> None:
    nodes = _nodes(n)
    fabric = Fabric(nodes, slow_node=nodes[slow])
    finding = narrow(nodes, fabric.measure)
    assert finding.found == Hypothesis("node", (nodes[slow],))
    assert finding.rounds == len(fabric.rounds) <= BOUND[n]


# (0, 31) and (5, 26) differ in every bit of their numbers, the link the bit rounds see least of.
@pytest.mark.parametrize("n, a, b", [(3, 0, 2), (5, 1, 3), (7, 2, 5), (8, 3, 6), (8, 0, 7), (31, 4, 27),
                                     (32, 0, 31), (32, 5, 26), (32, 12, 13)])
def test_one_slow_link_is_found(n: int, a: int, b: int) -> None:
    nodes = _nodes(n)
    fabric = Fabric(nodes, slow_link=(nodes[a], nodes[b]))
    finding = narrow(nodes, fabric.measure)
    assert finding.found == Hypothesis("link", (nodes[a], nodes[b]))
    assert finding.rounds == len(fabric.rounds) <= BOUND[n]


@pytest.mark.parametrize("n", [3, 5, 8])
def test_every_single_fault_of_a_small_queue(n: int) -> None:
    nodes = _nodes(n)
    faults = [Fabric(nodes, slow_node=x) for x in nodes] + [Fabric(nodes, slow_link=p) for p in combinations(nodes, 2)]
    for fabric in faults:
        finding = narrow(nodes, fabric.measure)
        expected = (Hypothesis("node", (fabric.slow_node,)) if fabric.slow_node
                    else Hypothesis("link", fabric.slow_link or ()))
        assert finding.found == expected
        assert finding.rounds <= BOUND[n]


def test_two_nodes_narrow_to_the_pair() -> None:
    # With two nodes the only run is the pair: node a, node b and the link between them look the same.
    nodes = _nodes(2)
    for fabric in (Fabric(nodes, slow_node=nodes[0]), Fabric(nodes, slow_node=nodes[1]),
                   Fabric(nodes, slow_link=(nodes[0], nodes[1]))):
        finding = narrow(nodes, fabric.measure)
        assert finding.found is None
        assert finding.suspects == tuple(nodes)
        assert finding.rounds == 1 <= BOUND[2]


def test_measure_must_answer_every_run() -> None:
    with pytest.raises(ValueError, match="measure\\(\\) answered nothing"):
        narrow(_nodes(4), lambda runs: {})


@pytest.mark.parametrize("nodes", [["a"], ["a", "a"]])
def test_needs_two_distinct_nodes(nodes: list[str]) -> None:
    with pytest.raises(ValueError, match="two or more distinct nodes"):
        narrow(nodes, lambda runs: {run: False for run in runs})


def test_two_slow_nodes_are_not_blamed_on_one() -> None:
    nodes = _nodes(8)
    fabric = Fabric(nodes)
    measure_one = fabric.measure

    def two_slow(runs: list[Run]) -> Mapping[Run, bool]:
        slow = dict(measure_one(runs))
        return {run: slow[run] or nodes[1] in run or nodes[6] in run for run in runs}

    finding = narrow(nodes, two_slow)
    assert finding.found is None and finding.candidates == ()
    assert finding.summary().endswith("no single slow node or link explains the runs: more than one fault, or a "
                                      "run that changed speed")
    assert finding.rounds <= BOUND[8]


def test_summary_names_what_was_found() -> None:
    nodes = _nodes(8)
    fabric = Fabric(nodes, slow_link=(nodes[2], nodes[5]))
    assert narrow(nodes, fabric.measure).summary() == "the link ip-10-0-0-2 – ip-10-0-0-5, found in 4 round(s)"
    pair = narrow(_nodes(2), Fabric(_nodes(2), slow_node="ip-10-0-0-0").measure)
    assert pair.summary() == ("after 1 round(s) the runs cannot tell apart: node ip-10-0-0-0, node ip-10-0-0-1, "
                              "the link ip-10-0-0-0 – ip-10-0-0-1")
