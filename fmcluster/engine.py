"""The one reconciler both backends use.

A plan is a list of :class:`Resource` objects with dependencies. ``apply`` creates what is missing and
updates what differs, in dependency order, every resource in its own worker so independent steps run at
once; ``destroy`` deletes in reverse order. Both read before they write and record every step in the
state store, so re-running after Ctrl-C, a crash or ``kill -9`` converges.
"""

from __future__ import annotations

import hashlib
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from fmcluster.errors import FmclusterError
from fmcluster.state import StateStore

Phase = Literal["pending", "ready", "failed", "gone"]
EventKind = Literal["started", "progress", "done", "failed", "skipped"]


@dataclass
class Observed:
    """What AWS says a resource is right now."""

    id: str | None
    status: str
    phase: Phase
    outputs: dict[str, Any] = field(default_factory=dict)
    detail: str = ""


@dataclass
class Context:
    """What resources share during one command: where to call, and the ids issued so far."""

    cluster: str
    region: str
    client: Callable[[str], Any]
    values: dict[str, Any] = field(default_factory=dict)
    values_lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, outputs: dict[str, Any]) -> None:
        with self.values_lock:
            self.values.update(outputs)

    def resolve(self, body: Any) -> Any:
        from fmcluster.render.documents import resolve

        with self.values_lock:
            return resolve(body, dict(self.values))


class Resource(ABC):
    """One thing in AWS with create/read/update/delete. Subclasses live in the backends."""

    kind: str = "resource"
    key: str = ""
    depends_on: tuple[str, ...] = ()
    # A resource kept by ``destroy --keep-storage``.
    is_storage: bool = False
    # Deleted together with the resource it depends on (a ParallelCluster compute fleet with its stack).
    owned_by_parent: bool = False
    # The id of a failed predecessor this resource replaces: creates must then use a new client token,
    # or the service would hand back the failed (now deleted) one.
    superseded: str | None = None

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.key}"

    def create_token(self, token: str) -> str:
        """The idempotency token for this create: ``token``, unless this replaces a failed predecessor,
        whose token would make the service hand back the failed (deleted) resource."""
        if self.superseded is None:
            return token
        return hashlib.sha256(f"{token}/{self.superseded}".encode()).hexdigest()[: len(token)]

    @abstractmethod
    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        """Find the resource (by the recorded id, else by name or tag); None when it does not exist."""

    @abstractmethod
    def create(self, ctx: Context) -> Observed:
        """Start creating it; safe to repeat (client tokens, names)."""

    def differs(self, ctx: Context, observed: Observed) -> str | None:
        """A description of what must change, or None when AWS already matches the plan."""
        return None

    def update(self, ctx: Context, observed: Observed) -> Observed:
        raise NotImplementedError(f"{self.name} cannot be updated in place")

    @abstractmethod
    def delete(self, ctx: Context, observed: Observed) -> None:
        """Start deleting it; safe to repeat."""


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


class _Stop(Exception):
    """Raised inside workers when the command is stopping (Ctrl-C, timeout, a failure elsewhere)."""


@dataclass
class PollPolicy:
    """Poll often while a wait is young, less as it ages: quick in the sandbox, gentle on real AWS."""

    minimum: float = 0.2
    maximum: float = 10.0
    # Each poll waits 10% of the time waited so far: a wait ends at most ~10% after the resource is ready.
    growth: float = 0.10

    def interval(self, waited: float) -> float:
        return max(self.minimum, min(self.maximum, waited * self.growth))


class Engine:
    def __init__(self, ctx: Context, store: StateStore, emit: Callable[[Event], None] | None = None,
                 poll: PollPolicy | None = None):
        self.ctx = ctx
        self.store = store
        self.emit_to = emit or (lambda event: None)
        self.poll = poll or PollPolicy()
        self.stop = threading.Event()
        self._errors: dict[str, FmclusterError] = {}

    # public
    def apply(self, resources: list[Resource], wait: bool = True, timeout: float | None = None) -> None:
        """Create what is missing, update what differs. With ``wait=False``, make every call that needs no
        waiting and return; a later ``apply`` finishes the rest."""
        self._run(resources, lambda resource: self._ensure(resource, wait), timeout, forward=True)

    def destroy(self, resources: list[Resource], timeout: float | None = None) -> None:
        self._run(resources, self._remove, timeout, forward=False)

    # scheduling
    def _run(self, resources: list[Resource], work: Callable[[Resource], None], timeout: float | None,
             forward: bool) -> None:
        names = {r.name for r in resources}
        finished: dict[str, threading.Event] = {r.name: threading.Event() for r in resources}
        if forward:
            waits_for = {r.name: [d for d in r.depends_on if d in names] for r in resources}
        else:  # tear down a resource only after everything that depends on it is gone
            waits_for = {r.name: [o.name for o in resources if r.name in o.depends_on] for r in resources}
        deadline = time.monotonic() + timeout if timeout else None
        self._deadline = deadline
        self._errors = {}
        failed_names: set[str] = set()
        # Resources left for a later run (--no-wait), and those that wait on them: not failures.
        deferred: set[str] = set()

        def worker(resource: Resource) -> None:
            try:
                for dependency in waits_for[resource.name]:
                    while not finished[dependency].wait(0.05):
                        self._check_stop()
                    if dependency in failed_names:
                        why = "not ready yet (--no-wait)" if dependency in deferred else "which failed"
                        if dependency in deferred:
                            deferred.add(resource.name)
                        self._emit(Event(resource.name, "skipped", detail=f"waits for {dependency}, {why}"))
                        failed_names.add(resource.name)
                        return
                work(resource)
            except _Stop:
                failed_names.add(resource.name)
                if not self.stop.is_set():
                    deferred.add(resource.name)
            except FmclusterError as exc:
                failed_names.add(resource.name)
                self._errors[resource.name] = exc
                self._emit(Event(resource.name, "failed", detail=str(exc)))
            except Exception as exc:  # an AWS error the resource did not translate
                from fmcluster.aws import describe_error

                failed_names.add(resource.name)
                error = describe_error(resource.name, exc)
                self._errors[resource.name] = error
                self._emit(Event(resource.name, "failed", detail=str(error)))
            finally:
                finished[resource.name].set()

        threads = [threading.Thread(target=worker, args=(r,), name=r.name, daemon=True) for r in resources]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.1)
        except KeyboardInterrupt:
            self.stop.set()
            for thread in threads:  # let in-flight calls return so their results are recorded
                thread.join(15)
            raise Interrupted("interrupted: everything made so far is recorded") from None
        if deadline and time.monotonic() > deadline and not self._errors:
            raise TimedOut(f"gave up waiting after {timeout / 60:.0f} min; AWS carries on, and re-running the "
                           "same command picks up where this one stopped")
        if self._errors:
            first = next(iter(self._errors.values()))
            others = len(self._errors) - 1
            raise EngineFailed(str(first) + (f"\n({others} more resources failed; see above)" if others else ""))

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise _Stop()
        if self._deadline and time.monotonic() > self._deadline:
            self.stop.set()
            raise _Stop()

    # one resource
    def _ensure(self, resource: Resource, wait: bool) -> None:
        record = self._record_for(resource)
        observed = resource.read(self.ctx, record.id if record else None)
        if observed is not None and observed.phase == "failed" and not resource.owned_by_parent:
            # A failed create is not worth keeping: delete it and start over (how a re-run converges).
            self._emit(Event(resource.name, "started", observed.status, "replacing the failed resource"))
            resource.delete(self.ctx, observed)
            self._wait(resource, observed, until=("gone",), deleting=True)
            resource.superseded = observed.id
            observed = None
        if observed is None or observed.phase == "gone":
            self._emit(Event(resource.name, "started", detail="creating"))
            observed = resource.create(self.ctx)
            self._save(resource, observed)
        elif observed.phase == "ready":
            change = resource.differs(self.ctx, observed)
            if change:
                self._emit(Event(resource.name, "started", detail=f"updating: {change}"))
                observed = resource.update(self.ctx, observed)
                self._save(resource, observed)
        else:
            self._emit(Event(resource.name, "started", status=observed.status, detail="already in progress"))
        if observed.phase == "pending" and not wait:
            self._emit(Event(resource.name, "progress", observed.status, "not waiting (--no-wait)"))
            raise _Stop()
        observed = self._wait(resource, observed, until=("ready",))
        if observed.phase == "failed":
            raise EngineFailed(f"{resource.name} is {observed.status}" + (f": {observed.detail}" if observed.detail
                                                                          else ""))
        self.ctx.publish(observed.outputs)
        self._save(resource, observed)
        self._emit(Event(resource.name, "done", observed.status, observed.id or ""))

    def _remove(self, resource: Resource) -> None:
        if resource.owned_by_parent:
            self.store.forget_resource(self.ctx.cluster, self.ctx.region, resource.kind, resource.key)
            self._emit(Event(resource.name, "done", "removed", f"goes with {', '.join(resource.depends_on)}"))
            return
        record = self._record_for(resource)
        observed = resource.read(self.ctx, record.id if record else None)
        if observed is None or observed.phase == "gone":
            self.store.forget_resource(self.ctx.cluster, self.ctx.region, resource.kind, resource.key)
            self._emit(Event(resource.name, "done", "gone", "nothing to delete"))
            return
        self._emit(Event(resource.name, "started", observed.status, "deleting"))
        resource.delete(self.ctx, observed)
        self._wait(resource, observed, until=("gone",), deleting=True)
        self.store.forget_resource(self.ctx.cluster, self.ctx.region, resource.kind, resource.key)
        self._emit(Event(resource.name, "done", "deleted"))

    def _wait(self, resource: Resource, observed: Observed, until: tuple[Phase, ...],
              deleting: bool = False) -> Observed:
        started = time.monotonic()
        last_seen = (observed.status, observed.detail)
        current: Observed | None = observed
        while True:
            if current is None and "gone" not in until:
                raise EngineFailed(f"{resource.name} vanished while being created (deleted outside fmcluster?); "
                                   "re-run the same command to create it again")
            if current is None or current.phase in until:
                return current or Observed(observed.id, "gone", "gone")
            if current.phase == "failed" and not deleting:
                return current
            # A resource that failed to create can still be deleted: only a failed delete stops teardown.
            if deleting and current.status.upper().startswith("DELETE_FAILED"):
                raise EngineFailed(f"{resource.name} could not be deleted: {current.status} {current.detail}")
            waited = time.monotonic() - started
            deadline = time.monotonic() + self.poll.interval(waited)
            while time.monotonic() < deadline:
                self._check_stop()
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            current = resource.read(self.ctx, observed.id)
            if current is not None and (current.status, current.detail) != last_seen:
                if current.status != last_seen[0]:
                    self._save(resource, current)
                last_seen = (current.status, current.detail)
                self._emit(Event(resource.name, "progress", current.status, current.detail))

    # records
    def _record_for(self, resource: Resource):
        for record in self.store.resources(self.ctx.cluster, self.ctx.region):
            if record.kind == resource.kind and record.key == resource.key:
                return record
        return None

    def _save(self, resource: Resource, observed: Observed) -> None:
        self.store.record_resource(self.ctx.cluster, self.ctx.region, resource.kind, resource.key, observed.id,
                                   observed.status, observed.outputs)

    def _emit(self, event: Event) -> None:
        self.store.log_event(self.ctx.cluster, self.ctx.region, event.resource, event.kind,
                             " ".join(part for part in (event.status, event.detail) if part))
        self.emit_to(event)
