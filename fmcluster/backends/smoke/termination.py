"""SIGTERM and SIGHUP ending a command the way Ctrl-C does: an exception in the main thread, so the ``finally``
blocks that undo what the command made (``smoke``'s job, on every backend) run before the process
ends.

By default Python dies of either signal at once, running no ``finally``: a ``kill``, a closed terminal or a CI
runner's cancel would leave the smoke job holding GPU nodes. The exit status is 128 + the signal's number, as a
shell reports a process killed by it and as fmcluster's Ctrl-C gives 130 (128 + SIGINT): 143 for SIGTERM, 129 for
SIGHUP.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(SystemExit):
    """The process got SIGTERM or SIGHUP; exits 128 + its number once the ``finally`` blocks have run."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(128 + signum)


@contextlib.contextmanager
def ends_like_ctrl_c() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated`. Only the first does: a second one, sent while
    the cleanup runs (a supervisor's repeated TERM), is ignored so it cannot cut the cleanup short."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if received:
            return
        received.append(signum)
        raise Terminated(signum)

    previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        if received:
            sys.stderr.write(f"\nended by {signal.Signals(received[0]).name}\n")
