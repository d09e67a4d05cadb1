"""The resource contract: what a backend's resource implements (:class:`Resource`), what reading it returns
(:class:`Observed`), and what a plan says about it (:class:`AttributeChange`, :class:`ResourceChange`).

What a resource changes in place it declares (:class:`InPlace`: the attribute paths, the method that sends the
change, the AWS page that allows it). What it cannot change in place (``replace_on``, with ``replace_page``) is a
replacement, and the plan says why.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from fmcluster.engine.context import Context
from fmcluster.engine.references import references
from fmcluster.engine.unknown import Unknown
from fmcluster.errors import FmclusterError

Phase = Literal["pending", "ready", "failed", "gone"]
Action = Literal["create", "update", "replace", "delete", "no-op"]


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
                "attributes": {c.path: {"old": jsonable(c.old), "new": jsonable(c.new)} for c in self.attributes},
                "reason": self.reason}


def jsonable(value: Any) -> Any:
    return repr(value) if isinstance(value, Unknown) else value




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
    # How often a create or update reads the resource while it is not ready (None: the walk's growing interval, up to
    # 10 s): for a resource whose read answers from this process's memory with a line of progress each time.
    poll_s: ClassVar[float | None] = None

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
    return bool(live == wanted)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts → ``{"a.b": leaf}``; lists stay whole values (their order is part of what AWS keeps)."""
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value} if prefix else {}
