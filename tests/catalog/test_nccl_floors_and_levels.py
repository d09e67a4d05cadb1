"""All-reduce floors (fmcluster/catalog/nccl_floors.yaml) and burn-in level durations, against their published
sources. Expected values are typed from the sources named beside them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster.catalog import burn_in_levels, nccl_floors
from fmcluster.errors import UsageError

NCCL = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"


def test_shipped_floors_with_their_sources() -> None:
    floors = nccl_floors.floors()
    assert sorted(floors) == [("p4d.24xlarge", 2), ("p4de.24xlarge", 2), ("p5.48xlarge", 2)]
    p5 = nccl_floors.floor("p5.48xlarge", 2)
    # The last row of aws-samples-2x-p5.48xlarge.txt: in-place busbw 487.26 GB/s at 16 GiB.
    assert (p5.measured_busbw_gb_s, p5.floor_gb_s) == (487.26, 389)
    assert "0162aacd5da07d424e13f44bef8dd2c4cfcc66e4" in p5.source
    # skypilot-org/skypilot examples/aws_efa/README.md: "2 GB | 77.35" (busbw EFA).
    assert nccl_floors.floor("p4d.24xlarge", 2).measured_busbw_gb_s == 77.35
    assert all(f.source and f.floor_gb_s <= 0.8 * f.measured_busbw_gb_s for f in floors.values())


def test_the_p5_floor_matches_the_capture_it_cites() -> None:
    last = (NCCL / "aws-samples-2x-p5.48xlarge.txt").read_text().splitlines()[-1].split()
    assert float(last[-2]) == nccl_floors.floor("p5.48xlarge", 2).measured_busbw_gb_s


@pytest.mark.parametrize("instance_type, nodes, ceiling", [
    # EFA 3,200 Gbps = 400 GB/s; 16 ranks: 2·15/16 = 1.875; 2 nodes: 2·1/2 = 1 → 750.
    ("p5.48xlarge", 2, 750.0),
    # 8 nodes, 64 ranks: 400 · (2·63/64) / (2·7/8) = 450.
    ("p5.48xlarge", 8, 450.0),
    # EFA 400 Gbps = 50 GB/s → 50 · 1.875 = 93.75.
    ("p4de.24xlarge", 2, 93.75),
])
def test_ceiling(instance_type: str, nodes: int, ceiling: float) -> None:
    assert nccl_floors.ceiling_gb_s(instance_type, nodes) == pytest.approx(ceiling)


def test_the_efa_line_rate_alone_would_refuse_a_published_run() -> None:
    # 487.26 GB/s measured on 400 GB/s of EFA: the line rate is not the bound, the ceiling is.
    assert nccl_floors.floor("p5.48xlarge", 2).measured_busbw_gb_s > 3200 / 8
    nccl_floors.check_floor("p5.48xlarge", 2, 487.26)


def test_a_floor_above_the_ceiling_is_refused_with_a_usage_error() -> None:
    with pytest.raises(nccl_floors.FloorAboveCeiling, match=r"floor of 100 GB/s for 2x p4de.24xlarge is above what "
                       r"the hardware can carry: EFA 400 Gbps per node allows at most 93.8 GB/s") as caught:
        nccl_floors.check_floor("p4de.24xlarge", 2, 100)
    assert isinstance(caught.value, UsageError) and caught.value.exit_code == 2


_ENTRY = """
floors:
  - instance_type: {type}
    nodes: 2
    measured_busbw_gb_s: {measured}
    floor_gb_s: {floor}
    run: r
    source: s
"""


@pytest.mark.parametrize("measured, floor, error", [
    (95, 70, "above what the hardware can carry"),  # a measurement over 93.75 is a catalog mistake
    (78.33, 80, "above its own measurement"),
])
def test_the_loader_refuses_an_impossible_entry(measured: float, floor: float, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        nccl_floors.load(_ENTRY.format(type="p4de.24xlarge", measured=measured, floor=floor))


def test_the_loader_refuses_two_floors_for_one_type_and_count() -> None:
    one = _ENTRY.format(type="p4de.24xlarge", measured=78.33, floor=62)
    with pytest.raises(ValueError, match="two floors for 2x p4de.24xlarge"):
        nccl_floors.load(one + one.split("floors:\n", 1)[1])


@pytest.mark.parametrize("instance_type, nodes, message", [
    ("g5.48xlarge", 2, "no known floor for g5.48xlarge: no published all-reduce run over EFA for it"),
    ("p5.48xlarge", 8, "no known floor for 8x p5.48xlarge: published runs cover 2 node(s)"),
])
def test_no_known_floor(instance_type: str, nodes: int, message: str) -> None:
    with pytest.raises(nccl_floors.NoKnownFloor, match=message.replace("(", r"\(").replace(")", r"\)")):
        nccl_floors.floor(instance_type, nodes)


# --- level durations ----------------------------------------------------------------------------------------------

def _sweep_us(name: str) -> float:
    """The sum of the out-of-place and in-place time columns of a shipped capture, read here, not by the code."""
    total = 0.0
    for line in (NCCL / name).read_text().splitlines():
        fields = line.split(":", 1)[1].split()
        if fields and fields[0].isdigit():
            total += float(fields[5]) + float(fields[9])
    return total


def test_sweeps_are_the_captures_time_columns() -> None:
    assert burn_in_levels.SWEEPS["p5.48xlarge"].microseconds == pytest.approx(_sweep_us(
        "aws-samples-2x-p5.48xlarge.txt"))
    assert burn_in_levels.SWEEPS["p4de.24xlarge"].microseconds == pytest.approx(_sweep_us(
        "aws-samples-2x-p4de.24xlarge.txt"))


@pytest.mark.parametrize("level, nodes, seconds", [
    ("quick", 8, (1.0, 59.0)),  # DCGM level 1: "normally lasting seconds"
    # A run: 20 iterations of the 0.2780582 s sweep, 5.561164 s. DCGM level 2 ≈ 120 s + loopback 0-1 s + the rounds
    # (tests/catalog/test_burn_in_rounds_count.py): 2 nodes, 1 round without the topology, 2 with it.
    ("standard", 2, (125.561164, 132.122328)),
    # 8 nodes: 4 to 8 rounds, 22.244656 to 44.489312 s.
    ("standard", 8, (142.244656, 165.489312)),
    # 32 nodes: 6 to 10 rounds, 33.366984 to 55.61164 s.
    ("standard", 32, (153.366984, 176.61164)),
    # DCGM level 3 ≈ 900 s + 6 to 10 rounds of 100 iterations (27.80582 s each): 166.83492 to 278.0582 s.
    ("long", 32, (1066.83492, 1179.0582)),
    ("standard", 1, (120.0, 121.0)),  # one node: nothing crosses EFA
])
def test_p5_level_estimates(level: str, nodes: int, seconds: tuple[float, float]) -> None:
    estimate = burn_in_levels.estimate(level, "p5.48xlarge", nodes)
    assert estimate.seconds == pytest.approx(seconds)
    assert all(part.source for part in estimate.parts)


def test_an_estimate_without_a_published_number_says_so() -> None:
    estimate = burn_in_levels.estimate("standard", "trn1.32xlarge", 8)
    assert estimate.seconds is None
    # trn1.32xlarge has EC2 topology (3 network nodes): 8 nodes take 4 to 8 rounds
    assert estimate.unknown == ("accelerator diagnostics", "all_reduce_perf, 4 to 8 rounds of 20 iterations")
    # g5.48xlarge has none ("Prerequisites for Amazon EC2 topology" does not list it): the pair, one round
    g5 = burn_in_levels.estimate("standard", "g5.48xlarge", 2)
    assert g5.unknown == ("all_reduce_perf, 1 round of 20 iterations",)


def test_unknown_level() -> None:
    with pytest.raises(ValueError, match="unknown burn-in level 'off'; the levels: quick, standard, long"):
        burn_in_levels.estimate("off", "p5.48xlarge", 2)
