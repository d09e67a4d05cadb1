"""The per-cluster lock is a real file lock: it names its holder, dies with its process (kill -9 included),
cannot be kept alive by a reused pid, and ``--force-unlock`` takes it from a live holder with a warning.

The holder is a separate process, as in real use (an flock is per open file, not per process name).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fmcluster.state import locks
from fmcluster.state.locks import LockHeld

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from fmcluster.state import locks
    locks.acquire(Path(sys.argv[1]), sys.argv[2], "us-east-1", "fmcluster create held.yaml")
    print("held", flush=True)
    time.sleep(600)
""")


def hold(directory: Path, cluster: str) -> subprocess.Popen:
    """Start a process that takes the cluster's lock and keeps it until it is killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory), cluster], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "held", proc.stderr.read()
    return proc


@pytest.fixture
def holder(tmp_path: Path):
    proc = hold(tmp_path / "locks", "demo")
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def test_refusal_names_the_holder(tmp_path: Path, holder: subprocess.Popen) -> None:
    with pytest.raises(LockHeld) as caught:
        locks.acquire(tmp_path / "locks", "demo", "us-east-1", "fmcluster destroy demo")
    message = str(caught.value)
    assert f"pid {holder.pid} on {socket.gethostname()}" in message
    assert "`fmcluster create held.yaml`" in message and "has held its lock for" in message
    assert "--force-unlock" in message
    # another cluster is not blocked
    path = locks.acquire(tmp_path / "locks", "other", "us-east-1", "fmcluster create other.yaml")
    locks.release(path)


def test_lock_dies_with_its_holder(tmp_path: Path, holder: subprocess.Popen) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    path = locks.acquire(tmp_path / "locks", "demo", "us-east-1", "fmcluster destroy demo")
    assert locks.describe_holder(path)["pid"] == os.getpid()
    locks.release(path)
    assert locks.describe_holder(path) is None


def test_a_reused_pid_does_not_hold_the_lock(tmp_path: Path) -> None:
    """A lock file that names a live process (pid 1 here) without that process holding the flock - what a crash
    followed by pid reuse leaves - does not block anyone."""
    directory = tmp_path / "locks"
    directory.mkdir(mode=0o700)
    stale = locks.lock_path(directory, "demo", "us-east-1")
    stale.write_text(json.dumps({"command": "fmcluster create old.yaml", "pid": 1, "host": socket.gethostname(),
                                 "since": 0}))
    assert locks.describe_holder(stale) is None
    path = locks.acquire(directory, "demo", "us-east-1", "fmcluster create new.yaml")
    assert locks.describe_holder(path)["command"] == "fmcluster create new.yaml"
    locks.release(path)


def test_force_unlock_takes_over_with_a_warning(tmp_path: Path, holder: subprocess.Popen) -> None:
    directory = tmp_path / "locks"
    warnings: list[str] = []
    path = locks.acquire(directory, "demo", "us-east-1", "fmcluster destroy demo", force=True, warn=warnings.append)
    try:
        assert len(warnings) == 1 and f"pid {holder.pid}" in warnings[0] and "both may now change" in warnings[0]
        assert holder.poll() is None  # the old holder was not touched, only its claim
        assert locks.describe_holder(path)["pid"] == os.getpid()
        # the new holder is who a third command is told about
        third = subprocess.run([sys.executable, "-c", textwrap.dedent("""
            import sys
            from pathlib import Path
            from fmcluster.state import locks
            try:
                locks.acquire(Path(sys.argv[1]), "demo", "us-east-1", "fmcluster scale demo")
            except locks.LockHeld as exc:
                print(exc)
        """), str(directory)], capture_output=True, text=True, timeout=60)
        assert f"pid {os.getpid()}" in third.stdout and "fmcluster destroy demo" in third.stdout, third
    finally:
        locks.release(path)


def test_force_unlock_without_a_holder_just_locks(tmp_path: Path) -> None:
    warnings: list[str] = []
    path = locks.acquire(tmp_path / "locks", "demo", "us-east-1", "fmcluster destroy demo", force=True,
                         warn=warnings.append)
    locks.release(path)
    assert warnings == []


def test_lock_files_are_private_and_reentrant(tmp_path: Path) -> None:
    directory = tmp_path / "locks"
    outer = locks.acquire(directory, "demo", "us-east-1", "fmcluster create a.yaml")
    inner = locks.acquire(directory, "demo", "us-east-1", "fmcluster create a.yaml")
    assert inner == outer
    locks.release(inner)
    assert locks.describe_holder(outer)["pid"] == os.getpid(), "still held after the inner release"
    locks.release(outer)
    assert locks.describe_holder(outer) is None
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(outer.stat().st_mode) == 0o600


def test_lock_names_are_safe_file_names(tmp_path: Path) -> None:
    path = locks.lock_path(tmp_path, "../../etc/passwd", "us-east-1")
    assert path.parent == tmp_path and "/" not in path.name


def test_a_waiting_second_command_gets_the_lock_once_the_first_ends(tmp_path: Path) -> None:
    proc = hold(tmp_path / "locks", "demo")
    try:
        with pytest.raises(LockHeld):
            locks.acquire(tmp_path / "locks", "demo", "us-east-1", "fmcluster scale demo")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # how soon it gets it is a timing: bench/suite_timings.py (lock_handover)
    path = locks.acquire(tmp_path / "locks", "demo", "us-east-1", "fmcluster scale demo")
    assert locks.describe_holder(path)["pid"] == os.getpid()
    locks.release(path)
