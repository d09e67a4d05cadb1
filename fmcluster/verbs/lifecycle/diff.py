"""``fmcluster diff``: read AWS and the state, then say per resource what ``create`` would do; and how the verbs
build and print the one change plan (:mod:`fmcluster.plan.changes`) that ``create`` and ``scale`` show before they
ask."""

from __future__ import annotations

import json
from typing import Any

from fmcluster.aws.discovery import Discovered
from fmcluster.engine import AttributeFilter, Unknown, reads
from fmcluster.output import ui
from fmcluster.plan import changes
from fmcluster.plan.changes import Plan, as_json
from fmcluster.spec.models import Spec
from fmcluster.verbs.lifecycle.common import dump_json
from fmcluster.verbs.session import Session

_MARKS = {"create": "[green]+ create [/]", "update": "[yellow]~ update [/]", "replace": "[red]-/+ replace[/]",
          "delete": "[red]- delete [/]", "no-op": "[dim]  no-op  [/]"}


def make_plan(session: Session, options: dict[str, Any] | None = None, only: AttributeFilter | None = None,
              found: list[Discovered] | None = None) -> Plan:
    """The spec's resources, what AWS holds, and the change for each (nothing is written). ``found``: what
    ``discover`` already returned in this command (status), so that it is not listed again."""
    resources = session.resources(options)
    if not session.ctx.cluster_id:
        found = []
    elif found is None:
        found = session.backend.discover(session.context)
    return changes.make_plan(session.ctx, session.store, resources, found, only)


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
        found_id = session.ctx.cluster_id or session.backend.find_cluster_id(session.context)
        if found_id:
            session.set_cluster_id(found_id)
        plan = make_plan(session)
    if json_output:
        print(dump_json(as_json(spec, plan)))
    else:
        print_plan(session, plan, f"Diff for {spec.name}")
    return CHANGES_PENDING_EXIT if detailed_exitcode and not plan.settled else 0
