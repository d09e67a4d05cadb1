"""The four lifecycle verbs — create, scale, status, destroy — over either backend, on the one engine."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from fmcluster import aws, catalog
from fmcluster.engine import Context, Engine, Interrupted, Resource
from fmcluster.errors import FmclusterError, UsageError
from fmcluster.network import Placement
from fmcluster.spec.models import NodeRange, Spec, max_nodes, min_nodes
from fmcluster.state import ClusterRecord, StateStore


class ClusterNotFound(FmclusterError):
    exit_code = 1


class PreflightFailed(FmclusterError):
    exit_code = 1


def backend_for(name: str) -> ModuleType:
    if name == "pcs":
        from fmcluster.backends import pcs

        return pcs
    from fmcluster.backends import parallelcluster

    return parallelcluster


@dataclass
class Session:
    """Everything one lifecycle command works with."""

    spec: Spec
    spec_file: str
    region: str
    store: StateStore
    ctx: Context
    backend_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, spec: Spec, spec_file: str, store: StateStore | None = None) -> Session:
        region = aws.region_for(spec.region)
        if region != spec.region:
            spec = spec.model_copy(update={"region": region})
        ctx = Context(cluster=spec.name, region=region, client=lambda service: aws.client(service, region))
        return cls(spec, spec_file, region, store or StateStore(), ctx)

    @property
    def backend(self) -> ModuleType:
        return backend_for(self.spec.backend)

    def generation(self) -> str:
        record = self.store.cluster(self.spec.name, self.region)
        return str(int(record.created_at)) if record else "0"

    def placement(self) -> Placement:
        for record in self.store.resources(self.spec.name, self.region):
            if record.kind == "placement":
                return Placement(**record.outputs)
        from fmcluster.network import resolve_placement

        placement = resolve_placement(self.spec, self.ctx.client("ec2"))
        self.store.record_resource(self.spec.name, self.region, "placement", "network", placement.subnet_id,
                                   "resolved", placement.__dict__)
        return placement

    def resources(self) -> list[Resource]:
        extra = {}
        if self.spec.backend == "pcs" and self.spec.image is None:
            extra["ami_ids"] = self.backend.find_sample_amis(self.spec, self.ctx.client("ec2"))
        return self.backend.build_resources(self.spec, self.placement(), self.generation(), self.spec_file,
                                            **extra, **self.backend_options)


def load_record(store: StateStore, name: str, region: str | None) -> ClusterRecord:
    record = store.cluster(name, region)
    if record is None:
        known = [f"{c.name} ({c.region})" for c in store.clusters()]
        listing = ", ".join(known) if known else "none yet — create one with `fmcluster create SPEC`"
        raise ClusterNotFound(f"no cluster named '{name}' is known here. Known clusters: {listing}")
    return record


def spec_of(record: ClusterRecord) -> Spec:
    return Spec.model_validate(yaml.safe_load(record.spec))


def spec_text(spec: Spec) -> str:
    return yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True), sort_keys=False)


def usd_per_hour(spec: Spec) -> float | None:
    total = 0.0
    for queue in spec.queues:
        facts = catalog.instance(queue.instance_type)
        if facts is None or facts.usd_per_hour is None:
            continue
        total += facts.usd_per_hour * max_nodes(queue)
    return total or None


def confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question} — no terminal to ask on; re-run with --yes to go ahead")
    import typer

    if not typer.confirm(question, default=False, err=True):
        raise UsageError("nothing changed")


def run_engine(session: Session, title: str, action: str, resources: list[Resource], **kwargs: Any) -> None:
    from fmcluster.progress import ProgressView

    with ProgressView(title, [r.name for r in resources]) as view:
        engine = Engine(session.ctx, session.store, emit=view.handle)
        getattr(engine, action)(resources, **kwargs)


# create --------------------------------------------------------------------------------------------
def preflight(spec: Spec, to_stdout: bool = False) -> bool:
    """Run the preflight checks and print them (to stderr while creating); True when nothing failed."""
    from fmcluster import ui
    from fmcluster.preflight import preflight_failed, run_preflight

    region = aws.region_for(spec.region)
    results = run_preflight(spec, region, lambda service: aws.client(service, region))
    ui.print_check_results(results, console=ui.out_console() if to_stdout else ui.err_console())
    return not preflight_failed(results)


def create(spec: Spec, spec_file: str, yes: bool, wait: bool, timeout_min: float | None,
           rollback: bool = True, skip_preflight: bool = False, retry_capacity_min: float = 0) -> int:
    from fmcluster import ui

    session = Session.open(spec, spec_file)
    if spec.backend == "parallelcluster":
        session.backend_options["rollback"] = rollback
    if not skip_preflight and not preflight(session.spec):
        raise PreflightFailed("preflight failed (see the fixes above); nothing was created. "
                              "`--skip-preflight` goes ahead anyway")
    backend = session.backend
    if hasattr(backend, "check_requirements"):
        backend.check_requirements()
    store = session.store
    with store.locked(spec.name, session.region, f"fmcluster create {spec_file}"):
        existing = store.cluster(spec.name, session.region)
        if existing is None:
            store.save_cluster(spec.name, session.region, spec.backend, spec_text(spec), spec_file, "PLANNED")
        resources = session.resources()
        recorded = {(r.kind, r.key) for r in store.resources(spec.name, session.region)}
        _print_plan(spec, session, resources, recorded)
        confirm(f"Create cluster {spec.name} ({spec.backend}, {session.region})?", yes)
        store.save_cluster(spec.name, session.region, spec.backend, spec_text(spec), spec_file, "CREATING")
        try:
            _apply_with_capacity_retries(session, resources, wait, timeout_min, retry_capacity_min)
        except Interrupted:
            ui.error("interrupted: everything created so far is recorded.")
            ui.note(f"resume with: fmcluster create {spec_file} --yes")
            raise
        except FmclusterError:
            store.set_cluster_status(spec.name, session.region, "FAILED")
            ui.note(f"what exists is recorded: `fmcluster status {spec.name}`; clean up with "
                    f"`fmcluster destroy {spec.name}`, or fix and re-run `fmcluster create {spec_file}`")
            raise
        if not wait:
            ui.note(f"requests sent; re-run `fmcluster create {spec_file} --yes` to wait for the rest")
            return 0
        store.set_cluster_status(spec.name, session.region, "ACTIVE")
    ui.out_console().print(f"[green]✓[/] cluster [bold]{spec.name}[/] is ready. "
                           f"`fmcluster status {spec.name}` shows it.")
    return 0


def _apply_with_capacity_retries(session: Session, resources: list[Resource], wait: bool,
                                 timeout_min: float | None, retry_capacity_min: float) -> None:
    """Apply; on InsufficientInstanceCapacity, explain it, and retry with bounded backoff while the user's
    ``--retry-capacity`` budget lasts (the engine replaces what failed)."""
    import time

    from fmcluster.engine import EngineFailed

    deadline = time.monotonic() + retry_capacity_min * 60
    pause = 15.0
    attempt = 1
    while True:
        try:
            run_engine(session, f"Creating {session.spec.name} on {session.spec.backend} in {session.region}"
                       + (f" (attempt {attempt})" if attempt > 1 else ""), "apply", resources,
                       wait=wait, timeout=timeout_min * 60 if timeout_min else None)
            return
        except EngineFailed as exc:
            if "InsufficientInstanceCapacity" not in str(exc):
                raise
            advice = capacity_advice(session)
            if time.monotonic() + pause > deadline:
                raise EngineFailed(f"{exc}\n{advice}") from None
            _countdown(pause, f"no capacity yet ({advice.splitlines()[0]}); retrying")
            pause = min(pause * 2, 300.0)
            attempt += 1


def _countdown(seconds: float, message: str) -> None:
    import time

    from fmcluster import ui

    with ui.err_console().status("") as status:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            status.update(f"{message} in {left:.0f}s")
            time.sleep(min(1.0, left))


def capacity_advice(session: Session) -> str:
    """Which AZs offer each queue's type, and the ways to get capacity."""
    from fmcluster.network import offering_zones

    placement = session.placement()
    lines = []
    ec2 = session.ctx.client("ec2")
    for queue in session.spec.queues:
        try:
            zones = sorted(offering_zones(ec2, queue.instance_type))
        except Exception:  # advice only; the capacity error itself is what matters
            zones = []
        others = [z for z in zones if z != placement.availability_zone]
        lines.append(f"{queue.instance_type} has no free capacity in {placement.availability_zone} now"
                     + (f"; also offered in {', '.join(others)}" if others else ""))
    lines.append("options: `--retry-capacity MIN` keeps trying; a subnet in another AZ (network.subnet_id); "
                 "or reserve nodes with an EC2 Capacity Block (capacity: {type: capacity-block, reservation_id: "
                 "cr-…}), see `aws ec2 describe-capacity-block-offerings`")
    return "\n".join(lines)


def _print_plan(spec: Spec, session: Session, resources: list[Resource], recorded: set[tuple[str, str]]) -> None:
    from rich.table import Table

    from fmcluster import ui

    table = Table(title=f"Plan for {spec.name} ({spec.backend}, {session.region})", title_justify="left",
                  box=None, header_style="bold")
    table.add_column("action")
    table.add_column("resource")
    table.add_column("after")
    for resource in resources:
        action = "resume" if (resource.kind, resource.key) in recorded else "create"
        table.add_row(f"[green]+ {action}[/]", resource.name, ", ".join(resource.depends_on) or "—")
    console = ui.err_console()
    console.print(table)
    for queue in spec.queues:
        console.print(f"  queue [bold]{queue.name}[/]: {queue.instance_type} × {min_nodes(queue)}..{max_nodes(queue)}"
                      f" ({queue.capacity.type})")
    cost = usd_per_hour(spec)
    if cost:
        console.print(f"  compute at the queues' maximum: [bold]${cost:,.2f}/hour[/] "
                      f"(bundled on-demand prices as of {catalog.price_as_of()})")


# scale ---------------------------------------------------------------------------------------------
def parse_counts(assignments: list[str]) -> dict[str, int | NodeRange]:
    counts: dict[str, int | NodeRange] = {}
    for item in assignments:
        queue, _, value = item.partition("=")
        try:
            if ":" in value:
                low, high = value.split(":", 1)
                counts[queue] = NodeRange(min=int(low), max=int(high))
            else:
                counts[queue] = int(value)
        except Exception:
            raise UsageError(f"'{item}': write QUEUE=N (static) or QUEUE=MIN:MAX (scales with jobs)") from None
        if not queue:
            raise UsageError(f"'{item}': the queue name is missing (QUEUE=N)")
    return counts


def scale(target: str, assignments: list[str], yes: bool) -> int:
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
    problems = []
    for queue in new_spec.queues:
        problems += [f"{queue.name}: {p}" for p in
                     rules.queue_problems_for_counts(new_spec, queue, min_nodes(queue), max_nodes(queue))]
    if problems:
        raise UsageError("cannot scale:\n" + "\n".join(problems))
    changes = []
    for old, new in zip(old_spec.queues, new_spec.queues, strict=False):
        if (min_nodes(old), max_nodes(old)) != (min_nodes(new), max_nodes(new)):
            changes.append((new.name, f"{min_nodes(old)}..{max_nodes(old)}", f"{min_nodes(new)}..{max_nodes(new)}"))
    if not changes:
        ui.note("node counts already match; nothing to do")
        return 0
    console = ui.err_console()
    for name, before, after in changes:
        console.print(f"  [yellow]~[/] queue [bold]{name}[/]: nodes {before} → {after}")
    session = Session.open(new_spec, record.spec_path or "spec.yaml", store)
    backend = session.backend
    with store.locked(new_spec.name, session.region, f"fmcluster scale {target}"):
        if hasattr(backend, "scale"):
            backend.scale(session, old_spec, new_spec, yes)
        else:
            confirm(f"Apply these changes to {new_spec.name}?", yes)
            run_engine(session, f"Scaling {new_spec.name}", "apply", session.resources())
        store.save_cluster(new_spec.name, session.region, new_spec.backend, spec_text(new_spec), record.spec_path,
                           "ACTIVE")
    ui.out_console().print(f"[green]✓[/] {new_spec.name} scaled")
    return 0


# status --------------------------------------------------------------------------------------------
def status(name: str | None, as_json: bool, refresh: bool) -> dict[str, Any] | list[dict[str, Any]]:
    store = StateStore()
    if name is None:
        rows = []
        for record in store.clusters():
            spec = spec_of(record)
            rows.append({"name": record.name, "backend": record.backend, "region": record.region,
                         "status": record.status, "queues": [q.name for q in spec.queues],
                         "nodes_max": sum(max_nodes(q) for q in spec.queues), "usd_per_hour": usd_per_hour(spec)})
        return rows
    record = load_record(store, name, aws.target().region)
    session = Session.open(spec_of(record), record.spec_path or "spec.yaml", store)
    report = session.backend.describe(session)
    if refresh:
        for item in report["resources"]:
            store.record_resource(name, session.region, item["type"], item.get("key", ""), item["id"], item["status"])
        store.set_cluster_status(name, session.region, report["status"])
    return report


# destroy -------------------------------------------------------------------------------------------
def destroy(name: str, yes: bool, keep_storage: bool) -> int:
    from fmcluster import ui
    from fmcluster.leftovers import scan

    store = StateStore()
    record = load_record(store, name, aws.target().region)
    session = Session.open(spec_of(record), record.spec_path or "spec.yaml", store)
    resources = session.resources()
    kept = [r for r in resources if keep_storage and r.is_storage]
    doomed = [r for r in resources if r not in kept]
    console = ui.err_console()
    for resource in reversed(doomed):
        console.print(f"  [red]- delete[/] {resource.name}")
    for resource in kept:
        console.print(f"  [cyan]= keep[/]   {resource.name} (--keep-storage)")
    confirm(f"Destroy cluster {name} ({record.backend}, {record.region})?", yes)
    with store.locked(name, session.region, f"fmcluster destroy {name}"):
        store.set_cluster_status(name, session.region, "DELETING")
        run_engine(session, f"Destroying {name}", "destroy", doomed)
        left = scan(session, keep_storage=keep_storage)
        if left:
            store.set_cluster_status(name, session.region, "DELETE_INCOMPLETE")
            console.print("[red]Still tagged for this cluster after teardown:[/]")
            for item in left:
                console.print(f"  {item}")
            console.print(f"Re-run `fmcluster destroy {name}` to retry, or delete them by hand.")
            return 1
        if kept:
            store.set_cluster_status(name, session.region, "STORAGE_KEPT")
            ui.note("kept: " + ", ".join(r.name for r in kept))
        else:
            store.forget_cluster(name, session.region)
    ui.out_console().print(f"[green]✓[/] cluster [bold]{name}[/] destroyed; nothing left behind")
    return 0


def dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str)
