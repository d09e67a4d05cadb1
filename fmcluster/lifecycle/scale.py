"""``fmcluster scale``: new node counts per queue, checked and shown before they are applied."""

from __future__ import annotations

from pathlib import Path

from fmcluster import aws
from fmcluster.errors import UsageError
from fmcluster.lifecycle.session import Session, confirm, load_record, run_engine, spec_of, spec_text
from fmcluster.spec.decisions import pcs_size
from fmcluster.spec.models import NodeRange, Spec, max_nodes, min_nodes
from fmcluster.state import StateStore


def parse_counts(assignments: list[str]) -> dict[str, int | NodeRange]:
    counts: dict[str, int | NodeRange] = {}
    for item in assignments:
        queue, _, value = item.partition("=")
        try:
            if ":" in value:
                low, high = value.split(":", 1)
                # unvalidated here: the whole new spec is checked below, with messages that name the field
                counts[queue] = NodeRange.model_construct(min=int(low), max=int(high))
            else:
                counts[queue] = int(value)
        except Exception:
            raise UsageError(f"'{item}': write QUEUE=N (static) or QUEUE=MIN:MAX (scales with jobs)") from None
        if not queue:
            raise UsageError(f"'{item}': the queue name is missing (QUEUE=N)")
    return counts


def scale(target: str, assignments: list[str], yes: bool, force_unlock: bool = False) -> int:
    from fmcluster import ui
    from fmcluster.spec import rules

    store = StateStore()
    path = Path(target)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        from fmcluster.spec import load_spec

        new_spec = load_spec(path).spec
        record = load_record(store, new_spec.name, aws.region_for(new_spec.region))
        old_spec = spec_of(record)
        if assignments:
            raise UsageError("give either a spec file or QUEUE=N assignments, not both")
    else:
        record = load_record(store, target, aws.target().region)
        old_spec = spec_of(record)
        counts = parse_counts(assignments)
        if not counts:
            raise UsageError("say what to change: fmcluster scale NAME QUEUE=N [QUEUE=MIN:MAX …]")
        known = {q.name for q in old_spec.queues}
        for queue in counts:
            if queue not in known:
                raise UsageError(f"cluster {target} has no queue '{queue}'; its queues: {', '.join(sorted(known))}")
        queues = [q.model_copy(update={"nodes": counts[q.name]}) if q.name in counts else q for q in old_spec.queues]
        new_spec = old_spec.model_copy(update={"queues": queues})
    if new_spec.backend == "pcs":
        # A PCS cluster's size is fixed when it is created: hold the new counts to that size, not to the
        # size the new counts would pick.
        new_spec = new_spec.model_copy(update={"pcs": new_spec.pcs.model_copy(update={"size": pcs_size(old_spec)})})
    changed = [(old, new) for old, new in zip(old_spec.queues, new_spec.queues, strict=False)
               if (min_nodes(old), max_nodes(old)) != (min_nodes(new), max_nodes(new))]
    problems = [f"{new.name}: {problem}" for _, new in changed
                for problem in rules.queue_problems_for_counts(new_spec, new, min_nodes(new), max_nodes(new))]
    if problems:
        raise UsageError("cannot scale:\n" + "\n".join(problems))
    new_spec = _checked(new_spec)
    changes = [(new.name, f"{min_nodes(old)}..{max_nodes(old)}", f"{min_nodes(new)}..{max_nodes(new)}")
               for old, new in changed]
    if not changes:
        ui.note("node counts already match; nothing to do")
        return 0
    console = ui.err_console()
    for name, before, after in changes:
        console.print(f"  [yellow]~[/] queue [bold]{name}[/]: nodes {before} → {after}")
    session = Session.open(new_spec, record.spec_path or "spec.yaml", store)
    backend = session.backend
    with store.locked(new_spec.name, session.region, f"fmcluster scale {target}", force=force_unlock,
                      warn=ui.warning):
        if hasattr(backend, "scale"):
            backend.scale(session, old_spec, new_spec, yes)
        else:
            confirm(f"Apply these changes to {new_spec.name}?", yes)
            run_engine(session, f"Scaling {new_spec.name}", "apply", session.resources())
        store.save_cluster(new_spec.name, session.region, new_spec.backend, spec_text(new_spec), record.spec_path,
                           "ACTIVE")
    ui.out_console().print(f"[green]✓[/] {new_spec.name} scaled")
    return 0


def _checked(new_spec: Spec) -> Spec:
    """The new spec through every rule a spec file goes through, before any AWS call: what AWS (or the
    backend) would refuse is refused here, and a spec that would not load again is never saved."""
    from fmcluster.errors import SpecError
    from fmcluster.spec.stored import describe, spec_from_text

    try:
        return spec_from_text(spec_text(new_spec), f"{new_spec.name} after scaling")
    except SpecError as exc:
        message = f"cannot scale {new_spec.name}: the new counts make a spec that does not validate: {describe(exc)}"
        if any(p.path.endswith(".nodes") and "greater than or equal to 1" in p.message for p in exc.problems):
            message += ("\n  → every queue keeps at least one node (ParallelCluster's MaxCount is at least 1, and "
                        "fmcluster's spec says the same for PCS); to run none until jobs arrive, make the queue "
                        "dynamic: QUEUE=0:MAX")
        raise UsageError(message) from None
