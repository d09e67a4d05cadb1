"""Reads of AWS several at once: a read mostly waits on the network, and a cluster of a hundred resources read one
after the other waits a hundred round trips.

* :func:`each_by_dependency`: one task per resource, each after the tasks of the resources it depends on (the plan's
  reads, :meth:`fmcluster.engine.walk.Engine.plan`): what a dependency published (the ids a document refers to) is
  there when its dependents start, and the plan waits about as many round trips as the graph is deep.
* :func:`gather`: independent scans side by side (a backend's ``discover``), their findings in the order asked.

At most ``FMCLUSTER_MAX_OPERATIONS`` at once, as a walk (:mod:`fmcluster.engine.slots`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from graphlib import TopologicalSorter
from typing import TYPE_CHECKING, TypeVar

from fmcluster.engine.slots import max_operations_setting

if TYPE_CHECKING:
    from fmcluster.engine.resource import Resource

T = TypeVar("T")

# How often the caller's thread looks up from its wait: Ctrl-C reaches it there.
_LOOK_UP_S = 0.2


def each_by_dependency(resources: list[Resource], task: Callable[[Resource], None], workers: int) -> None:
    """``task(resource)`` for each of ``resources`` (in dependency order, as :func:`fmcluster.engine.graph.in_order`
    gives them), at most ``workers`` at once, each after its dependencies' tasks have ended. The first exception a
    task raises stops new tasks from starting and is raised once the running ones have ended; so is Ctrl-C."""
    if workers <= 1 or len(resources) <= 1:
        for resource in resources:
            task(resource)
        return
    by_name = {r.name: r for r in resources}
    position = {r.name: index for index, r in enumerate(resources)}
    sorter = TopologicalSorter({r.name: [d for d in r.depends_on if d in by_name] for r in resources})
    sorter.prepare()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="read")
    running: dict[Future[None], str] = {}
    failure: BaseException | None = None
    try:
        while sorter.is_active() and failure is None:
            for name in sorted(sorter.get_ready(), key=position.__getitem__):
                running[pool.submit(task, by_name[name])] = name
            done, _ = wait(running, timeout=_LOOK_UP_S, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: position[running[f]]):
                name = running.pop(future)
                error = future.exception()
                if error is None:
                    sorter.done(name)
                elif failure is None:
                    failure = error
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if failure is not None:
        raise failure


def gather(scans: Sequence[Callable[[], list[T]]], workers: int | None = None) -> list[T]:
    """Every scan's findings, concatenated in the order of ``scans``, the scans run side by side (at most
    ``workers``, default the walk's limit). The first scan to fail, in that order, raises once all have ended."""
    workers = max_operations_setting() if workers is None else workers
    if workers <= 1 or len(scans) <= 1:
        return [item for scan in scans for item in scan()]
    pool = ThreadPoolExecutor(max_workers=min(workers, len(scans)), thread_name_prefix="scan")
    try:
        futures = [pool.submit(scan) for scan in scans]
        while not all(f.done() for f in futures):
            wait(futures, timeout=_LOOK_UP_S)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [item for future in futures for item in future.result()]
