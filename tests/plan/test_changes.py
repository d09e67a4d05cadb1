"""The change plan (fmcluster/plan/changes.py) on its own: what it counts, when it is in sync, which resources it
deletes first. DESIGN §3: `diff` reports in sync only when nothing would change and nothing is still being made or
changed by AWS; a resource that left the spec is deleted, but never one a backend's own stack made."""

from __future__ import annotations

from types import SimpleNamespace

from fmcluster.engine import ResourceChange
from fmcluster.plan.changes import Plan, orphans_of


def _changes(*actions: str, waiting: str = "") -> list[ResourceChange]:
    return [ResourceChange(f"kind:{n}", a, waiting=(a == "no-op" and waiting == f"kind:{n}"))  # type: ignore[arg-type]
            for n, a in enumerate(actions)]


def test_counts_every_action_and_only_no_ops_are_in_sync() -> None:
    plan = Plan([], [], _changes("create", "update", "update", "no-op", "delete"))
    assert plan.counts() == {"create": 1, "update": 2, "replace": 0, "delete": 1, "no-op": 1}
    assert [c.resource for c in plan.pending()] == ["kind:0", "kind:1", "kind:2", "kind:4"]
    assert not plan.in_sync
    assert Plan([], [], _changes("no-op", "no-op")).in_sync


def test_a_no_op_aws_is_still_changing_is_in_sync_but_not_settled() -> None:
    plan = Plan([], [], _changes("no-op", "no-op", waiting="kind:1"))
    assert plan.in_sync
    assert not plan.settled
    assert Plan([], [], _changes("no-op")).settled


def test_orphans_are_ours_not_planned_and_not_made_by_a_stack() -> None:
    planned = [SimpleNamespace(name="queue:train")]
    handle = SimpleNamespace(name="queue:old")
    found = [
        SimpleNamespace(resource="queue:train", ours=True, stack_made=False, handle=SimpleNamespace(name="q")),
        SimpleNamespace(resource="queue:old", ours=True, stack_made=False, handle=handle),
        SimpleNamespace(resource="queue:theirs", ours=False, stack_made=False, handle=SimpleNamespace(name="t")),
        SimpleNamespace(resource="fsx_lustre:fs", ours=True, stack_made=True, handle=SimpleNamespace(name="f")),
        SimpleNamespace(resource="instance:i-1", ours=True, stack_made=False, handle=None),
    ]
    assert orphans_of(planned, found) == [handle]  # type: ignore[arg-type]


def test_replacements_are_deleted_first_after_the_orphans() -> None:
    kept = SimpleNamespace(name="kind:0")
    replaced = SimpleNamespace(name="kind:1")
    plan = Plan([kept, replaced], [], _changes("no-op", "replace"))  # type: ignore[list-item]
    assert plan.to_delete_first() == [replaced]
