"""Whether a process is still there: the state lock and the sandbox manager both ask."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True when ``pid`` runs; a zombie (exited, not yet reaped) counts as gone."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
