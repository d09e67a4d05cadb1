"""The NCCL rounds of the gate (fmcluster/backends/burn_in/rounds.py) over a fabric the test models: every run gets
the peak bus bandwidth of the published 2x p5.48xlarge run, 487.26 GB/s (tests/data/nccl-tests/
aws-samples-2x-p5.48xlarge.txt, its in-place 16 GiB row), scaled down where a fault sits. The 2-node floor is the
catalog's, 389 GB/s (fmcluster/catalog/nccl_floors.yaml, typed here from that file)."""

from __future__ import annotations

import pytest

from fmcluster.backends.burn_in import rounds

PEAK = 487.26
FLOOR = 389.0
NODES = [f"n{i}" for i in range(8)]
# The catalog's 2-node floor for p5.48xlarge: 80 % of 487.26 GB/s, rounded down (fmcluster/catalog/nccl_floors.yaml,
# from aws-samples/awsome-distributed-training's published 2x p5 run).
P5_FLOOR = 389.0


def _fabric(link: tuple[str, str] | None = None, node: str | None = None, hangs: str | None = None):
    rounds_seen: list[list[tuple[str, ...]]] = []

    def measure(runs):
        rounds_seen.append(runs)
        out = {}
        for run in runs:
            if hangs in run:
                out[run] = None
            elif (link and set(link) <= set(run)) or node in run:
                out[run] = PEAK * 0.5
            else:
                out[run] = PEAK
        return out

    return measure, rounds_seen


def test_a_healthy_fabric_passes_with_every_pair_against_the_floor():
    measure, seen = _fabric()
    report = rounds.run(NODES, P5_FLOOR, measure)
    assert report.passed and report.suspects == ()
    pairs = [r for r in report.runs if r.round == 1]
    assert [r.nodes for r in pairs] == [("n0", "n1"), ("n2", "n3"), ("n4", "n5"), ("n6", "n7")]
    assert all(r.floor_gb_s == FLOOR and not r.slow for r in pairs)
    assert all(len(set(n for r in runs for n in r)) == sum(len(r) for r in runs) for runs in seen)  # disjoint
    assert report.finding_json()["kind"] == "none"


@pytest.mark.parametrize("link", [("n2", "n5"), ("n0", "n1"), ("n6", "n7"), ("n1", "n6")])
def test_a_slow_link_is_named_within_log2_n_plus_one_narrowing_rounds(link):
    measure, _ = _fabric(link=link)
    report = rounds.run(NODES, P5_FLOOR, measure)
    finding = report.finding_json()
    assert (finding["kind"], finding["nodes"]) == ("link", list(link)), finding
    assert finding["narrowing_rounds"] <= 4 and finding["round_bound"] == 4  # ⌈log2 8⌉ + 1
    assert not report.passed and set(report.suspects) == set(link)
    larger = [r for r in report.runs if len(r.nodes) > 2]
    # larger runs are judged against the fastest run of their size, never a floor
    assert all(r.floor_gb_s is None for r in larger)
    assert all(r.slow == (r.busbw_gb_s is not None and r.busbw_gb_s < 0.8 * r.reference_gb_s)
               for r in larger if r.reference_gb_s)


def test_a_slow_node_and_a_hung_one_are_named():
    measure, _ = _fabric(node="n3")
    assert rounds.run(NODES, P5_FLOOR, measure).finding_json()["nodes"] == ["n3"]
    measure, _ = _fabric(hangs="n4")
    report = rounds.run(NODES, P5_FLOOR, measure)
    hung = [r for r in report.runs if "n4" in r.nodes]
    assert all(r.slow and r.busbw_gb_s is None for r in hung)
    assert report.finding_json()["nodes"] == ["n4"]


def test_an_odd_node_out_is_paired_with_a_passed_node():
    measure, seen = _fabric()
    report = rounds.run(NODES[:5], P5_FLOOR, measure)
    assert seen[1] == [("n4", "n0")]
    assert report.passed


def test_two_nodes_one_slow_pair_blames_the_pair():
    measure, _ = _fabric(link=("n0", "n1"))
    report = rounds.run(NODES[:2], P5_FLOOR, measure)
    assert not report.passed and report.suspects == ("n0", "n1")


def test_with_the_network_known_pairs_are_neighbours_first_then_one_pair_per_layer_crossed():
    """Paths as EC2 DescribeInstanceTopology gives them (top layer first, three layers for p5): n0 and n4 under bottom
    node b1, n1 and n5 under b2 (both under layer-2 node m1), n2 and n6 under b3 (m2), n3 and n7 under b4 on another
    spine. Name order would pair n0-n1, n2-n3, …: each across a bottom node."""
    paths = {"n0": ("s1", "m1", "b1"), "n4": ("s1", "m1", "b1"), "n1": ("s1", "m1", "b2"), "n5": ("s1", "m1", "b2"),
             "n2": ("s1", "m2", "b3"), "n6": ("s1", "m2", "b3"), "n3": ("s2", "m3", "b4"), "n7": ("s2", "m3", "b4")}
    measure, _ = _fabric()
    report = rounds.run(NODES, P5_FLOOR, measure, paths)
    assert [r.nodes for r in report.runs if r.round == 1] == [("n0", "n4"), ("n1", "n5"), ("n2", "n6"),
                                                             ("n3", "n7")]
    # round 2: one pair through each higher layer: m1 (b1-b2), spine s1 (m1-m2), and across the spines
    assert sorted(len(r.nodes) for r in report.runs if r.round == 2) == [2, 2, 2]
    layers = {layer.crossing: layer.pairs for layer in report.layers}
    assert set(layers) == {"through layer 3", "through layer 2", "through layer 1", "across spines"}
    assert report.to_json()["layers"][0] == {"crossing": "through layer 3", "pairs": layers["through layer 3"],
                                             "lowest_gb_s": PEAK, "highest_gb_s": PEAK}
    assert report.passed


@pytest.mark.parametrize("count", [6, 7, 8])
def test_every_single_link_or_node_of_six_to_eight_nodes_is_found(count):
    """Six or seven nodes left (two failed their own checks): narrowing's halves are kept the same size within one
    node, so each larger run has another of about its size to be compared with."""
    nodes = NODES[:count]
    faults = [{"node": n} for n in nodes] + [{"link": (a, b)} for i, a in enumerate(nodes) for b in nodes[i + 1:]]
    for fault in faults:
        measure, _ = _fabric(**fault)
        finding = rounds.run(nodes, P5_FLOOR, measure).finding_json()
        expected = [fault["node"]] if "node" in fault else list(fault["link"])
        assert (finding["kind"], finding["nodes"]) == (next(iter(fault)), expected), (fault, finding)
        assert finding["narrowing_rounds"] <= finding["round_bound"]
