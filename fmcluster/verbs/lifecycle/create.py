"""``fmcluster create``: preflight, the plan read from AWS, then the engine walk that converges the cluster to
the spec (creates, updates, replacements, deletions), with capacity retries."""

from __future__ import annotations

import time
import uuid
from typing import Any

from fmcluster import catalog
from fmcluster.aws.placement import offering_zones
from fmcluster.backends import registry
from fmcluster.backends.protocol import Capability
from fmcluster.connection import aws
from fmcluster.engine import EngineFailed, Interrupted, TimedOut, reads
from fmcluster.errors import FmclusterError
from fmcluster.output import ui
from fmcluster.output.ui import confirm
from fmcluster.plan.changes import Plan, as_json
from fmcluster.preflight import preflight_failed, run_preflight
from fmcluster.pricing.model import live_cost, spec_cost
from fmcluster.spec import load_spec
from fmcluster.spec.models import Spec, max_nodes, min_nodes
from fmcluster.spec.stored import record_cluster
from fmcluster.spec.trace import locate
from fmcluster.state.claims import claim, release_quietly
from fmcluster.verbs import guard_plan
from fmcluster.verbs.lifecycle import data_loss, future_blocks, guard
from fmcluster.verbs.lifecycle.common import PreflightFailed, dump_json, run_engine, spec_text, what_exists
from fmcluster.verbs.lifecycle.diff import make_plan, print_plan
from fmcluster.verbs.session import Session


def preflight_results(spec: Spec) -> list:
    """Every preflight check's result (``fmcluster preflight`` prints them, as a table or as JSON)."""
    region = aws.region_for(spec.region)
    aws.check_ca_bundle()  # a usage error (exit 2), not a failed credentials row
    return run_preflight(spec, region, lambda service: aws.client(service, region), registry.get(spec.backend).checks)


def preflight(spec: Spec, to_stdout: bool = False) -> bool:
    """Run the preflight checks and print them (to stderr while creating); True when nothing failed."""
    results = preflight_results(spec)
    ui.print_check_results(results, console=ui.out_console() if to_stdout else ui.err_console())
    return not preflight_failed(results)


def create(spec: Spec, spec_file: str, yes: bool, wait: bool, timeout_min: float | None,
           rollback: bool = True, skip_preflight: bool = False, retry_capacity_min: float = 0,
           json_output: bool = False, force_unlock: bool = False, wait_for_blocks: bool = False,
           allow_data_loss: bool = False, backup: bool = True) -> int:
    """Create the cluster, or converge an existing one to the spec. The nodes of a Capacity Block that has not
    begun come at its start: that is said, and ``wait_for_blocks`` waits for it. A plan that deletes or replaces
    stored data needs ``allow_data_loss`` (and backs it up first unless not ``backup``): :mod:`.data_loss`."""
    session = Session.open(spec, spec_file)
    options: dict[str, Any] = {"rollback": rollback, "locate": _locator(spec_file)}
    session.backend.check_requirements()
    store = session.store
    with store.locked(spec.name, session.region, f"fmcluster create {spec_file}", force=force_unlock,
                      warn=ui.warning):
        existing = store.cluster(spec.name, session.region)
        claimed_now = False
        try:
            # The plan reads each resource once (its reads served from discovery's lists); the pass ends before
            # anything is written, so the walk reads AWS afresh.
            with reads.reading(session.ctx):
                # The recorded id; else the one AWS holds (a lost record, a teammate's cluster); else a new cluster.
                found = existing.cluster_id if existing and existing.cluster_id else \
                    session.backend.find_cluster_id(session.context)
                is_new = existing is None and found is None
                cluster_id = found or uuid.uuid4().hex
                session.set_cluster_id(cluster_id)
                _guard(session, spec, existing, yes)
                # First of all: the name is this state directory's in the account and Region, or the command stops
                # here, naming the holder (a teammate's create from another machine passes the local lock). Before
                # preflight and the plan, so that a second creator is told at once and spends nothing.
                claim(spec.name, session.region, cluster_id, spec.backend)
                claimed_now = is_new
                if is_new and not skip_preflight and not preflight(session.require_spec()):
                    raise PreflightFailed("preflight failed (see the fixes above); nothing was created. "
                                          "`--skip-preflight` goes ahead anyway")
                plan = make_plan(session, options)
            print_plan(session, plan, f"Plan for {spec.name}")
            _print_capacity(spec)
            if plan.in_sync and existing is not None and existing.status == "ACTIVE":
                future_blocks.announce(session, wait_for_blocks, timeout_min)
                return _done(session, plan, json_output, "already matches the spec; nothing to do")
            # Before any question or AWS write: refused here, nothing changes (and --yes does not reach it).
            losses = data_loss.guard(session, plan, allow_data_loss, backup)
            questions = session.backend.questions(session.context, plan.changes)
            for question in questions:
                ui.warning(question.warning)
            waypoints = [] if is_new else session.backend.waypoints(session.context, plan.changes)
            if waypoints:
                ui.note("AWS takes this change in steps: " + "; then ".join(
                    label for label, _ in waypoints) + f"; then the spec ({_spec_label(spec)})")
            confirm(_question(spec, session, plan, is_new, [label for label, _ in waypoints]), yes)
            for question in questions:
                confirm(question.question, yes)
                options.update(question.options)
            data_loss.back_up(session, losses, backup)  # every backup usable before the walk deletes anything
        except FmclusterError:
            if existing is None:  # nothing was made: leave no trace of a cluster that does not exist
                store.forget_cluster(spec.name, session.region)
            if claimed_now:  # nor a claim on its name
                release_quietly(spec.name, session.region, cluster_id, ui.warning)
            raise
        record_cluster(store, spec.name, session.region, spec.backend, spec_text(spec), spec_file,
                       "CREATING" if is_new else "UPDATING", cluster_id, aws.target_label())
        if options.get("stop_fleet"):  # the agreed fleet stop changes how the cluster resource updates
            plan = Plan(session.resources(options), plan.orphans, plan.changes)
        try:
            _walk_waypoints(session, waypoints, options, timeout_min)
            _apply_with_capacity_retries(session, plan, wait, timeout_min, retry_capacity_min)
            guard_plan.keep(session)  # the guard's moment, as its schedules now hold it
        except (Interrupted, TimedOut):
            ui.note(f"resume with: {session.hint(f'fmcluster create {spec_file} --yes')}")
            raise
        except FmclusterError:
            store.set_cluster_status(spec.name, session.region, "FAILED")
            _report_what_exists(session)
            raise
        if not wait:
            future_blocks.announce(session, False, None)
            ui.note(f"requests sent; re-run `{session.hint(f'fmcluster create {spec_file} --yes')}` to wait for "
                    "the rest")
            return 0
        store.set_cluster_status(spec.name, session.region, "ACTIVE")
        future_blocks.announce(session, wait_for_blocks, timeout_min)
        problems = session.backend.describe(session.context).get("problems") or []
        if problems:
            raise Unhealthy(f"cluster {spec.name} was made, but AWS reports problems with it:\n"
                            + "\n".join(f"  {p}" for p in problems)
                            + f"\n`{session.hint(f'fmcluster status {spec.name}')}` shows them; fix the cause "
                            "(for nodes that cannot register: a private subnet with a NAT gateway) and re-run create")
    return _done(session, plan, json_output, "is ready")


def _guard(session: Session, spec: Spec, existing: Any, yes: bool) -> None:
    """The budget guard's checks (exit 2 before anything is claimed), and its moment said (or its move)."""
    if spec.budget is None:
        return
    spent = 0.0
    if existing is not None and spec.budget.max_usd is not None:  # the cap counts what the cluster has cost
        spent = float(live_cost(session.backend.describe(session.context), spec).get("usd_so_far") or 0.0)
    guard.check_at_create(session, spec, existing, yes, spent)
    deadline = guard.say_move(session)  # the moment the schedules get: decided once, kept until a limit moves it
    if deadline is not None:
        for warning in guard.after_blocks(session, spec, deadline):
            ui.warning(warning)
    tag = guard.cost_tag_warning(session)
    if tag:
        ui.warning(tag)


class Unhealthy(FmclusterError):
    """Every resource is made and AWS calls each one ready, yet reports that part of it does not work."""

    exit_code = 1


def _done(session: Session, plan: Plan, json_output: bool, what: str) -> int:
    if json_output:
        print(dump_json({**as_json(session.require_spec(), plan), "status": "ACTIVE"}))
    else:
        ui.out_console().print(f"[green]✓[/] cluster [bold]{ui.escape(session.name)}[/] {what}. "
                               + ui.escape(ready_hint(session)))
    return 0


def ready_hint(session: Session) -> str:
    """What to run next once the cluster is ready: status, and on a Kubernetes cluster the kubeconfig that reaches
    its API and the smoke test through its scheduler."""
    status = f"`{session.hint(f'fmcluster status {session.name}')}` shows it"
    if Capability.KUBERNETES_API not in registry.get(session.backend_name).capabilities:
        return status + "."
    return (f"{status}; `{session.hint(f'fmcluster kubeconfig {session.name} -o ~/.kube/config')}` lets kubectl "
            f"reach its Kubernetes API, and `{session.hint(f'fmcluster smoke {session.name}')}` tests it through "
            "its scheduler.")


def _question(spec: Spec, session: Session, plan: Plan, is_new: bool, steps: list[str] | None = None) -> str:
    counts = plan.counts()
    if is_new:
        return f"Create cluster {spec.name} ({spec.backend}, {session.region})?"
    risky = [f"{counts[a]} to {a}" for a in ("replace", "delete") if counts[a]]
    walk = f", in {len(steps) + 1} steps: {' → '.join([*steps, _spec_label(spec)])}" if steps else ""
    return f"Apply these changes to {spec.name}" + (f" ({', '.join(risky)})" if risky else "") + walk + "?"


def _spec_label(spec: Spec) -> str:
    version = getattr(getattr(spec, "kubernetes", None), "version", None)
    return f"Kubernetes {version}" if version else "the spec"


def _walk_waypoints(session: Session, waypoints: list, options: dict[str, Any], timeout_min: float | None) -> None:
    """Converge to each intermediate spec in turn (waiting for each: the next step needs it done), then leave
    the session on the spec itself."""
    final = session.spec
    try:
        for number, (label, step) in enumerate(waypoints, 1):
            session.spec = step
            run_engine(session, f"Step {number} of {len(waypoints) + 1}: {session.name} to {label}", "apply",
                       session.resources(options), wait=True, timeout=timeout_min * 60 if timeout_min else None)
    finally:
        session.spec = final


def _report_what_exists(session: Session) -> None:
    exists = what_exists(session)
    console = ui.err_console()
    if exists:
        console.print(f"[bold]What exists now for {ui.escape(session.name)}:[/]")
        for line in exists:
            console.print(f"  {ui.escape(line)}")
    else:
        console.print(f"nothing exists in AWS for {ui.escape(session.name)}")
    ui.note(f"`{session.hint(f'fmcluster status {session.name}')}` shows it; fix and re-run "
            f"`{session.hint(f'fmcluster create {session.spec_file}')}`, or clean up with "
            f"`{session.hint(f'fmcluster destroy {session.name}')}`")


def _print_capacity(spec: Spec) -> None:
    console = ui.err_console()
    for queue in spec.queues:
        console.print(f"  queue [bold]{ui.escape(queue.name)}[/]: {queue.instance_type} × "
                      f"{min_nodes(queue)}..{max_nodes(queue)} ({queue.capacity.type})")
    priced = spec_cost(spec)
    cost = priced.usd_per_hour
    if cost:
        besides = f"; not counting {', '.join(priced.unknown)} (no bundled price)" if priced.unknown else ""
        console.print(f"  at the queues' maximum: [bold]${cost:,.2f}/hour[/] (as `plan` computes it; bundled "
                      f"prices as of {catalog.price_as_of()}{ui.escape(besides)})")


def _apply_with_capacity_retries(session: Session, plan: Plan, wait: bool, timeout_min: float | None,
                                 retry_capacity_min: float) -> None:
    """Apply; on InsufficientInstanceCapacity, explain it, and retry with bounded backoff while the user's
    ``--retry-capacity`` budget lasts (the engine replaces what failed)."""
    deadline = time.monotonic() + retry_capacity_min * 60
    pause = 15.0
    attempt = 1
    delete_first = plan.to_delete_first()
    while True:
        try:
            run_engine(session, f"{'Creating' if attempt == 1 else 'Retrying'} {session.name} on "
                       f"{session.backend_name} in {session.region}" + (f" (attempt {attempt})" if attempt > 1 else ""),
                       "apply", plan.resources, delete_first=delete_first, wait=wait,
                       timeout=timeout_min * 60 if timeout_min else None)
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
            delete_first = []


def _countdown(seconds: float, message: str) -> None:
    with ui.err_console().status("") as status:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            status.update(f"{message} in {left:.0f}s")
            time.sleep(min(1.0, left))


def capacity_advice(session: Session) -> str:
    """Which AZs offer each queue's type, and the ways to get capacity."""
    placement = session.placement()
    lines = []
    ec2 = session.ctx.client("ec2")
    for queue in session.require_spec().queues:
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


def _locator(spec_file: str):
    """Messages from the backend → the spec line they are about (None when the file is gone)."""
    try:
        loaded = load_spec(spec_file)
    except FmclusterError:
        return None
    return lambda message: locate(loaded, message)
