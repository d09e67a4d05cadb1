"""The plan reads independent resources side by side and each resource after what it refers to
(fmcluster/engine/concurrently.py), at most N at once; discovery's scans run side by side and keep their order.

In-process: fake resources that the real :class:`Engine` plans, a state store in a temp dir, no AWS. Overlap is
shown with a barrier, not a timer: two independent reads must both be inside at once to pass it (read one after the
other, the first waits alone until the barrier's guard breaks it, and the test fails).
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from fmcluster.engine import Context, Engine, Observed, Resource, reads
from fmcluster.engine.concurrently import gather
from fmcluster.engine.graph import wire
from fmcluster.render.documents import Document
from fmcluster.state.store import StateStore

HANG_GUARD_S = 30


class Read(Resource):
    """A resource whose read waits at ``barrier`` (when given) and records what it saw published."""

    kind = "fake"

    def __init__(self, key: str, body: dict | None = None, barrier: threading.Barrier | None = None,
                 log: list[str] | None = None, fails: bool = False, guard_s: float = HANG_GUARD_S):
        self.key = key
        self.document = Document(f"{key}.json", "fake", key, "ec2", {}, "", body) if body is not None else None
        self.barrier, self.log, self.fails, self.guard_s = barrier, log if log is not None else [], fails, guard_s
        self.seen: object = None

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        self.log.append(f"start {self.key}")
        if self.barrier is not None:
            self.barrier.wait(self.guard_s)
        if self.fails:
            raise RuntimeError(f"{self.key}: AWS said no")
        if self.document is not None:
            self.seen = ctx.resolve(self.document.body, partial=True)
        self.log.append(f"end {self.key}")
        return Observed(f"id-{self.key}", "ACTIVE", "ready", {f"fake.{self.key}.id": f"id-{self.key}"})

    def create(self, ctx: Context, token: str) -> Observed:
        raise AssertionError("a plan writes nothing")

    def delete(self, ctx: Context, observed: Observed) -> None:
        raise AssertionError("a plan writes nothing")


@pytest.fixture
def engine(tmp_path):
    def make(workers: int) -> Engine:
        ctx = Context(cluster="c", region="us-east-1", client=lambda service: None)
        return Engine(ctx, StateStore(tmp_path / "state.db"), max_operations=workers)
    return make


def test_independent_reads_run_at_once_and_a_dependent_reads_after_what_it_refers_to(engine):
    barrier = threading.Barrier(3)
    log: list[str] = []
    a, b, c = (Read(k, barrier=barrier, log=log) for k in "abc")
    child = Read("child", {"parent": "${fake.a.id}", "other": "${fake.c.id}"}, log=log)
    resources = wire([a, b, c, child])
    changes = engine(8).plan(resources)
    assert not barrier.broken  # a, b and c were inside their reads at the same time
    assert [change.resource for change in changes] == ["fake:a", "fake:b", "fake:c", "fake:child"]  # graph order
    assert child.seen == {"parent": "id-a", "other": "id-c"}  # the ids its dependencies published
    assert log.index("start child") > max(log.index("end a"), log.index("end c"))


def test_one_worker_reads_one_resource_at_a_time(engine):
    barrier = threading.Barrier(2)
    resources = wire([Read("a", barrier=barrier, guard_s=1.0), Read("b", barrier=barrier, guard_s=1.0)])
    # one at a time, the first read waits alone at the barrier until its guard breaks it
    with pytest.raises(threading.BrokenBarrierError):
        engine(1).plan(resources)


def test_a_failed_read_is_raised_and_what_depends_on_it_is_not_read(engine):
    log: list[str] = []
    bad = Read("bad", fails=True, log=log)
    child = Read("child", {"parent": "${fake.bad.id}"}, log=log)
    with pytest.raises(RuntimeError, match="bad: AWS said no"):
        engine(8).plan(wire([bad, Read("ok", log=log), child]))
    assert "start child" not in log


def test_gather_keeps_the_order_asked_and_runs_the_scans_at_once():
    barrier = threading.Barrier(3)

    def scan(items: list[str]):
        def run() -> list[str]:
            barrier.wait(HANG_GUARD_S)
            return items
        return run

    assert gather([scan(["a1", "a2"]), scan([]), scan(["c"])], workers=8) == ["a1", "a2", "c"]
    assert not barrier.broken


def test_gather_raises_the_first_failure_in_the_order_asked():
    def fails(why: str):
        def run() -> list[str]:
            raise ValueError(why)
        return run

    with pytest.raises(ValueError, match="first"):
        gather([lambda: ["fine"], fails("first"), fails("second")], workers=8)


def test_two_readers_of_one_item_at_once_make_one_call():
    """Two resources read side by side may ask for the same item (a launch template's version): in a read-only pass
    the second waits for the first's answer instead of asking AWS again."""
    ctx = Context(cluster="c", region="us-east-1", client=lambda service: None)
    inside = threading.Event()
    calls: list[str] = []

    def fetch() -> dict:
        calls.append("call")
        inside.set()
        release.wait(HANG_GUARD_S)
        return {"Version": 1}

    release = threading.Event()
    answers: list[dict] = []
    with reads.reading(ctx):
        first = threading.Thread(target=lambda: answers.append(reads.once(ctx, "ec2.X", "lt-1:1", fetch)))
        first.start()
        assert inside.wait(HANG_GUARD_S)
        second = threading.Thread(target=lambda: answers.append(reads.once(ctx, "ec2.X", "lt-1:1", fetch)))
        second.start()
        second.join(0.2)
        assert second.is_alive()  # waiting on the first reader, not calling
        release.set()
        first.join(HANG_GUARD_S)
        second.join(HANG_GUARD_S)
    assert calls == ["call"] and answers == [{"Version": 1}, {"Version": 1}]


CTRL_C_SCRIPT = """
import os, signal, sys, threading, time
from fmcluster.engine.concurrently import gather

release = threading.Event()
started = threading.Event()

def stuck():
    started.set()
    release.wait(60)  # a read AWS has not answered yet
    return []

def guard():
    time.sleep(10)
    print("the read was released", flush=True)
    release.set()

def ctrl_c():
    started.wait(60)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=guard, daemon=True).start()
threading.Thread(target=ctrl_c, daemon=True).start()
try:
    gather([stuck, lambda: []], workers=8)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_ctrl_c_ends_the_command_at_once_while_a_read_still_waits():
    """Ctrl-C during a read-only command ends it at once, as it did when its reads ran on its own thread: neither the
    interrupt nor the interpreter's exit waits for a read AWS has not answered. A fresh interpreter, whose main thread
    the signal reaches; the read is released after 10 s, and says so: a process that waited for it prints that."""
    result = subprocess.run([sys.executable, "-c", CTRL_C_SCRIPT], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout.splitlines()) == (130, ["interrupted"]), result.stderr
