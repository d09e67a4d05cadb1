"""Pairing nodes by the network's shape (issue 39). Paths are written as EC2 DescribeInstanceTopology gives
``NetworkNodes``: "listed from the top of the hierarchy" (EC2 API reference, InstanceTopology), three layers for
p5.48xlarge (EC2 User Guide, "Prerequisites for Amazon EC2 topology"). Every expected pair is typed by hand."""

from __future__ import annotations

from fmcluster.backends.burn_in.pairs import across_rounds, bandwidth_per_layer, crossing, nearest, neighbour_pairs

# Two spines; spine-1 has two layer-2 nodes; bottom nodes b1 (n1, n2, n3), b2 (n4), b3 (n5, n6); spine-2: n7, n8
# under b4. n9 is of a type AWS gives no topology for.
PATHS = {
    "n1": ("spine-1", "l2-a", "b1"), "n2": ("spine-1", "l2-a", "b1"), "n3": ("spine-1", "l2-a", "b1"),
    "n4": ("spine-1", "l2-a", "b2"),
    "n5": ("spine-1", "l2-b", "b3"), "n6": ("spine-1", "l2-b", "b3"),
    "n7": ("spine-2", "l2-c", "b4"), "n8": ("spine-2", "l2-c", "b4"),
    "n9": (),
}


def test_the_label_names_the_highest_node_the_traffic_passes_through():
    assert crossing(("n1", "n2"), PATHS) == "through layer 3"
    assert crossing(("n1", "n4"), PATHS) == "through layer 2"
    assert crossing(("n1", "n5"), PATHS) == "through layer 1"
    assert crossing(("n1", "n7"), PATHS) == "across spines"
    assert crossing(("n1", "n9"), PATHS) == "no topology"


def test_neighbours_are_paired_under_their_bottom_node_first_and_leftovers_one_layer_up():
    # b1 pairs n1-n2 and leaves n3, which meets b2's lone n4 under l2-a; b3 and b4 pair inside; n9 is left alone.
    assert neighbour_pairs(list(PATHS), PATHS) == [("n1", "n2"), ("n5", "n6"), ("n7", "n8"), ("n3", "n4")]


def test_lone_nodes_meet_at_the_lowest_node_they_share_not_in_name_order():
    paths = {"a": ("s1", "m1", "b1"), "b": ("s2", "m2", "b2"), "c": ("s1", "m1", "b3")}
    assert neighbour_pairs(list(paths), paths) == [("a", "c")]


def test_an_odd_node_out_goes_up_to_the_spines_and_then_to_a_node_without_topology():
    paths = {"a": ("s1", "x", "b1"), "b": ("s2", "y", "b2"), "c": ()}
    assert neighbour_pairs(list(paths), paths) == [("a", "b")]
    assert neighbour_pairs(["a", "c"], paths) == [("a", "c")]


def test_across_rounds_measure_every_crossing_once_with_disjoint_pairs_per_round():
    rounds = across_rounds(list(PATHS), PATHS)
    labels = [crossing(pair, PATHS) for one in rounds for pair in one]
    assert sorted(labels) == ["across spines", "through layer 1", "through layer 2"]
    for one in rounds:
        nodes = [node for pair in one for node in pair]
        assert len(nodes) == len(set(nodes))
    assert len(rounds) == 1  # six distinct nodes are enough here, so one round


def test_a_queue_under_one_bottom_node_has_nothing_to_cross():
    paths = {"a": ("s", "m", "b"), "b": ("s", "m", "b")}
    assert across_rounds(list(paths), paths) == []


def test_bandwidth_is_grouped_by_layer_nearest_first_and_an_unfinished_pair_shows_no_figure():
    figures = bandwidth_per_layer({("n1", "n2"): 480.5, ("n5", "n6"): 470.0, ("n1", "n4"): 455.0,
                                   ("n1", "n7"): None, ("n3", "n9"): 12.0}, PATHS)
    assert [f.to_json() for f in figures] == [
        {"crossing": "through layer 3", "pairs": 2, "lowest_gb_s": 470.0, "highest_gb_s": 480.5},
        {"crossing": "through layer 2", "pairs": 1, "lowest_gb_s": 455.0, "highest_gb_s": 455.0},
        {"crossing": "across spines", "pairs": 1, "lowest_gb_s": None, "highest_gb_s": None},
        {"crossing": "no topology", "pairs": 1, "lowest_gb_s": 12.0, "highest_gb_s": 12.0},
    ]


def test_a_lone_node_is_paired_with_the_candidate_it_meets_lowest_not_the_first_by_name():
    # n8's only neighbour under b4 is n7, named after n1…n6, which meet it only above the spines
    assert nearest("n8", ["n1", "n5", "n7", "n9"], PATHS) == "n7"
    # n4 (b2) meets n5 at spine-1 and n1, n3 at l2-a: a tie under l2-a goes to the first asked
    assert nearest("n4", ["n5", "n3", "n1"], PATHS) == "n3"
    assert nearest("n9", ["n2", "n1"], PATHS) == "n2"  # no topology: nothing shared, the first asked
    assert nearest("n1", [], PATHS) is None
