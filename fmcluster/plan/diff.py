"""``fmcluster diff``: read AWS and the state, then say per resource what ``create`` would do — and the one
plan that ``create`` and ``scale`` show before they ask."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fmcluster.backends.base import Discovered
from fmcluster.engine import AttributeFilter, Resource, ResourceChange, Unknown, reads
from fmcluster.engine.graph import by_rank
from fmcluster.output import ui
from fmcluster.spec.models import Spec
from fmcluster.verbs.lifecycle.common import dump_json, orphans_of, plan_changes
from fmcluster.verbs.session import Session

_MARKS = {"create": "[green]+ create [/]", "update": "[yellow]~ update [/]", "replace": "[red]-/+ replace[/]",
          "delete": "[red]- delete [/]", "no-op": "[dim]  no-op  [/]"}


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


def make_plan(session: Session, options: dict[str, Any] | None = None, only: AttributeFilter | None = None,
              found: list[Discovered] | None = None) -> Plan:
    """The spec's resources, what AWS holds, and the change for each (nothing is written). ``found``: what
    ``discover`` already returned in this command (status), so that it is not listed again."""
    resources = session.resources(options)
    if not session.ctx.cluster_id:
        found = []
    elif found is None:
        found = session.backend.discover(session)
    orphans = [] if only is not None else orphans_of(session, resources, found)
    return Plan(resources, orphans, plan_changes(session, resources, only, orphans))


def as_json(spec: Spec, plan: Plan) -> dict[str, Any]:
    return {"cluster": spec.name, "backend": spec.backend, "in_sync": plan.settled,
            "changes": [c.as_json() for c in plan.changes]}


def print_plan(session: Session, plan: Plan, title: str) -> None:
    console = ui.err_console()
    counts = plan.counts()
    summary = ", ".join(f"{counts[a]} to {a}" for a in ("create", "update", "replace", "delete") if counts[a])
    waiting = sum(1 for c in plan.changes if c.waiting)
    if waiting:
        summary = ", ".join(filter(None, (summary, f"{waiting} still changing in AWS")))
    console.print(f"[bold]{ui.escape(title)}[/] ({session.backend_name}, {session.region}): {summary or 'in sync'}")
    for change in plan.changes:
        if change.action == "no-op" and not change.reason:
            continue
        reason = f" [dim]({ui.escape(change.reason)})[/]" if change.reason else ""
        console.print(f"  {_MARKS[change.action]} {ui.escape(ui.resource_label(change.resource))}{reason}")
        for attribute in change.attributes:
            note = f" [dim]— {ui.escape(attribute.note)}[/]" if attribute.note else ""
            console.print(f"        {ui.escape(attribute.path)}: {ui.escape(_show(attribute.old))} → "
                          f"{ui.escape(_show(attribute.new))}{note}")
    if counts["no-op"]:
        console.print(f"  [dim]{counts['no-op']} unchanged[/]")


def _show(value: Any) -> str:
    if isinstance(value, Unknown):
        return repr(value)
    return json.dumps(value, default=str) if not isinstance(value, str) else value


# `diff --detailed-exitcode` after Terraform's `plan -detailed-exitcode` (0 no changes, 1 error, 2 changes): here 2 is
# already bad input, as on every fmcluster command, so changes pending are 3.
CHANGES_PENDING_EXIT = 3


def diff(spec: Spec, spec_file: str, json_output: bool, detailed_exitcode: bool = False) -> int:
    session = Session.open(spec, spec_file)
    with reads.reading(session.ctx):  # one read per resource: the plan's reads are served from discovery's lists
        found_id = session.ctx.cluster_id or session.backend.find_cluster_id(session)
        if found_id:
            session.set_cluster_id(found_id)
        plan = make_plan(session)
    if json_output:
        print(dump_json(as_json(spec, plan)))
    else:
        print_plan(session, plan, f"Diff for {spec.name}")
    return CHANGES_PENDING_EXIT if detailed_exitcode and not plan.settled else 0
