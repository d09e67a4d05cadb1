"""``fmcluster scale``: new node counts per queue — the same walk as ``create``, restricted to node counts,
checked against what AWS would refuse and shown (live counts → new) before anything changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fmcluster.engine import ResourceChange, reads
from fmcluster.errors import SpecError, UsageError
from fmcluster.output import ui
from fmcluster.output.ui import confirm
from fmcluster.plan.changes import Plan
from fmcluster.preflight.capacity import check_reservations
from fmcluster.preflight.common import Context
from fmcluster.spec import load_spec, load_spec_data
from fmcluster.spec.models import NodeRange, Spec
from fmcluster.spec.stored import record_cluster
from fmcluster.state.store import StateStore
from fmcluster.verbs import guard_plan
from fmcluster.verbs.lifecycle import guard
from fmcluster.verbs.lifecycle.common import dump_json, open_cluster, run_engine, spec_text
from fmcluster.verbs.lifecycle.diff import make_plan
from fmcluster.verbs.lifecycle.status import check_reachable
from fmcluster.verbs.session import Session


def parse_counts(assignments: list[str]) -> dict[str, int | NodeRange]:
    counts: dict[str, int | NodeRange] = {}
    for item in assignments:
        queue, _, value = item.partition("=")
        if not queue:
            raise UsageError(f"'{item}': the queue name is missing (QUEUE=N)")
        if queue in counts:  # the last would silently win; which one was meant is the user's to say
            first = next(a for a in assignments if a.partition("=")[0] == queue)
            raise UsageError(f"queue '{queue}' is given twice ({first} and {item}): give each queue once; "
                             "nothing changed")
        try:
            if ":" in value:
                low, high = value.split(":", 1)
                counts[queue] = NodeRange.model_construct(min=int(low), max=int(high))
            else:
                counts[queue] = int(value)
        except ValueError:
            raise UsageError(f"'{item}': write QUEUE=N (static) or QUEUE=MIN:MAX (scales with jobs)") from None
    return counts


def _new_spec(session: Session, target: str, assignments: list[str]) -> Spec:
    """The recorded spec with the new counts, checked by the same rules as a spec file (exit 2 when AWS would
    refuse it), before any AWS call."""
    old = session.spec
    if old is None:
        raise UsageError(f"the recorded spec of {session.name} cannot be read, so its counts cannot be changed "
                         f"here: `fmcluster create SPEC` with a fixed spec converges it, `fmcluster destroy "
                         f"{session.name}` removes it")
    if not assignments:
        return load_spec(target).spec
    counts = parse_counts(assignments)
    known = {q.name for q in old.queues}
    data = old.model_dump(mode="json", exclude_defaults=True)
    for queue in counts:
        if queue not in known and not session.backend.scale_own_group(data, queue, counts[queue]):
            raise UsageError(f"cluster {session.name} has no queue '{queue}'; its queues: {', '.join(sorted(known))}")
    for queue in data["queues"]:
        if queue["name"] in counts:
            value = counts[queue["name"]]
            queue["nodes"] = value if isinstance(value, int) else {"min": value.min, "max": value.max}
    try:
        new = load_spec_data(session.backend.scale_data(data),
                             f"{session.name} scaled to {' '.join(assignments)}").spec
    except SpecError as exc:
        if any(p.path.endswith(".nodes") and "greater than or equal to 1" in p.message for p in exc.problems):
            raise UsageError(f"{exc}\n  → every queue keeps at least one node (ParallelCluster's MaxCount is at "
                             "least 1, and fmcluster's spec says the same for PCS); to run none until jobs arrive, "
                             "make the queue dynamic: QUEUE=0:MAX") from None
        raise
    return session.backend.scaled(old, new)


def scale(target: str, assignments: list[str], yes: bool, json_output: bool = False,
          force_unlock: bool = False) -> int:
    store = StateStore()
    path = Path(target)
    from_file = path.suffix in (".yaml", ".yml") or path.is_file()
    if from_file and assignments:
        raise UsageError("give either a spec file or QUEUE=N assignments, not both")
    if not from_file and not assignments:
        raise UsageError("say what to change: fmcluster scale NAME QUEUE=N [QUEUE=MIN:MAX …]")
    if from_file:
        name = load_spec(path).spec.name
    else:
        parse_counts(assignments)  # a malformed or repeated QUEUE=N stops here, before the record or AWS is read
        name = target
    session = open_cluster(store, name)
    assert session.record is not None
    check_reachable(session.record)
    new_spec = _new_spec(session, target, assignments)
    if new_spec.backend != session.backend_name:
        raise UsageError(f"{name} runs on {session.backend_name}; a spec for {new_spec.backend} cannot scale it")
    _check_capacity(session, new_spec)
    session.spec = new_spec
    with store.locked(name, session.region, f"fmcluster scale {target}", force=force_unlock, warn=ui.warning):
        # One read per resource for the change shown; the pass ends before the walk, which reads AWS afresh.
        with reads.reading(session.ctx):
            plan = make_plan(session)
        guard.say_move(session)
        counts, blocking = _split(session, plan)
        if blocking:
            raise UsageError("the cluster differs from its spec beyond node counts, which `scale` does not change:\n"
                             + "\n".join(blocking) + "\n`fmcluster diff SPEC` shows it; `fmcluster create SPEC` "
                             "converges it")
        if not counts:
            ui.note("AWS already runs these node counts; nothing to do")
            if json_output:
                print(dump_json({"cluster": name, "changed": False, "changes": []}))
            return 0
        console = ui.err_console()
        for change in counts:
            for attribute in change.attributes:
                console.print(f"  [yellow]~[/] {ui.escape(ui.resource_label(change.resource))}: "
                              f"{ui.escape(f'{attribute.path} {attribute.old} → {attribute.new}')}")
        options: dict[str, Any] = {}
        questions = session.backend.questions(session.context, counts)
        for question in questions:
            ui.warning(question.warning)
        if not questions:
            confirm(f"Apply these changes to {name}?", yes)
        for question in questions:
            confirm(question.question, yes)
            options.update(question.options)
        resources = session.resources(options)
        store.set_cluster_status(name, session.region, "UPDATING")
        run_engine(session, f"Scaling {name}", "apply", resources, only=_scales(session))
        guard_plan.keep(session)
        record_cluster(store, name, session.region, new_spec.backend, spec_text(new_spec),
                       session.record.spec_path, "ACTIVE", session.record.cluster_id, session.record.endpoint_url)
    if json_output:
        print(dump_json({"cluster": name, "changed": True, "changes": [c.as_json() for c in counts]}))
    else:
        ui.out_console().print(f"[green]✓[/] {ui.escape(name)} scaled")
    return 0


def _scales(session: Session) -> Any:
    """The backend's node counts, and the budget guard's moment and stop calls, which new counts move."""
    backend = session.backend.scales
    return lambda path: backend(path) or path in guard.MOVED_BY_SCALE


def _split(session: Session, plan: Plan) -> tuple[list[Any], list[str]]:
    """The count changes, and what stands in their way: a resource missing, or one whose update would also
    carry other changes (ParallelCluster sends its whole configuration)."""
    counts: list[ResourceChange] = []
    blocking: list[str] = []
    scales = _scales(session)
    for change in plan.changes:
        if change.action in ("create", "replace"):
            blocking.append(f"  {change.resource}: {change.action}" + (f" ({change.reason})" if change.reason else ""))
            continue
        wanted = [a for a in change.attributes if scales(a.path)]
        if not wanted:
            continue
        other = [a.path for a in change.attributes if not scales(a.path)]
        if other:
            blocking.append(f"  {change.resource}: also {', '.join(other)}")
        counts.append(ResourceChange(change.resource, change.action, wanted, change.reason))
    return counts, blocking


def _check_capacity(session: Session, spec: Spec) -> None:
    """Refuse counts a queue's capacity reservation, Capacity Block or reservation group cannot hold, before any
    change."""
    if not any(q.capacity.reservation_id or q.capacity.resource_group_arn for q in spec.queues):
        return
    ctx = Context(spec=spec, region=session.region, client=session.ctx.client, placement=session.placement())
    failed = [r for r in check_reservations(ctx) if r.status == "failed"]
    if failed:
        raise UsageError("cannot scale: " + "; ".join(f"{r.name}: {r.summary}" for r in failed))
