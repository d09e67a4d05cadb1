"""Reads of AWS several at once: a read mostly waits on the network, and a cluster of a hundred resources read one
after the other waits a hundred round trips.

* :func:`each_by_dependency`: one task per resource, each after the tasks of the resources it depends on (the plan's
  reads, :meth:`fmcluster.engine.walk.Engine.plan`): what a dependency published (the ids a document refers to) is
  there when its dependents start, and the plan waits about as many round trips as the graph is deep.
* :func:`gather`: independent scans side by side (a backend's ``discover``), their findings in the order asked.

At most ``FMCLUSTER_MAX_OPERATIONS`` at once, as a walk (:mod:`fmcluster.engine.slots`). The tasks run on daemon
threads: Ctrl-C ends the command at once, as it did when the reads ran on its own thread, instead of waiting out
calls that only read.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable, Sequence
from graphlib import TopologicalSorter
from typing import TYPE_CHECKING, Any, TypeVar

from fmcluster.engine.slots import max_operations_setting

if TYPE_CHECKING:
    from fmcluster.engine.resource import Resource

T = TypeVar("T")
_LOOK_UP_S = 0.2


class _Runner:
    """Starts tasks on daemon threads (the caller keeps count of how many run); :meth:`next_done` hands back each
    one's end: its key, its exception or None, its result."""

    def __init__(self) -> None:
        self.running = 0
        self._done: queue.Queue[tuple[Any, BaseException | None, Any]] = queue.Queue()

    def start(self, key: Any, task: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                result = task()
            except BaseException as exc:  # handed to the caller's thread, which raises it
                self._done.put((key, exc, None))
            else:
                self._done.put((key, None, result))

        self.running += 1
        threading.Thread(target=run, name=f"read-{key}", daemon=True).start()

    def next_done(self) -> tuple[Any, BaseException | None, Any]:
        while True:
            try:
                ended = self._done.get(timeout=_LOOK_UP_S)  # Ctrl-C reaches the caller's thread between waits
            except queue.Empty:
                continue
            self.running -= 1
            return ended


def each_by_dependency(resources: list[Resource], task: Callable[[Resource], None], workers: int) -> None:
    """``task(resource)`` for each of ``resources`` (in dependency order, as :func:`fmcluster.engine.graph.in_order`
    gives them), at most ``workers`` at once, each after its dependencies' tasks have ended. The first exception a
    task raises stops new tasks from starting and is raised once the running ones have ended."""
    if workers <= 1 or len(resources) <= 1:
        for resource in resources:
            task(resource)
        return
    by_name = {r.name: r for r in resources}
    position = {r.name: index for index, r in enumerate(resources)}
    sorter = TopologicalSorter({r.name: [d for d in r.depends_on if d in by_name] for r in resources})
    sorter.prepare()
    runner = _Runner()
    ready: list[str] = []
    failure: BaseException | None = None
    while True:
        if failure is None:
            ready = sorted({*ready, *sorter.get_ready()}, key=position.__getitem__)
            while ready and runner.running < workers:
                name = ready.pop(0)
                runner.start(name, functools.partial(task, by_name[name]))
        if runner.running == 0:
            break
        name, error, _ = runner.next_done()
        if error is None:
            sorter.done(name)
        elif failure is None:
            failure = error
    if failure is not None:
        raise failure


def gather(scans: Sequence[Callable[[], list[T]]], workers: int | None = None) -> list[T]:
    """Every scan's findings, concatenated in the order of ``scans``, the scans run side by side (at most
    ``workers``, default the walk's limit). The first scan to fail, in that order, raises once all have ended."""
    workers = max_operations_setting() if workers is None else workers
    if workers <= 1 or len(scans) <= 1:
        return [item for scan in scans for item in scan()]
    runner = _Runner()
    found: dict[int, list[T]] = {}
    errors: dict[int, BaseException] = {}
    waiting = list(enumerate(scans))
    while waiting or runner.running:
        while waiting and runner.running < workers:
            index, scan = waiting.pop(0)
            runner.start(index, scan)
        index, error, result = runner.next_done()
        if error is None:
            found[index] = result
        else:
            errors[index] = error
    if errors:
        raise errors[min(errors)]
    return [item for index in range(len(scans)) for item in found[index]]
