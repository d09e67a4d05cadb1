"""The per-cluster lock: one command at a time may change a cluster.

It is an ``flock`` on a file of its own under ``<state dir>/locks/`` (mode 0600). The kernel releases it
when the holding process ends, however it ends (``kill -9`` included), so a stale lock cannot outlive its
holder and a reused pid cannot keep one alive. The file also names the holder (command, pid, host, since)
so that a refused command can say who is busy.

``--force-unlock`` takes the lock over from a holder that is still alive (hung, or on another host of a
shared state directory): the lock file is replaced by a new one and locked, with a loud warning, because
two commands may then change the cluster at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from fmcluster.errors import FmclusterError
from fmcluster.state.db import StateError, private_directory

_ATTEMPTS = 5
# Locks this process holds, by lock file: (file descriptor, how many times it was taken).
_held: dict[Path, list[int]] = {}
_held_guard = threading.Lock()


class LockHeld(FmclusterError):
    exit_code = 1


def lock_path(directory: Path, cluster: str, region: str) -> Path:
    return directory / f"{quote(cluster, safe='')}@{quote(region, safe='')}.lock"


def describe_holder(path: Path) -> dict | None:
    """Who holds the lock at ``path`` now (None when nobody does)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_holder(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


def _refusal(cluster: str, holder: dict) -> str:
    since = holder.get("since")
    held = f" has held its lock for {int(time.time() - since)} s" if isinstance(since, (int, float)) else \
        " holds its lock"
    return (f"cluster {cluster} is busy: `{holder.get('command', 'another fmcluster command')}` "
            f"(pid {holder.get('pid', '?')} on {holder.get('host', '?')}){held}. Wait for it to finish, or stop it "
            "first. If it is stuck, --force-unlock takes the lock over.")


def acquire(directory: Path, cluster: str, region: str, command: str, force: bool = False,
            warn: Callable[[str], None] | None = None) -> Path:
    """Take the cluster's lock or raise :class:`LockHeld` naming the holder. Re-entrant within a process."""
    path = lock_path(directory, cluster, region)
    with _held_guard:
        if path in _held:
            _held[path][1] += 1
            return path
    private_directory(directory)
    for _ in range(_ATTEMPTS):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise StateError(f"cannot open the lock file {path} ({exc.strerror or exc}). Check the state "
                             f"directory {directory}, or set FMCLUSTER_HOME to another directory.") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            if not force:
                raise LockHeld(_refusal(cluster, holder)) from None
            if warn:
                warn(f"--force-unlock: taking the lock of cluster {cluster} from `{holder.get('command', '?')}` "
                     f"(pid {holder.get('pid', '?')} on {holder.get('host', '?')}), which still holds it. If that "
                     "command is still running, both may now change the cluster at once: stop it first.")
            path.unlink(missing_ok=True)  # the holder keeps a lock on the old, now nameless, file
            force = False
            continue
        if not _still_named(path, fd):  # replaced by a --force-unlock between our open and our flock
            os.close(fd)
            continue
        holder = {"command": command, "pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        with _held_guard:
            _held[path] = [fd, 1]
        return path
    raise StateError(f"could not take the lock file {path} after {_ATTEMPTS} attempts (it kept being replaced); "
                     "try again")


def _still_named(path: Path, fd: int) -> bool:
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def release(path: Path) -> None:
    with _held_guard:
        entry = _held.get(path)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _held[path]
    fd = entry[0]
    try:
        os.ftruncate(fd, 0)  # a file that names nobody; the file itself stays (unlinking races other lockers)
    except OSError:
        pass
    os.close(fd)  # closing drops the flock


@contextmanager
def holding(directory: Path, cluster: str, region: str, command: str, force: bool = False,
            warn: Callable[[str], None] | None = None) -> Iterator[None]:
    path = acquire(directory, cluster, region, command, force, warn)
    try:
        yield
    finally:
        release(path)
