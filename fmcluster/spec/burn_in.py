"""``queues[].burn_in`` (issue 37): which level of checks a queue's nodes get, and the all-reduce floors that judge
them. :func:`burn_in` is the one answer every caller takes (plan, the ``burn-in`` command, the gate); the rules
refuse, at the field's position, what the gate could not run or judge.

Defaults: off on a queue without accelerators (DCGM and the Neuron checks would test nothing); standard on an
accelerated queue that can hold two or more nodes and has a 2-node floor to judge its pairs against (the catalog's,
measured over EFA, or the spec's own); quick on every other accelerated queue, since a floor nobody measured would
be a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from fmcluster.catalog import nccl_floors
from fmcluster.spec.auto_repair import accelerated
from fmcluster.spec.burn_in_field import NCCL_LEVELS, Level
from fmcluster.spec.decisions import efa_enabled
from fmcluster.spec.models import Queue, Spec, max_nodes
from fmcluster.spec.positions import Path_

Report = Callable[[Path_, str], None]
# The pairs come first: without a 2-node floor the gate cannot judge a single pair.
PAIR = 2


class BurnInChoice(NamedTuple):
    level: Level
    floors: dict[int, float]  # GB/s of all-reduce bus bandwidth per node count, the spec's over the catalog's


def written_floors(queue: Queue) -> dict[int, float]:
    written = queue.burn_in
    return {} if written is None or isinstance(written, str) else dict(written.floors)


def catalog_floors(queue: Queue) -> dict[int, float]:
    """The catalog's floors for the queue's type at the node counts it can have; none with EFA off (every
    catalog floor was measured over EFA, and TCP reaches a small part of it)."""
    if not efa_enabled(queue):
        return {}
    return {n: entry.floor_gb_s for (name, n), entry in nccl_floors.floors().items()
            if name == queue.instance_type and PAIR <= n <= max_nodes(queue)}


def written_level(queue: Queue) -> Level | None:
    written = queue.burn_in
    return written if written is None or isinstance(written, str) else written.level


def burn_in(queue: Queue) -> BurnInChoice:
    """The queue's level (as written, else its default) and floors (the spec's over the catalog's)."""
    floors = {**catalog_floors(queue), **written_floors(queue)}
    return BurnInChoice(written_level(queue) or default_level(queue, floors), floors)


def default_level(queue: Queue, floors: dict[int, float]) -> Level:
    if not accelerated(queue):
        return "off"
    if max_nodes(queue) >= PAIR and PAIR in floors:
        return "standard"
    return "quick"


def check_burn_in(spec: Spec, error: Report, warn: Report) -> None:
    for index, queue in enumerate(spec.queues):
        if queue.burn_in is not None:
            _check_queue(queue, ("queues", index, "burn_in"), error)


def _check_queue(queue: Queue, path: Path_, error: Report) -> None:
    level_path = path if isinstance(queue.burn_in, str) else (*path, "level")
    level = burn_in(queue).level
    given = written_floors(queue)
    if written_level(queue) is not None and level != "off" and not accelerated(queue):
        error(level_path, f"{queue.instance_type} has no accelerators fmcluster knows of (GPUs or Neuron devices): "
                          f"burn-in level {level} checks accelerators (device counts, DCGM, the Neuron checks) and "
                          "EFA, so it would test nothing here; use off")
        return
    if given and level not in NCCL_LEVELS:
        how = "" if written_level(queue) else " (the default here: no 2-node floor to judge its pairs by)" \
            if accelerated(queue) and max_nodes(queue) >= PAIR else " (the default here)"
        error((*path, "floors"), f"floors judge the NCCL all-reduce of levels standard and long; level {level}{how} "
                                 "runs none: remove floors, or set level: standard")
        return
    for nodes, gb_s in given.items():
        _check_floor(queue, (*path, "floors", str(nodes)), nodes, gb_s, error)
    if level in NCCL_LEVELS and max_nodes(queue) >= PAIR and PAIR not in given and not catalog_floors(queue):
        error(level_path, f"burn-in level {level} runs an NCCL all-reduce across nodes, and there is "
                          f"{_no_pair_floor(queue)}: the gate could not judge it. Give a floor from a run you trust "
                          "(burn_in: {level: " + level + ", floors: {2: <GB/s>}}), or use level quick (device "
                          "counts, DCGM level 1, EFA), which needs none")


def _check_floor(queue: Queue, path: Path_, nodes: int, gb_s: float, error: Report) -> None:
    most = max_nodes(queue)
    if nodes < PAIR:
        error(path, f"a floor for {nodes} node(s) judges nothing: an all-reduce crosses EFA only between two or "
                    "more nodes; give floors for 2 nodes or more")
    elif nodes > most:
        error(path, f"a floor for {nodes} nodes, but queue '{queue.name}' holds at most {most}: give floors for "
                    f"2 to {most} nodes")
    else:
        try:
            nccl_floors.check_floor(queue.instance_type, nodes, gb_s)
        except nccl_floors.FloorAboveCeiling as exc:
            error(path, str(exc))
        except nccl_floors.NoKnownFloor as exc:
            error(path, f"cannot check this floor against what the hardware carries ({exc}), and a floor the "
                        "hardware cannot reach would fail every node; use level quick, which needs no floor")


def _no_pair_floor(queue: Queue) -> str:
    if not efa_enabled(queue):
        return (f"no floor for 2x {queue.instance_type} without EFA (the catalog's floors are measured over EFA, "
                "and this queue has efa: false)")
    try:
        nccl_floors.floor(queue.instance_type, PAIR)
    except nccl_floors.NoKnownFloor as exc:
        return str(exc)
    return f"no known floor for 2x {queue.instance_type}"
