"""What a walk reports as it goes (:class:`Event`) and how it ends when it does not finish."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from fmcluster.errors import FmclusterError

EventKind = Literal["started", "progress", "done", "failed", "skipped"]


@dataclass
class Event:
    resource: str
    kind: EventKind
    status: str = ""
    detail: str = ""
    at: float = field(default_factory=time.monotonic)


class EngineFailed(FmclusterError):
    exit_code = 1


class Interrupted(FmclusterError):
    exit_code = 130


class TimedOut(FmclusterError):
    exit_code = 1
