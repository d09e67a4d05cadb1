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

import hashlib
import json
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from fmcluster.connection.aws import describe_error
from fmcluster.engine.graph import in_order
from fmcluster.engine.references import references, resolve
from fmcluster.engine.slots import MAX_OPERATIONS_VARIABLE, Slots, SlotStop, max_operations_setting
from fmcluster.engine.waiting import Stop, Stopped, growing, pause
from fmcluster.errors import FmclusterError
from fmcluster.state.store import StateStore

T = TypeVar("T")
Phase = Literal["pending", "ready", "failed", "gone"]
EventKind = Literal["started", "progress", "done", "failed", "skipped"]
Action = Literal["create", "update", "replace", "delete", "no-op"]


class Unknown:
    """A value AWS issues only when a resource this one depends on is made ("known after apply")."""

    def __repr__(self) -> str:
        return "(known after apply)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unknown)

    def __hash__(self) -> int:
        return 0


UNKNOWN = Unknown()


@dataclass
class Observed:
    """What AWS says a resource is right now.

    ``attributes`` holds the live values of the attributes the plan sets, at the same paths as
    :meth:`Resource.desired`; ``missing`` names parts a crash left unmade (a security group without its
    rules, a role without its policy): either makes the resource an ``update``."""

    id: str | None
    status: str
    phase: Phase
    outputs: dict[str, Any] = field(default_factory=dict)
    detail: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AttributeChange:
    path: str
    old: Any
    new: Any
    # What the backend says about making this change (ParallelCluster: "All compute nodes must be stopped").
    note: str = ""


@dataclass(frozen=True)
class InPlace:
    """Attribute changes a resource makes in place with one kind of call: the paths (or their prefixes) it
    changes, the name of the resource's method that sends it (``(ctx, observed, changes, token) -> Observed``),
    and the AWS page that says the change can be made so. The engine sends each kind of call on its own and waits
    for the resource to be ready before the next: EKS and FSx run one update of a resource at a time."""

    paths: tuple[str, ...]
    method: str
    page: str = ""

    def covers(self, path: str) -> bool:
        return any(_under(path, p) for p in self.paths)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


@dataclass
class ResourceChange:
    """One line of a plan: what a walk does to one resource, and why."""

    resource: str
    action: Action
    attributes: list[AttributeChange] = field(default_factory=list)
    reason: str = ""
    # A no-op only because AWS is still CREATING/UPDATING it: nothing to send, but not yet what the spec asks.
    waiting: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"resource": self.resource, "action": self.action,
                "attributes": {c.path: {"old": _jsonable(c.old), "new": _jsonable(c.new)} for c in self.attributes},
                "reason": self.reason}


def _jsonable(value: Any) -> Any:
    return repr(value) if isinstance(value, Unknown) else value


@dataclass
class Context:
    """What resources share during one command: where to call, the cluster's identity, and the values
    (ids, names) issued so far, which fill the documents' ``${kind.key.attribute}`` references."""

    cluster: str
    region: str
    client: Callable[[str], Any]
    cluster_id: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    values_lock: threading.Lock = field(default_factory=threading.Lock)
    # Tags read during this command, by ARN. fmcluster sets tags only at creation, so they hold for the whole
    # command: polling, discovery and drift need not read them again (an ARN carries the resource's id, so a
    # resource made again under the same name is read again).
    tags_by_arn: dict[str, dict[str, str]] = field(default_factory=dict)
    # When the command's waits must end (set on Ctrl-C; its deadline is the command's --timeout): resources
    # that wait inside a call pause on it (fmcluster.engine.waiting.pause) instead of sleeping on their own.
    stop: Stop = field(default_factory=Stop)
    # What a read-only pass (status, diff, create's plan) read so far: set only inside fmcluster.engine.reads.reading,
    # so a walk that writes never reads from it.
    snapshot: Any = None

    def tags(self, arn: str, read: Callable[[], dict[str, str]]) -> dict[str, str]:
        if arn not in self.tags_by_arn:
            self.tags_by_arn[arn] = read()
        return self.tags_by_arn[arn]

    def publish(self, outputs: dict[str, Any]) -> None:
        with self.values_lock:
            self.values.update(outputs)

    def resolve(self, body: Any, partial: bool = False) -> Any:
        """``body`` with its references filled; with ``partial``, a value not issued yet becomes
        :data:`UNKNOWN` instead of an error (plans are computed before anything exists)."""
        with self.values_lock:
            values = dict(self.values)
        return resolve(body, values, missing=UNKNOWN if partial else None)


class ForeignResource(FmclusterError):
    """A resource with the name fmcluster would use exists but is not this cluster's: never adopted, never
    deleted."""

    exit_code = 1


class Resource(ABC):
    """One thing in AWS with create/read/update/delete. Subclasses live in the backends.

    A resource built from a rendered document can be created and compared; one built from a state record or
    a tag scan (``document`` None) can only be read and deleted — how ``destroy`` and the removal of what
    left the spec work without the spec."""

    kind: ClassVar[str] = "resource"
    # Deleted before resources of a higher rank when there is no document graph to order a teardown.
    teardown_rank: ClassVar[int] = 50
    # Attribute paths (or their prefixes) AWS cannot change in place: a change there is a replacement.
    replace_on: ClassVar[tuple[str, ...]] = ()
    # The AWS page that says what ``replace_on`` names cannot change in place (the plan names it).
    replace_page: ClassVar[str] = ""
    # What the resource changes in place, one kind of call at a time (in this order); a change no entry covers,
    # and not in ``replace_on``, goes to :meth:`update`.
    in_place: ClassVar[tuple[InPlace, ...]] = ()
    # Outputs an update issues anew (a launch template's version): a plan that updates the resource shows them
    # as known after apply, so that what follows them (a node group on the template) is shown changing too.
    reissued_by_update: ClassVar[tuple[str, ...]] = ()
    # Kept by ``destroy --keep-storage``; its replacement loses data, which the plan says.
    is_storage: ClassVar[bool] = False
    # What users store in it, lost when a plan deletes or replaces it (None: nothing of theirs): ``create``
    # refuses such a plan without ``--allow-data-loss`` (:mod:`fmcluster.verbs.lifecycle.data_loss`) and names this.
    stored_data: ClassVar[str | None] = None
    # Deleted together with the resource it depends on (a ParallelCluster compute fleet with its stack).
    owned_by_parent: ClassVar[bool] = False
    # AWS refuses to delete what is still being created or updated; a resource whose service deletes in any state
    # (a Kubernetes object) says False, so that a teardown never waits for it to become ready first.
    settles_before_delete: ClassVar[bool] = True
    # The longest a create or update waits for the resource to become ready, whatever the command's --timeout
    # (None: as long as the command may): for what may never become ready, such as a Kubernetes Job.
    wait_limit_s: ClassVar[float | None] = None

    key: str = ""
    document: Any = None
    # Edges where no reference in the document says it (set by the backend); the graph adds the rest.
    extra_edges: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.key}"

    def references(self) -> set[str]:
        """The ``${…}`` references in this resource's document: where the graph's edges come from."""
        return references(self.document.body) if self.document is not None else set()

    def request(self, ctx: Context) -> Any:
        """The request this resource's create sends, with the values known now (its token's digest)."""
        return ctx.resolve(self.document.body, partial=True) if self.document is not None else None

    def desired(self, ctx: Context) -> dict[str, Any]:
        """The attributes the spec sets, as flat paths → values (``UNKNOWN`` where not issued yet)."""
        return {}

    @abstractmethod
    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        """Find the resource (by the recorded id, else by name or tag); None when it does not exist.
        Raise :class:`ForeignResource` when what has the name is not this cluster's."""

    @abstractmethod
    def create(self, ctx: Context, token: str) -> Observed:
        """Start creating it; ``token`` names this one request (the same after a crash, new otherwise)."""

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        """What differs between the spec and AWS; [] when AWS matches."""
        live = observed.attributes
        found = [AttributeChange(path, live.get(path), value) for path, value in self.desired(ctx).items()
                 if not _same(live.get(path), value)]
        found += [AttributeChange(part, "missing", "present") for part in observed.missing]
        return found

    def replacement_reason(self, changes: list[AttributeChange]) -> str | None:
        """Why these changes need a new resource (AWS cannot make them in place), or None."""
        fixed = [c.path for c in changes if any(_under(c.path, p) for p in self.replace_on)
                 and not any(step.covers(c.path) for step in self.in_place)]
        if not fixed:
            return None
        return (f"AWS cannot change {', '.join(sorted(set(fixed)))} of a {self.kind.replace('_', ' ')} in place"
                + (f" ({self.replace_page})" if self.replace_page else ""))

    def update_steps(self, changes: list[AttributeChange]) -> list[tuple[str, list[AttributeChange]]]:
        """The calls that make ``changes`` in place, in order: (method name, the changes it makes). Each
        :data:`in_place` entry that covers a change is one call; what none covers goes to ``update``."""
        steps: list[tuple[str, list[AttributeChange]]] = []
        left = list(changes)
        for step in self.in_place:
            mine = [c for c in left if step.covers(c.path)]
            if mine:
                steps.append((step.method, mine))
                left = [c for c in left if c not in mine]
        return steps + ([("update", left)] if left else [])

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        raise FmclusterError(f"{self.name} cannot be updated in place")

    @abstractmethod
    def delete(self, ctx: Context, observed: Observed) -> None:
        """Start deleting it; safe to repeat."""

    def why_no_backup(self, ctx: Context, observed: Observed) -> str:
        """Why fmcluster cannot back up ``stored_data`` before a plan deletes it ("" when :meth:`back_up` can)."""
        return f"AWS has no backup call fmcluster makes for a {self.kind.replace('_', ' ')}"

    def back_up(self, ctx: Context, observed: Observed, token: str) -> str:
        """Start a backup of it (:meth:`why_no_backup` said it can); the backup's id."""
        raise FmclusterError(f"{self.name} cannot be backed up: {self.why_no_backup(ctx, observed)}")

    def backup_phase(self, ctx: Context, backup_id: str) -> tuple[Phase, str]:
        """Where the backup :meth:`back_up` started is: ("ready" | "pending" | "failed", AWS's detail)."""
        raise FmclusterError(f"{self.name} makes no backups")


def _same(live: Any, wanted: Any) -> bool:
    if isinstance(wanted, Unknown):
        return False
    if isinstance(wanted, (int, float)) and isinstance(live, (int, float)) and not isinstance(wanted, bool):
        return float(live) == float(wanted)
    return live == wanted


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts → ``{"a.b": leaf}``; lists stay whole values (their order is part of what AWS keeps)."""
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value} if prefix else {}


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
        changes: list[ResourceChange] = []
        replaced: set[str] = set()
        for resource in in_order(resources):
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
            changes.append(change)
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
        finished: dict[str, threading.Event] = {r.name: threading.Event() for r in resources}
        if forward:
            waits_for = {r.name: [d for d in r.depends_on if d in names] for r in resources}
        else:  # tear down a resource only after everything that depends on it is gone
            waits_for = {r.name: [o.name for o in resources if r.name in o.depends_on] for r in resources}
        self.ctx.stop = SlotStop(deadline, self.slots)  # what every wait of this walk obeys: Ctrl-C, the deadline
        self._errors = {}
        self._waiting = {}
        self._queued = set()
        failed_names: set[str] = set()
        # Resources left for a later run (--no-wait), and those that wait on them: not failures.
        deferred: set[str] = set()

        def worker(resource: Resource) -> None:
            try:
                for dependency in waits_for[resource.name]:
                    while not finished[dependency].wait(0.05):
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
            request = {c.path: _jsonable(c.new) for c in mine}
            current, send = observed, getattr(resource, method)
            observed = self._call(resource, method, request,
                                  lambda token, send=send, current=current, mine=mine: send(self.ctx, current, mine,
                                                                                           token))
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
            pause(self.poll_interval(time.monotonic() - started), self.ctx.stop)
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
    def _record_for(self, resource: Resource):
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
