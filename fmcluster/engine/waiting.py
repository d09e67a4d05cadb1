"""The one way fmcluster waits: a pause that wakes when the command stops, and a poll loop built on it.

Every wait in a command (the engine polling a resource, EFS becoming available, a VPC still in use, a
ParallelCluster compute fleet stopping) shares the command's :class:`Stop`: Ctrl-C, the ``--timeout``
deadline or a failure that ends the command set it, and each wait ends at once instead of sleeping out its
interval on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from fmcluster.errors import FmclusterError

T = TypeVar("T")


class Stopped(Exception):
    """A wait ended because the command is stopping (its stop was set, or its deadline passed). Not a message
    for the user: whoever stops the command says why (interrupted, timed out)."""


class WaitTimedOut(FmclusterError):
    """One wait's own limit passed (not the command's deadline): what was awaited did not happen in time."""

    exit_code = 1


class Stop:
    """When every wait of one command must end: an event set on Ctrl-C or a failure, and an optional deadline
    (``time.monotonic()`` seconds) after which waits stop and set the event, so the others end too."""

    def __init__(self, deadline: float | None = None):
        self._event = threading.Event()
        self.deadline = deadline

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`Stopped` when the command is stopping; passing the deadline stops it."""
        if self._event.is_set():
            raise Stopped()
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self._event.set()
            raise Stopped()

    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds`` or until the stop is set; True when it is set."""
        return self._event.wait(max(0.0, seconds))

    def left(self) -> float | None:
        """Seconds until the deadline (None without one)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


def pause(seconds: float, stop: Stop | None) -> None:
    """Sleep ``seconds``, waking at once when ``stop`` is set; raise :class:`Stopped` when it is set (before or
    during the pause) or when its deadline comes first. Without a stop (a command with no engine), a plain
    sleep that Ctrl-C interrupts."""
    if stop is None:
        time.sleep(max(0.0, seconds))
        return
    end = time.monotonic() + seconds
    while True:
        stop.check()
        remaining = end - time.monotonic()
        if remaining <= 0:
            return
        left = stop.left()
        stop.wait(remaining if left is None else min(remaining, left))


Interval = Callable[[float], float]


def growing(minimum: float = 0.2, maximum: float = 10.0, growth: float = 0.10) -> Interval:
    """Poll often while a wait is young, less as it ages: each poll waits ``growth`` of the time waited so far
    (so a wait ends at most ~10% after the thing is ready), between ``minimum`` and ``maximum`` seconds."""
    return lambda waited: max(minimum, min(maximum, waited * growth))


def wait_until(check: Callable[[], T], *, what: str, timeout: float | None = None,
               interval: float | Interval = 2.0, stop: Stop | None = None) -> T:
    """Call ``check`` until it returns something truthy, and return that. Between calls, :func:`pause` for
    ``interval`` seconds (or ``interval(seconds waited so far)``). Raises :class:`Stopped` when ``stop`` is set
    or its deadline passes, and :class:`WaitTimedOut` ("gave up waiting for ``what`` after …") after ``timeout``
    seconds of this wait alone. ``check`` runs at least once, and once more at the timeout."""
    started = time.monotonic()
    while True:
        if stop is not None:
            stop.check()
        result = check()
        if result:
            return result
        waited = time.monotonic() - started
        if timeout is not None and waited >= timeout:
            raise WaitTimedOut(f"gave up waiting for {what} after {_duration(timeout)}")
        step = interval(waited) if callable(interval) else interval
        if timeout is not None:
            step = min(step, timeout - waited)
        pause(step, stop)


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
