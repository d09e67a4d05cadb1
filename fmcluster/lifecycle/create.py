"""``fmcluster create``: preflight, the plan, then the engine, with capacity retries."""

from __future__ import annotations

from fmcluster import aws, catalog
from fmcluster.engine import Interrupted, Resource, TimedOut
from fmcluster.errors import FmclusterError
from fmcluster.lifecycle.session import PreflightFailed, Session, confirm, run_engine, spec_text, usd_per_hour
from fmcluster.spec.models import Spec, max_nodes, min_nodes


def preflight_results(spec: Spec) -> list:
    """Every preflight check's result (``fmcluster preflight`` prints them, as a table or as JSON)."""
    from fmcluster.preflight import run_preflight

    region = aws.region_for(spec.region)
    return run_preflight(spec, region, lambda service: aws.client(service, region))


def preflight(spec: Spec, to_stdout: bool = False) -> bool:
    """Run the preflight checks and print them (to stderr while creating); True when nothing failed."""
    from fmcluster import ui
    from fmcluster.preflight import preflight_failed

    results = preflight_results(spec)
    ui.print_check_results(results, console=ui.out_console() if to_stdout else ui.err_console())
    return not preflight_failed(results)


def create(spec: Spec, spec_file: str, yes: bool, wait: bool, timeout_min: float | None,
           rollback: bool = True, skip_preflight: bool = False, retry_capacity_min: float = 0) -> int:
    from fmcluster import ui

    session = Session.open(spec, spec_file)
    if spec.backend == "parallelcluster":
        session.backend_options["rollback"] = rollback
        session.backend_options["locate"] = _locator(spec_file)
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
        try:
            confirm(f"Create cluster {spec.name} ({spec.backend}, {session.region})?", yes)
        except FmclusterError:
            if existing is None:  # nothing was made: leave no trace of a cluster that does not exist
                store.forget_cluster(spec.name, session.region)
            raise
        store.save_cluster(spec.name, session.region, spec.backend, spec_text(spec), spec_file, "CREATING")
        try:
            _apply_with_capacity_retries(session, resources, wait, timeout_min, retry_capacity_min)
        except (Interrupted, TimedOut):
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


def _locator(spec_file: str):
    """Messages from the backend → the spec line they are about (None when the file is gone)."""
    from fmcluster.spec import load_spec
    from fmcluster.spec.trace import locate

    try:
        loaded = load_spec(spec_file)
    except FmclusterError:
        return None
    return lambda message: locate(loaded, message)
