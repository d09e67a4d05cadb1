"""The one reconciler both backends use.

A plan is a list of :class:`Resource` objects wired into a graph by the references between their documents
(:mod:`fmcluster.engine.graph`). ``plan`` reads AWS and says, per resource, what a walk would do; ``apply`` deletes
what must go first (resources no longer in the spec, and replacements), then creates what is missing and
updates what differs, in dependency order, every resource in its own worker so independent steps run at
once (at most a few of them calling AWS at a time: :mod:`fmcluster.engine.slots`); ``destroy`` deletes in reverse
order. Every write is read-before-write and recorded in the state store, and every create or update carries
an idempotency token recorded before the call, so re-running after Ctrl-C, a crash or ``kill -9`` converges.

What a resource changes in place it declares (:class:`InPlace`: the attribute paths, the method that sends the
change, the AWS page that allows it); the engine sends one kind of update at a time and waits for each to end,
since EKS and FSx run one update of a resource at a time. What it cannot change in place (``replace_on``, with
``replace_page``) is a replacement, and the plan says why.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from fmcluster.connection.aws import describe_error
from fmcluster.engine.concurrently import each_by_dependency
from fmcluster.engine.context import Context
from fmcluster.engine.events import EngineFailed, Event, Interrupted, TimedOut
from fmcluster.engine.graph import in_order
from fmcluster.engine.resource import AttributeChange, Observed, Phase, Resource, ResourceChange, jsonable
from fmcluster.engine.slots import MAX_OPERATIONS_VARIABLE, Slots, SlotStop, max_operations_setting
from fmcluster.engine.unknown import UNKNOWN, Unknown
from fmcluster.engine.waiting import Stopped, growing, pause
from fmcluster.errors import FmclusterError
from fmcluster.state.store import ResourceRecord, StateStore

T = TypeVar("T")

AttributeFilter = Callable[[str], bool]

class Engine:
    def __init__(self, ctx: Context, store: StateStore, emit: Callable[[Event], None] | None = None,
                 max_operations: int | None = None, order: random.Random | None = None):
        self.ctx = ctx
        # Tests: with ``order``, a walk runs one resource at a time, each drawn by it from those whose dependencies
        # are done, so a seed replays one of the orders the threads could take and several seeds try many: an
        # order the graph does not enforce shows up as a failure, not as a race that passes most of the time.
        self.order = order
        self.store = store
        self.emit_to = emit or (lambda event: None)
        self.slots = Slots(max_operations if max_operations is not None else max_operations_setting())
        self._queued: set[str] = set()  # resources whose wait for a slot was said (once per walk)
        # Poll often while a wait is young, less as it ages: quick in the sandbox, gentle on real AWS.
        self.poll_interval = growing()
        self._errors: dict[str, FmclusterError] = {}
        self._only: AttributeFilter | None = None
        # What each resource being waited for last reported (label, status, detail): a timeout names them.
        self._waiting: dict[str, tuple[str, str, str]] = {}
        self._waiting_lock = threading.Lock()

    # -- plan ---------------------------------------------------------------------------------------
    def plan(self, resources: list[Resource], orphans: Iterable[Resource] = (),
             only: AttributeFilter | None = None) -> list[ResourceChange]:
        """Read AWS (nothing is written) and say what ``apply`` would do to each resource, in graph order.
        ``only`` restricts the walk to attribute paths it accepts (``scale``: node counts)."""
        ordered = in_order(resources)
        found: dict[str, ResourceChange] = {}
        replaced: set[str] = set()

        def plan_one(resource: Resource) -> None:
            record = self._record_for(resource)
            observed = resource.read(self.ctx, record.id if record else None)
            if observed is not None and observed.phase in ("ready", "pending"):
                # What AWS issued is a fact, also for the resource's own document (a security group's rule
                # that names the group itself); a dependent of a replacement is replaced anyway (below).
                self.ctx.publish(observed.outputs)
            change = self._change_for(resource, observed, only)
            # A dependent of something replaced is replaced too: it holds the old one's id, and AWS will not
            # delete a resource still in use (a PCS node group named by a queue).
            cascaded = [d for d in resource.depends_on if d in replaced and d != resource.name]
            if cascaded and change.action in ("update", "no-op") and only is None:
                change = ResourceChange(resource.name, "replace", change.attributes,
                                        f"depends on {', '.join(cascaded)}, which is replaced")
            if change.action == "replace":
                replaced.add(resource.name)
            elif change.action == "update" and resource.reissued_by_update:
                self.ctx.publish({f"{resource.kind}.{resource.key}.{output}": UNKNOWN
                                  for output in resource.reissued_by_update})
            found[resource.name] = change

        # Each resource is read once its dependencies are (their ids fill its document), independent ones at once
        # (a seeded order reads one at a time, as its walks do).
        each_by_dependency(ordered, plan_one, 1 if self.order is not None else self.slots.limit)
        changes = [found[resource.name] for resource in ordered]
        for orphan in orphans:
            changes.append(ResourceChange(orphan.name, "delete", reason="no longer in the spec"))
        return changes

    def _change_for(self, resource: Resource, observed: Observed | None,
                    only: AttributeFilter | None) -> ResourceChange:
        if observed is None or observed.phase == "gone":
            return ResourceChange(resource.name, "create" if only is None else "no-op",
                                  reason="" if only is None else "missing; `fmcluster create` makes it")
        if observed.phase == "failed":
            return ResourceChange(resource.name, "replace", reason=f"it is {observed.status}" +
                                  (f": {observed.detail}" if observed.detail else ""))
        if observed.phase == "pending":
            return ResourceChange(resource.name, "no-op", reason=f"{observed.status}: waits for AWS to finish",
                                  waiting=True)
        found = resource.changes(self.ctx, observed)
        if only is not None:
            found = [c for c in found if only(c.path)]
        if not found:
            return ResourceChange(resource.name, "no-op")
        why = resource.replacement_reason(found)
        if why:
            return ResourceChange(resource.name, "replace", found, why)
        return ResourceChange(resource.name, "update", found)

    # -- walks --------------------------------------------------------------------------------------
    def apply(self, resources: list[Resource], delete_first: Iterable[Resource] = (), wait: bool = True,
              timeout: float | None = None, only: AttributeFilter | None = None) -> None:
        """Delete ``delete_first`` (resources that left the spec, and replacements) in reverse order, then
        create what is missing and update what differs. With ``wait=False``, make every call that needs no
        waiting and return; a later ``apply`` finishes the rest."""
        deadline = time.monotonic() + timeout if timeout else None
        doomed = list(delete_first)
        if doomed:
            self._run(doomed, self._remove, deadline, timeout, forward=False)
        self._only = only
        self._run(resources, lambda resource: self._ensure(resource, wait), deadline, timeout, forward=True)

    def destroy(self, resources: list[Resource], timeout: float | None = None) -> None:
        deadline = time.monotonic() + timeout if timeout else None
        self._run(resources, self._remove, deadline, timeout, forward=False)

    # -- scheduling ---------------------------------------------------------------------------------
    def _run(self, resources: list[Resource], work: Callable[[Resource], None], deadline: float | None,
             timeout: float | None, forward: bool) -> None:
        names = {r.name for r in resources}
        if forward:
            waits_for = {r.name: [d for d in r.depends_on if d in names] for r in resources}
        else:  # tear down a resource only after everything that depends on it is gone
            waits_for = {r.name: [o.name for o in resources if r.name in o.depends_on] for r in resources}
        before = self.ctx.stop
        self.ctx.stop = SlotStop(deadline, self.slots)  # what every wait of this walk obeys: Ctrl-C, the deadline
        try:
            self._walk(resources, work, deadline, timeout, waits_for)
        finally:
            # The walk is over, however it ended: work a resource left running in the background (the burn-in gate)
            # stops with it, and what the command does next waits on its own stop again.
            self.ctx.stop.set()
            self.ctx.stop = before

    def _walk(self, resources: list[Resource], work: Callable[[Resource], None], deadline: float | None,
              timeout: float | None, waits_for: dict[str, list[str]]) -> None:
        finished: dict[str, threading.Event] = {r.name: threading.Event() for r in resources}
        self._errors = {}
        self._waiting = {}
        self._queued = set()
        failed_names: set[str] = set()
        # Resources left for a later run (--no-wait), and those that wait on them: not failures.
        deferred: set[str] = set()

        def worker(resource: Resource) -> None:
            try:
                for dependency in waits_for[resource.name]:
                    # a dependency's end wakes this at once; the timeout only bounds how late a stop is seen (a
                    # shorter one cost a create of a hundred resources a tenth of a core in wake-ups)
                    while not finished[dependency].wait(0.5):
                        self.ctx.stop.check()
                    if dependency in failed_names:
                        why = "not ready yet (--no-wait)" if dependency in deferred else "which failed"
                        if dependency in deferred:
                            deferred.add(resource.name)
                        self._emit(Event(resource.name, "skipped", detail=f"waits for {dependency}, {why}"))
                        failed_names.add(resource.name)
                        return
                work(resource)
            except Stopped:
                failed_names.add(resource.name)
                if not self.ctx.stop.is_set():
                    deferred.add(resource.name)
            except FmclusterError as exc:
                failed_names.add(resource.name)
                self._errors[resource.name] = exc
                self._emit(Event(resource.name, "failed", detail=str(exc)))
            except Exception as exc:  # an AWS error the resource did not translate
                failed_names.add(resource.name)
                error = describe_error(resource.name, exc)
                self._errors[resource.name] = error
                self._emit(Event(resource.name, "failed", detail=str(error)))
            finally:
                finished[resource.name].set()

        threads = [] if self.order is not None else [
            threading.Thread(target=worker, args=(r,), name=r.name, daemon=True) for r in resources]
        for thread in threads:
            thread.start()
        try:
            if self.order is not None:
                self._run_in_drawn_order(resources, waits_for, finished, worker)
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.1)
        except KeyboardInterrupt:
            self.ctx.stop.set()
            for thread in threads:  # let in-flight calls return so their results are recorded
                thread.join(15)
            raise Interrupted("interrupted: everything made so far is recorded") from None
        if deadline and time.monotonic() > deadline and not self._errors:
            with self._waiting_lock:
                waiting = [f"{label} ({' '.join(part for part in (status, detail) if part)})"
                           for label, status, detail in self._waiting.values()]
            raise TimedOut(f"gave up waiting after {(timeout or 0) / 60:.0f} min"
                           + (f" for {'; '.join(waiting)}" if waiting else "")
                           + "; AWS carries on, and re-running the same command picks up where this one stopped")
        if self._errors:
            first = next(iter(self._errors.values()))
            others = len(self._errors) - 1
            raise EngineFailed(str(first) + (f"\n({others} more resources failed; see above)" if others else ""))

    def _run_in_drawn_order(self, resources: list[Resource], waits_for: dict[str, list[str]],
                            finished: dict[str, threading.Event], worker: Callable[[Resource], None]) -> None:
        """Run ``worker`` on one resource at a time, each drawn by :attr:`order` from those whose dependencies are
        finished (the graph is acyclic: one always is)."""
        assert self.order is not None
        left = list(resources)
        while left:
            ready = [r for r in left if all(finished[d].is_set() for d in waits_for[r.name])]
            chosen = self.order.choice(ready)
            left.remove(chosen)
            worker(chosen)

    # -- one resource -------------------------------------------------------------------------------
    def _ensure(self, resource: Resource, wait: bool) -> None:
        record = self._record_for(resource)
        observed = self._operation(resource, lambda: resource.read(self.ctx, record.id if record else None))
        if observed is not None and observed.phase == "failed" and not resource.owned_by_parent:
            # A failed create is not worth keeping: delete it and start over (how a re-run converges).
            self._emit(Event(resource.name, "started", observed.status, "replacing the failed resource"))
            failed = observed
            self._operation(resource, lambda: resource.delete(self.ctx, failed))
            self._wait(resource, observed, until=("gone",), deleting=True)
            observed = None
        if observed is None or observed.phase == "gone":
            if self._only is not None:  # a restricted walk (scale) changes attributes, never makes things
                raise EngineFailed(f"{resource.name} does not exist: `fmcluster create SPEC` makes it")
            self._emit(Event(resource.name, "started", detail="creating"))
            observed = self._call(resource, "create", resource.request(self.ctx),
                                  lambda token: resource.create(self.ctx, token))
            self._save(resource, observed)
        elif observed.phase == "ready":
            self.ctx.publish(observed.outputs)  # its own document may name what AWS issued it (see plan)
            ready = observed
            changes = self._operation(resource, lambda: resource.changes(self.ctx, ready))  # ParallelCluster's asks AWS
            if self._only is not None:
                changes = [c for c in changes if self._only(c.path)]
            if changes:
                why = resource.replacement_reason(changes)
                if why:
                    raise EngineFailed(f"{resource.name} needs a replacement ({why}); `fmcluster diff SPEC` "
                                       "shows it and `fmcluster create SPEC` asks before doing it")
                observed = self._update(resource, observed, changes, wait)
            else:
                self.store.close_intents(self.ctx.cluster, self.ctx.region, resource.name)
        else:
            self._emit(Event(resource.name, "started", status=observed.status, detail="already in progress"))
        if observed.phase == "pending" and not wait:
            self._emit(Event(resource.name, "progress", observed.status, "not waiting (--no-wait)"))
            raise Stopped()  # deferred to a later run, not a failure
        observed = self._wait(resource, observed, until=("ready",))
        if observed.phase == "failed":
            raise EngineFailed(f"{resource.name} is {observed.status}" + (f": {observed.detail}" if observed.detail
                                                                          else ""))
        self.ctx.publish(observed.outputs)
        self._save(resource, observed)
        self._emit(Event(resource.name, "done", observed.status, observed.id or ""))

    def _update(self, resource: Resource, observed: Observed, changes: list[AttributeChange],
                wait: bool) -> Observed:
        """Make ``changes`` in place, one kind of call at a time (:meth:`Resource.update_steps`), each after the
        one before is done; a step that fails stops the rest (a re-run starts again from what still differs)."""
        steps = resource.update_steps(changes)
        for number, (method, mine) in enumerate(steps):
            if number:
                if not wait:
                    self._emit(Event(resource.name, "progress", observed.status, "not waiting (--no-wait)"))
                    raise Stopped()
                observed = self._wait(resource, observed, until=("ready",))
                if observed.phase == "failed":
                    raise EngineFailed(f"{resource.name} is {observed.status}"
                                       + (f": {observed.detail}" if observed.detail else ""))
            self._emit(Event(resource.name, "started", detail="updating: " + _describe(mine)
                             + (f" (step {number + 1} of {len(steps)})" if len(steps) > 1 else "")))
            request = {c.path: jsonable(c.new) for c in mine}
            current, send = observed, getattr(resource, method)
            observed = self._call(resource, method, request, functools.partial(send, self.ctx, current, mine))
            self._save(resource, observed)
        return observed

    def _call(self, resource: Resource, operation: str, request: Any, call: Callable[[str], Observed]) -> Observed:
        """Make one create/update call under a token recorded before it: a crash between the two leaves the
        token open, and the re-run's identical request reuses it, so AWS does the work once. Any other request
        gets a new token — a token derived from the request would replay an earlier one."""
        digest = hashlib.sha256(json.dumps([operation, request], sort_keys=True, default=repr).encode()).hexdigest()
        token = self.store.open_intent(self.ctx.cluster, self.ctx.region, resource.name, operation, digest)
        try:
            return self._operation(resource, lambda: call(token))
        finally:
            self.store.close_intents(self.ctx.cluster, self.ctx.region, resource.name)

    def _remove(self, resource: Resource) -> None:
        if resource.owned_by_parent:
            self.store.forget_resource(self.ctx.cluster, self.ctx.region, resource.kind, resource.key)
            self._emit(Event(resource.name, "done", "removed", f"goes with {', '.join(resource.depends_on)}"))
            return
        record = self._record_for(resource)
        observed = self._operation(resource, lambda: resource.read(self.ctx, record.id if record else None))
        if (observed is not None and observed.phase == "pending" and resource.settles_before_delete
                and not observed.status.upper().startswith("DELET")):
            # AWS refuses to delete what is still being created or updated: let it settle first.
            self._emit(Event(resource.name, "started", observed.status, "waiting for it to settle before deleting"))
            observed = self._wait(resource, observed, until=("ready", "failed", "gone"))
        if observed is None or observed.phase == "gone":
            self.store.forget_resource(self.ctx.cluster, self.ctx.region, resource.kind, resource.key)
            self._emit(Event(resource.name, "done", "gone", "nothing to delete"))
            return
        self._emit(Event(resource.name, "started", observed.status, "deleting"))
        doomed = observed
        self._operation(resource, lambda: resource.delete(self.ctx, doomed))
        self._wait(resource, observed, until=("gone",), deleting=True)
        self.store.forget_resource(self.ctx.cluster, self.ctx.region, resource.kind, resource.key)
        self._emit(Event(resource.name, "done", "deleted"))

    def _wait(self, resource: Resource, observed: Observed, until: tuple[Phase, ...],
              deleting: bool = False) -> Observed:
        try:
            found = self._poll(resource, observed, until, deleting)
        except Stopped:
            raise  # still awaited when the command stopped: a timeout names it
        except BaseException:
            self._forget_wait(resource)
            raise
        self._forget_wait(resource)
        return found

    def _forget_wait(self, resource: Resource) -> None:
        with self._waiting_lock:
            self._waiting.pop(resource.name, None)

    def _poll(self, resource: Resource, observed: Observed, until: tuple[Phase, ...], deleting: bool) -> Observed:
        started = time.monotonic()
        last_seen = (observed.status, observed.detail)
        current: Observed | None = observed
        known_id = observed.id
        label = getattr(resource, "label", resource.name)
        while True:
            if current is not None:
                with self._waiting_lock:
                    self._waiting[resource.name] = (label, current.status, current.detail)
            if current is None and "gone" not in until:
                raise EngineFailed(f"{resource.name} vanished while being created or updated (deleted outside "
                                   "fmcluster?); re-run the same command to create it again")
            if current is None or current.phase in until:
                return current or Observed(known_id, "gone", "gone")
            if current.phase == "failed" and not deleting:
                return current
            limit = resource.wait_limit_s
            if limit is not None and not deleting and time.monotonic() - started > limit:
                raise EngineFailed(f"{label} did not become ready within {limit / 60:.0f} min (it is {current.status}"
                                   + (f": {current.detail}" if current.detail else "") + ")")
            # A resource that failed to create can still be deleted: only a failed delete stops teardown.
            if deleting and current.status.upper().startswith("DELETE_FAILED"):
                raise EngineFailed(f"{resource.name} could not be deleted: {current.status} {current.detail}")
            pause(resource.poll_s or self.poll_interval(time.monotonic() - started), self.ctx.stop)
            current = self._operation(resource, lambda: resource.read(self.ctx, known_id))
            if current is not None and (current.status, current.detail) != last_seen:
                if current.status != last_seen[0]:
                    self._save(resource, current)
                last_seen = (current.status, current.detail)
                self._emit(Event(resource.name, "progress", current.status, current.detail))

    def _operation(self, resource: Resource, call: Callable[[], T]) -> T:
        """One call into ``resource`` (a read, create, update or delete: a few AWS calls), in one of the walk's
        :class:`Slots`. The first time a resource has to wait for one, the wait is said."""
        def queued() -> None:
            if resource.name not in self._queued:
                self._queued.add(resource.name)
                self._emit(Event(resource.name, "progress", detail=f"queued: {self.slots.limit} AWS operations "
                                 f"already running ({MAX_OPERATIONS_VARIABLE})"))

        with self.slots.held(self.ctx.stop, queued):
            return call()

    # -- records ------------------------------------------------------------------------------------
    def _record_for(self, resource: Resource) -> ResourceRecord | None:
        return self.store.resource(self.ctx.cluster, self.ctx.region, resource.kind, resource.key)

    def _save(self, resource: Resource, observed: Observed) -> None:
        self.store.record_resource(self.ctx.cluster, self.ctx.region, resource.kind, resource.key, observed.id,
                                   observed.status, observed.outputs)

    def _emit(self, event: Event) -> None:
        self.store.log_event(self.ctx.cluster, self.ctx.region, event.resource, event.kind,
                             " ".join(part for part in (event.status, event.detail) if part))
        self.emit_to(event)


def _describe(changes: list[AttributeChange]) -> str:
    return ", ".join(f"{c.path} {_short(c.old)} → {_short(c.new)}" for c in changes[:4]) + (
        f" (+{len(changes) - 4} more)" if len(changes) > 4 else "")


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, Unknown) else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "…"
