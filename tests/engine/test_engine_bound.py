"""The engine runs at most N resource operations at once (fmcluster/engine/slots.py), in apply and in destroy, and a
resource that pauses inside its own call gives its slot back meanwhile.

In-process: fake resources that the real :class:`Engine` drives, a state store in a temp dir, no AWS. The fake
operations hold until it is settled whether the engine lets more than N in: either one more enters (the bound
is broken, and the test fails) or the engine says a resource is queued for a slot while N are inside (the
bound holds). No timing: a condition variable, with a timeout only as a guard against a hang.
"""

from __future__ import annotations

import threading

import pytest

from fmcluster.engine import Context, Engine, Event, Observed, Resource
from fmcluster.engine.slots import max_operations_setting
from fmcluster.engine.waiting import pause
from fmcluster.errors import UsageError
from fmcluster.state.store import StateStore

LIMIT = 3
HANG_GUARD_S = 60


class Gate:
    """Counts the fake operations running at once and holds each until the question is settled."""

    def __init__(self, limit: int):
        self.limit = limit
        self.cond = threading.Condition()
        self.inside = self.peak = self.queued = 0
        self.open = False
        self.hung = False

    def _settle(self) -> None:  # under self.cond
        if self.inside > self.limit or (self.inside == self.limit and self.queued):
            self.open = True
            self.cond.notify_all()

    def saw(self, event: Event) -> None:
        """The engine's event stream: a resource waiting for a slot."""
        if event.kind == "progress" and event.detail.startswith("queued"):
            with self.cond:
                self.queued += 1
                self._settle()

    def operation(self) -> None:
        with self.cond:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            self._settle()
            if not self.cond.wait_for(lambda: self.open, timeout=HANG_GUARD_S):
                self.hung = self.open = True
                self.cond.notify_all()
            self.inside -= 1


class Fake(Resource):
    kind = "fake"

    def __init__(self, key: str, gate: Gate, exists: bool):
        self.key, self.gate, self.exists = key, gate, exists
        self.made = self.deleted = False

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        if self.exists:
            return Observed(self.key, "ACTIVE", "ready")
        return None

    def create(self, ctx: Context, token: str) -> Observed:
        self.gate.operation()
        self.made = self.exists = True
        return Observed(self.key, "ACTIVE", "ready")

    def delete(self, ctx: Context, observed: Observed) -> None:
        self.gate.operation()
        self.deleted, self.exists = True, False


def _engine(tmp_path, emit, limit: int) -> Engine:
    ctx = Context(cluster="bound", region="us-east-1", client=lambda service: None)
    return Engine(ctx, StateStore(tmp_path / "state.db"), emit=emit, max_operations=limit)


@pytest.mark.parametrize("walk", ["apply", "destroy"])
def test_no_more_than_n_operations_run_at_once(tmp_path, walk):
    gate = Gate(LIMIT)
    # independent resources, three times the bound: all of them are ready at once
    resources = [Fake(f"r{i}", gate, exists=walk == "destroy") for i in range(3 * LIMIT)]
    getattr(_engine(tmp_path, gate.saw, LIMIT), walk)(resources)
    assert not gate.hung, "the fake operations waited out the hang guard"
    assert gate.peak == LIMIT, f"{gate.peak} operations ran at once; the bound is {LIMIT}"
    assert gate.queued >= 1
    if walk == "apply":
        assert all(r.made for r in resources)
    else:
        assert all(r.deleted for r in resources)


class Pausing(Resource):
    """Pauses inside its create (as an EFS file system's create waits for it to be available) until the other
    resource is made, which needs the only slot."""

    kind = "pausing"

    def __init__(self, key: str, other_made: threading.Event):
        self.key, self.other_made = key, other_made
        self.pauses = 0

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        return None

    def create(self, ctx: Context, token: str) -> Observed:
        while not self.other_made.is_set() and self.pauses < HANG_GUARD_S * 100:
            self.pauses += 1
            pause(0.01, ctx.stop)
        return Observed(self.key, "ACTIVE" if self.other_made.is_set() else "STUCK", "ready")

    def delete(self, ctx: Context, observed: Observed) -> None:
        pass


class Marking(Resource):
    kind = "marking"

    def __init__(self, key: str, made: threading.Event):
        self.key, self.made = key, made

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        return None

    def create(self, ctx: Context, token: str) -> Observed:
        self.made.set()
        return Observed(self.key, "ACTIVE", "ready")

    def delete(self, ctx: Context, observed: Observed) -> None:
        pass


def test_a_pause_inside_an_operation_gives_its_slot_back(tmp_path):
    made = threading.Event()
    waiting, other = Pausing("a", made), Marking("b", made)
    events: list[Event] = []
    _engine(tmp_path, events.append, 1).apply([waiting, other])
    assert made.is_set()
    done = {e.resource: e.status for e in events if e.kind == "done"}
    assert done == {"pausing:a": "ACTIVE", "marking:b": "ACTIVE"}, events


@pytest.mark.parametrize(("value", "expected"), [("", 8), ("3", 3), (" 12 ", 12)])
def test_the_bound_comes_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("FMCLUSTER_MAX_OPERATIONS", value)
    assert max_operations_setting() == expected


@pytest.mark.parametrize("value", ["0", "-1", "eight", "2.5"])
def test_a_bad_bound_is_a_usage_error(monkeypatch, value):
    monkeypatch.setenv("FMCLUSTER_MAX_OPERATIONS", value)
    with pytest.raises(UsageError, match="FMCLUSTER_MAX_OPERATIONS"):
        max_operations_setting()
