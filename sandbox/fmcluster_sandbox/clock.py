"""Sandbox time: real time plus an offset the tests move forward (``POST /_fmcluster/clock``).

AWS sends its own time in every response's ``Date`` header (RFC 7231), and fmcluster reads AWS's time from it, so
the header follows this clock. What AWS does at a time (a one-time schedule coming due) follows it too; everything
else in the sandbox (resource state timers, Capacity Block states) stays on real time.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from email.utils import formatdate


class SandboxClock:
    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    @property
    def offset_seconds(self) -> float:
        return self._offset

    def time(self) -> float:
        """Epoch seconds of sandbox time."""
        return time.time() + self._offset

    def now(self) -> _dt.datetime:
        return _dt.datetime.fromtimestamp(self.time(), _dt.timezone.utc)

    def advance(self, seconds: float) -> None:
        # Time in AWS only moves forward: a clock moved back would make a fired schedule due twice.
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise ValueError(f"advance_seconds must be a number >= 0, got {seconds!r}")
        with self._lock:
            self._offset += float(seconds)

    def reset(self) -> None:
        with self._lock:
            self._offset = 0.0

    def http_date(self) -> str:
        """The ``Date`` header value (IMF-fixdate, as AWS sends it)."""
        return formatdate(self.time(), usegmt=True)

    def to_json(self) -> dict[str, object]:
        return {"now": self.now().isoformat(timespec="seconds").replace("+00:00", "Z"),
                "offset_seconds": self._offset}


#: The one clock of the sandbox process.
CLOCK = SandboxClock()
