"""The change plan: per resource, what a walk would do (create, update, replace, delete, no-op), read from AWS
by the engine and shown before anything is written. ``create``, ``scale`` and ``diff`` all show this one plan.

Nothing here prints or knows a backend: the verbs build the plan (:mod:`fmcluster.verbs.lifecycle.diff`) and
show it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from fmcluster.engine import AttributeFilter, Context, Engine, Resource, ResourceChange
from fmcluster.engine.graph import by_rank
from fmcluster.spec.models import Spec
from fmcluster.state.store import StateStore


class Found(Protocol):
    """What discovery found in AWS, as far as the plan needs it (:class:`fmcluster.aws.discovery.Discovered`)."""

    resource: str
    ours: bool
    stack_made: bool
    handle: Resource | None


@dataclass
class Plan:
    resources: list[Resource]
    orphans: list[Resource]
    changes: list[ResourceChange]

    @property
    def in_sync(self) -> bool:
        return all(c.action == "no-op" for c in self.changes)

    @property
    def settled(self) -> bool:
        """In sync, and nothing of it is still being made or changed by AWS (what `diff` reports)."""
        return self.in_sync and not any(c.waiting for c in self.changes)

    def pending(self) -> list[ResourceChange]:
        return [c for c in self.changes if c.action != "no-op"]

    def to_delete_first(self) -> list[Resource]:
        """Resources that left the spec, and replacements: deleted (in reverse order) before the walk."""
        replaced = {c.resource for c in self.changes if c.action == "replace"}
        # Orphans come from AWS's tags, not from documents, so no reference orders them: their kinds' teardown
        # ranks do (a queue before the node group it names).
        return by_rank(list(self.orphans)) + [r for r in self.resources if r.name in replaced]

    def counts(self) -> dict[str, int]:
        counts = {action: 0 for action in ("create", "update", "replace", "delete", "no-op")}
        for change in self.changes:
            counts[change.action] += 1
        return counts


def as_json(spec: Spec, plan: Plan) -> dict[str, Any]:
    return {"cluster": spec.name, "backend": spec.backend, "in_sync": plan.settled,
            "changes": [c.as_json() for c in plan.changes]}


def orphans_of(resources: list[Resource], found: Iterable[Found]) -> list[Resource]:
    """This cluster's resources in AWS that the plan no longer has (a queue removed from the spec)."""
    planned = {r.name for r in resources}
    return [d.handle for d in found if d.handle is not None and d.ours and not d.stack_made
            and d.resource not in planned]


def plan_changes(ctx: Context, store: StateStore, resources: list[Resource], only: AttributeFilter | None = None,
                 orphans: list[Resource] | None = None) -> list[ResourceChange]:
    """What a walk would do, read from AWS: nothing is written."""
    return Engine(ctx, store).plan(resources, orphans if orphans is not None else [], only)


def make_plan(ctx: Context, store: StateStore, resources: list[Resource], found: Iterable[Found],
              only: AttributeFilter | None = None) -> Plan:
    """The spec's resources, what AWS holds, and the change for each (nothing is written)."""
    orphans = [] if only is not None else orphans_of(resources, found)
    return Plan(resources, orphans, plan_changes(ctx, store, resources, only, orphans))
