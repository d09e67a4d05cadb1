"""How many resource operations one engine walk runs at once.

A walk (:mod:`fmcluster.engine.walk`) gives every resource its own worker, so that independent steps run at once.
Unbounded, a spec with many queues would open as many connections at once as it has resources ready, and be
throttled for it; :class:`Slots` lets at most N of them call AWS at a time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from fmcluster.engine.waiting import Stop
from fmcluster.errors import UsageError

# How many resource operations (one read, create, update or delete of a resource: a few AWS calls) a walk
# runs at once, unless FMCLUSTER_MAX_OPERATIONS or ``Engine(max_operations=)`` says otherwise. A spec with many
# queues would otherwise open as many connections at once as it has resources ready, and be throttled for it;
# 8 keeps the usual graph's widest step (the node groups of a few queues) in one wave, so the critical path
# does not move. An environment variable, not a flag: it is a knob for an account's API rate, set once per
# machine or CI job, not a choice per command.
MAX_OPERATIONS = 8
MAX_OPERATIONS_VARIABLE = "FMCLUSTER_MAX_OPERATIONS"


def max_operations_setting() -> int:
    """:data:`MAX_OPERATIONS`, or the positive integer in ``FMCLUSTER_MAX_OPERATIONS``."""
    text = os.environ.get(MAX_OPERATIONS_VARIABLE, "").strip()
    if not text:
        return MAX_OPERATIONS
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{MAX_OPERATIONS_VARIABLE}={text!r}: expected a whole number of at least 1 (how many "
                         f"AWS operations a walk runs at once; default {MAX_OPERATIONS})")
    return int(text)


class Slots:
    """At most ``limit`` resource operations at once, across a walk's workers.

    A worker holds a slot while it calls into a resource (:meth:`held`) and not while it waits for a
    dependency or between the polls of a wait, so a long wait never keeps another resource from starting. A
    resource that pauses inside its own call (an EFS file system becoming available, a security group still in
    use) pauses through :class:`SlotStop`, which gives the slot back for the pause."""

    def __init__(self, limit: int):
        self.limit = limit
        self._free = threading.Semaphore(limit)
        self._local = threading.local()

    def holding(self) -> bool:
        return getattr(self._local, "holding", False)

    @contextmanager
    def held(self, stop: Stop, queued: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold a slot for the block; ``queued`` is called first when none is free (so the wait is said)."""
        if self.holding():  # an operation inside an operation keeps its one slot
            yield
            return
        self.take(stop, queued)
        try:
            yield
        finally:
            self.give_back()

    def take(self, stop: Stop, queued: Callable[[], None] | None = None) -> None:
        if not self._free.acquire(blocking=False):
            if queued is not None:
                queued()
            while not self._free.acquire(timeout=0.05):
                stop.check()
        self._local.holding = True

    def give_back(self) -> None:
        if self.holding():
            self._local.holding = False
            self._free.release()


class SlotStop(Stop):
    """The walk's :class:`Stop`, whose waits (every :func:`fmcluster.engine.waiting.pause` of a resource) give the
    waiting worker's slot back until the pause ends."""

    def __init__(self, deadline: float | None, slots: Slots):
        super().__init__(deadline)
        self.slots = slots

    def wait(self, seconds: float) -> bool:
        if not self.slots.holding():
            return super().wait(seconds)
        self.slots.give_back()
        try:
            return super().wait(seconds)
        finally:
            self.slots.take(self)  # raises Stopped when the command stops meanwhile: the slot is not held then
