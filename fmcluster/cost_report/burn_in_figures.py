"""The plan's burn-in figures per queue (issue 37): the level :func:`fmcluster.spec.burn_in.burn_in` gives, what it
runs, and its expected time from :func:`fmcluster.catalog.burn_in_levels.estimate`, never guessed where no source
gives a number; on a Capacity Block of known length, that time as a share of the block.

The gate at ``create`` is not built yet: the figures say so, and that ``fmcluster burn-in`` runs the checks on
demand, so that nobody reads the plan as a promise that ``create`` holds nodes back.
"""

from __future__ import annotations

from fmcluster.catalog import burn_in_levels, nccl_floors
from fmcluster.catalog.hardware import hardware
from fmcluster.cost_report.report_model import BurnInFigures, BurnInFloor, BurnInPart
from fmcluster.spec.burn_in import burn_in, written_floors, written_level
from fmcluster.spec.models import Queue, max_nodes

GATE_NOTE = ("create does not gate on these checks yet (nodes take jobs when AWS says they run); "
             "`fmcluster burn-in NAME` runs them on demand on a running cluster's idle nodes")
BLOCK_UNREAD = ("the Capacity Block's length is not read offline: `plan --live-prices` reads the bought block "
                "from EC2 and shows this time as a share of it")
LEAVES_OUT = ("instance launch, job scheduling, NCCL start-up, and the narrowing and retest rounds a failure adds "
              "(fmcluster/catalog/burn_in_levels.py)")


def burn_in_figures(queue: Queue, block_hours: int | None) -> BurnInFigures | None:
    """None for a queue whose level is off."""
    choice = burn_in(queue)
    if choice.level == "off":
        return None
    nodes = max_nodes(queue)
    estimate = burn_in_levels.estimate(choice.level, queue.instance_type, nodes)
    seconds = estimate.seconds
    high = seconds[1] if seconds else None
    return BurnInFigures(
        level=choice.level,
        default=written_level(queue) is None,
        runs=runs(choice.level, hardware(queue.instance_type).accelerator_kind, nodes),
        nodes=nodes,
        parts=[BurnInPart(p.name, p.low_s, p.high_s, p.source) for p in estimate.parts],
        low_seconds=seconds[0] if seconds else None,
        high_seconds=high,
        unknown=list(estimate.unknown),
        leaves_out=LEAVES_OUT,
        floors=_floors(queue, choice.floors) if choice.level in ("standard", "long") else [],
        block_hours=block_hours,
        block_fraction=high / (block_hours * 3600) if high is not None and block_hours else None,
        block_note=BLOCK_UNREAD if queue.capacity.type == "capacity-block" and block_hours is None else None,
        gated_at_create=False,
        note=GATE_NOTE,
    )


def runs(level: str, kind: str | None, nodes: int) -> list[str]:
    """The checks of ``level`` (issue 37's levels), in the order they run."""
    neuron = kind in ("trainium", "inferentia")
    dcgm = {"quick": 1, "standard": 2, "long": 3}[level]
    checks = ["device counts (accelerators, EFA devices) against the catalog",
              "the Neuron device checks" if neuron else f"DCGM diagnostics level {dcgm} (dcgmi diag -r {dcgm})"]
    if level == "quick":
        return [*checks, "the EFA provider (fi_info -p efa)"]
    checks.append("EFA loopback (fi_pingpong -p efa)")
    if nodes >= 2:
        test = "the Neuron collective test" if neuron else \
            f"NCCL all-reduce (all_reduce_perf, {burn_in_levels.NCCL_ITERS[level]} iterations per size)"
        whole = ", then the whole queue" if nodes > 2 else ""
        checks.append(f"{test} in pairs{whole}, against the floors")
    return checks


def _floors(queue: Queue, floors: dict[int, float]) -> list[BurnInFloor]:
    given = written_floors(queue)
    known = nccl_floors.floors()
    return [BurnInFloor(n, gb_s, "spec" if n in given else known[(queue.instance_type, n)].source)
            for n, gb_s in sorted(floors.items())]
