"""Run the installed command so that file permissions mean what they mean for an ordinary user.

Root reads and writes through any mode bits (capabilities CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH), so a
"read-only state file" or an "unwritable directory" is only a fault for a process without them. When the
tests run as root, :func:`demote` gives the child a ``preexec_fn`` that drops both from its capability
bounding set before ``exec`` (``prctl(PR_CAPBSET_DROP)``), so the command runs as root the file owner,
bound by the owner's mode bits like anyone else.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

AS_ROOT = os.geteuid() == 0

_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE = 1
_CAP_DAC_READ_SEARCH = 2


def demote() -> Callable[[], None] | None:
    """A ``preexec_fn`` that takes away root's power to ignore file modes; None when not root."""
    if not AS_ROOT:
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for capability in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
            if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")

    return drop
