"""The plan's burn-in figures per queue (issue 37): the level :func:`fmcluster.spec.burn_in.burn_in` gives, what it
runs, and its expected time from :func:`fmcluster.catalog.burn_in_levels.estimate`, never guessed where no source
gives a number; on a Capacity Block of known length, that time as a share of the block.

The gate at ``create`` is not built yet: the figures say so, and that ``fmcluster burn-in`` runs the checks on
demand, so that nobody reads the plan as a promise that ``create`` holds nodes back.
"""

from __future__ import annotations

from fmcluster.catalog import burn_in_levels, nccl_floors
from fmcluster.catalog.hardware import hardware
from fmcluster.catalog.network_topology import network_layers
from fmcluster.cost_report.report_model import BurnInFigures, BurnInFloor, BurnInPart
from fmcluster.spec.burn_in import burn_in, written_floors, written_level
from fmcluster.spec.models import Queue, max_nodes

GATE_NOTE = ("this backend's create does not gate on these checks (nodes take jobs when AWS says they run); "
             "`fmcluster burn-in NAME` runs them on demand on a running cluster's idle nodes")
BLOCK_UNREAD = ("the Capacity Block's length is not read offline: `plan --live-prices` reads the bought block "
                "from EC2 and shows this time as a share of it")
LEAVES_OUT = ("instance launch, job scheduling, NCCL start-up, and the rounds a failure adds (a retest after a "
              "repair; without the nodes' topology, one more narrowing round) (fmcluster/catalog/burn_in_levels.py)")


def burn_in_figures(queue: Queue, block_hours: int | None, gate_note: str | None = None) -> BurnInFigures | None:
    """None for a queue whose level is off; ``gate_note``: how the backend's create gates the queue's nodes (its
    spec rules' ``burn_in_gate_note``), None where it does not."""
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
        runs=runs(choice.level, hardware(queue.instance_type).accelerator_kind, nodes,
                  network_layers(queue.instance_type) > 0),
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
        gated_at_create=gate_note is not None,
        note=gate_note or GATE_NOTE,
    )


def runs(level: str, kind: str | None, nodes: int, topology: bool = False) -> list[str]:
    """The checks of ``level`` (issue 37's levels), in the order they run; ``topology``: EC2 gives the type's
    instances a place in the network (a backend that reads it pairs across its layers too)."""
    neuron = kind in ("trainium", "inferentia")
    dcgm = burn_in_levels.DCGM_LEVEL[level]
    checks = ["device counts (accelerators, EFA devices) against the catalog",
              "the Neuron device checks" if neuron else f"DCGM diagnostics level {dcgm} (dcgmi diag -r {dcgm})"]
    if level == "quick":
        return [*checks, "the EFA provider (fi_info -p efa)"]
    checks.append("EFA loopback (fi_pingpong -p efa)")
    if nodes >= 2:
        test = "the Neuron collective test" if neuron else \
            f"NCCL all-reduce (all_reduce_perf, {burn_in_levels.NCCL_ITERS[level]} iterations per size)"
        # the rounds of fmcluster/backends/burn_in/rounds.py, which burn_in_levels.nccl_rounds counts
        across = "; where the backend reads the nodes' EC2 topology (EKS), pairs across its layers" if topology \
            else ""
        narrowing = "; from 3 nodes, rounds of larger runs that would narrow a slow one to its node or link" \
            if nodes > 2 else ""
        checks.append(f"{test} in pairs against the floors{across}{narrowing}")
    return checks


def _floors(queue: Queue, floors: dict[int, float]) -> list[BurnInFloor]:
    given = written_floors(queue)
    known = nccl_floors.floors()
    return [BurnInFloor(n, gb_s, "spec" if n in given else known[(queue.instance_type, n)].source)
            for n, gb_s in sorted(floors.items())]
