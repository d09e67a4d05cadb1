"""What ``fmcluster burn-in`` checks, decided once for every backend: the queue (named, else the first with
accelerators), the level (``--level``, else the queue's ``burn_in`` in the spec, :func:`fmcluster.spec.burn_in.burn_in`)
and the 2-node floor the pairs are judged by (the spec's ``burn_in.floors`` over the catalog's). Bad input is a
UsageError before anything runs."""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.backends.smoke.checks import Expectations, expectations
from fmcluster.catalog.burn_in_levels import LEVELS, NCCL_ITERS, Level
from fmcluster.catalog.hardware import hardware
from fmcluster.errors import UsageError
from fmcluster.spec.burn_in import PAIR, burn_in, written_floors
from fmcluster.spec.models import Spec, instance_types_of


@dataclass(frozen=True)
class Choice:
    expect: Expectations
    level: Level
    pair_floor_gb_s: float | None  # None: the level runs no all-reduce
    floor_source: str  # "spec" or "catalog"


def level_of(text: str) -> Level:
    for level in LEVELS:
        if text == level:
            return level
    raise UsageError(f"unknown burn-in level {text!r}; the levels: {', '.join(LEVELS)} (`fmcluster burn-in --help` "
                     "says what each runs)")


def choose(spec: Spec, queue_name: str | None, level_flag: str | None) -> Choice:
    if level_flag is not None:
        level_of(level_flag)
    name = queue_name or next((q.name for q in spec.queues if hardware(str(q.instance_type)).accelerators), None)
    expect = expectations(spec, name, None)
    queue = expect.queue
    if len(instance_types_of(queue)) > 1:
        raise UsageError(f"queue {queue.name} has several instance types ({', '.join(instance_types_of(queue))}): "
                         "burn-in judges one type's nodes against that type's counts and floor; not supported yet")
    written, floors = burn_in(queue)
    if level_flag is None and written == "off":
        why = "as written" if queue.burn_in is not None else "its default: no accelerators to check"
        raise UsageError(f"queue {queue.name} has burn_in off ({why}); --level quick, standard or long runs the "
                         "checks anyway")
    level = level_of(level_flag or written)
    if not NCCL_ITERS[level]:
        return Choice(expect, level, None, "")
    if PAIR not in floors:
        raise UsageError(f"no known 2-node all-reduce floor for {queue.instance_type} (the catalog's floors: "
                         "fmcluster/catalog/nccl_floors.yaml; a queue with efa: false has none), and level "
                         f"{level} judges all-reduce against it. `--level quick` runs the per-node checks alone "
                         "(device counts, DCGM level 1, EFA), or give queues[].burn_in.floors: {2: <GB/s>}")
    return Choice(expect, level, floors[PAIR], "spec" if PAIR in written_floors(queue) else "catalog")
