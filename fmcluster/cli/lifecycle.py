"""The lifecycle commands: ``create``, ``diff``, ``preflight``, ``status``, ``scale``, ``destroy``. Thin: parse,
call :mod:`fmcluster.verbs.lifecycle`, render; heavy imports happen inside commands."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from fmcluster.cli.options import (
    ForceUnlockOption,
    JsonOption,
    NameArgument,
    SpecArgument,
    cluster_name_given,
    completion_names,
    completion_queue_counts,
)


def create(
    spec: Path = SpecArgument,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before creating."),
    no_wait: bool = typer.Option(False, "--no-wait", help="Send the requests that need no waiting, then return."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, metavar="MIN",
                                            help="Stop waiting after this many minutes."),
    no_rollback: bool = typer.Option(
        False, "--no-rollback", help="ParallelCluster: keep a failed stack for debugging instead of rolling back."
    ),
    skip_preflight: bool = typer.Option(False, "--skip-preflight", help="Do not run the preflight checks first."),
    retry_capacity: float = typer.Option(
        0, "--retry-capacity", min=0, metavar="MIN",
        help="On InsufficientInstanceCapacity, keep retrying (with backoff) for up to MIN minutes.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the applied plan as JSON (as `diff --json`)."),
    force_unlock: bool = ForceUnlockOption,
    wait_for_blocks: bool = typer.Option(
        False, "--wait", help="Also wait for each Capacity Block that has not begun to start (its nodes come then)."),
    allow_data_loss: bool = typer.Option(
        False, "--allow-data-loss",
        help="Allow a plan that deletes or replaces stored data (a file system, fmcluster's bucket): without it such "
        "a plan is refused, even with --yes. FSx file systems are backed up first (CreateBackup) where FSx can."),
    no_backup: bool = typer.Option(
        False, "--no-backup", help="With --allow-data-loss: do not back up the FSx file systems that go."),
) -> None:
    """Create the cluster, or converge an existing one to the spec: preflight (new clusters), the plan read
    from AWS (create / update / replace / delete per resource), a confirmation, then the walk with live
    progress.

    Re-running resumes and converges: what exists is adopted, what differs is updated (or replaced, when AWS
    cannot change it in place), queues removed from the spec are deleted — each shown and confirmed first.
    A plan that deletes or replaces stored data (an FSx shrink, a file system or bucket that left the spec) is
    refused unless --allow-data-loss, which backs FSx up first (--no-backup skips that).
    A spec with budget: gets its guard in AWS (EventBridge Scheduler schedules that stop the compute at the moment
    the plan prints; with max_usd an AWS Budgets backstop; with notify an email warning before it, through an SNS
    topic); on_limit: destroy-compute needs --yes.
    Ctrl-C stops waiting (exit 130) and everything made so far stays recorded.

    Example: fmcluster --sandbox create configs/quickstart-pcs.yaml --yes
    """
    from fmcluster.errors import UsageError
    from fmcluster.output import ui
    from fmcluster.spec import load_spec
    from fmcluster.verbs import lifecycle

    if no_backup and not allow_data_loss:  # it only changes what --allow-data-loss does
        raise UsageError("--no-backup goes with --allow-data-loss: --allow-data-loss --no-backup allows a plan that "
                         "deletes stored data without backing FSx up first")
    loaded = load_spec(spec)
    ui.print_warnings(loaded.warnings)
    raise typer.Exit(lifecycle.create(loaded.spec, str(spec), yes, not no_wait, timeout, rollback=not no_rollback,
                                      skip_preflight=skip_preflight, retry_capacity_min=retry_capacity,
                                      json_output=as_json, force_unlock=force_unlock,
                                      wait_for_blocks=wait_for_blocks, allow_data_loss=allow_data_loss,
                                      backup=not no_backup))


def diff(
    spec: Path = SpecArgument,
    as_json: bool = typer.Option(False, "--json", help="Print {cluster, backend, in_sync, changes} as JSON."),
    detailed_exitcode: bool = typer.Option(False, "--detailed-exitcode",
                                           help="Exit 3 when changes are pending, 0 only when in sync (Terraform's "
                                                "-detailed-exitcode, with 3 because 2 is bad input here)."),
) -> None:
    """Read AWS and the local state, and show what `create SPEC` would do per resource: create, update (each
    attribute old → new), replace (and why AWS cannot change it in place), delete, or no-op. Changes nothing.
    Exit 0 (with --detailed-exitcode: in sync), 1 error, 2 bad input, 3 changes pending (--detailed-exitcode).

    Example: fmcluster --sandbox diff configs/quickstart-pcs.yaml --detailed-exitcode
    """
    from fmcluster.output import ui
    from fmcluster.spec import load_spec
    from fmcluster.verbs import lifecycle

    loaded = load_spec(spec)
    ui.print_warnings(loaded.warnings)
    raise typer.Exit(lifecycle.diff(loaded.spec, str(spec), as_json, detailed_exitcode))


def preflight(spec: Path = SpecArgument, as_json: bool = JsonOption) -> None:
    """Check the account before creating anything: credentials, subnet and AZ, instance-type offerings,
    vCPU quotas, capacity reservations and Capacity Blocks (and the network spine each reservation sits under:
    a warning when a reservation group's reservations sit under different spines), key pair, S3 bucket, PCS
    limits, ParallelCluster and Node.js. Each failure comes with its fix; exit 1 when any check fails (warnings
    do not). `create` runs this first and prints the same table.

    Example: fmcluster --sandbox preflight configs/quickstart-pcs.yaml
    """
    from fmcluster.checks import checks_report
    from fmcluster.output import ui
    from fmcluster.spec import load_spec
    from fmcluster.verbs import lifecycle

    loaded = load_spec(spec)
    ui.print_warnings(loaded.warnings)
    results = lifecycle.preflight_results(loaded.spec)
    if as_json:
        ui.print_json(checks_report(results, command="preflight", spec=str(spec)))
    else:
        ui.print_check_results(results)
    if any(result.status == "failed" for result in results):
        raise typer.Exit(1)


def status(
    name: Optional[str] = typer.Argument(None, metavar="NAME", autocompletion=completion_names,
                                         callback=cluster_name_given,
                                         help="Cluster name; omit it for a table of all known clusters."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (same shape on every backend)."),
    watch: bool = typer.Option(False, "--watch", help="Refresh every 5 s until Ctrl-C: in place on a terminal; "
                                                      "with --json, one JSON document per line."),
    refresh: bool = typer.Option(False, "--refresh", help="Also write what AWS says back into the local state."),
    block_warning_hours: float = typer.Option(
        24.0, "--block-warning-hours", min=0, metavar="H",
        help="Warn when a Capacity Block the cluster uses has fewer than H hours left (default 24)."),
) -> None:
    """Show what exists: every cluster (local records and those tagged in AWS), or one cluster live from AWS:
    the state of the whole (CREATING, ACTIVE, UPDATING, DELETING, FAILED, INCOMPLETE, STORAGE_KEPT, NOT_FOUND),
    queues and node counts, every resource made for it, drift from the spec, and cost (so far, per hour now, per
    hour at the maximum). For queues of an instance type EC2 gives a network topology for (p5, p4d, trn1, ...):
    their nodes per bottom network node and spine, and a warning when a queue spans more than one spine
    (`fmcluster topology NAME` prints the whole tree). On EKS also what its Kubernetes API sees: nodes Ready,
    GPUs and EFA devices, each queue's quota, and the burn-in gate's verdict per node (passed; failed, with the
    checks and figures; pending; replaced); Kubernetes objects show as Kind/name (namespace), as kubectl names them.

    Example: fmcluster status quickstart-pcs --json   ·   fmcluster status quickstart-pcs --watch
    """
    from fmcluster.output import ui
    from fmcluster.verbs import lifecycle

    if watch:
        ui.watch(lambda: lifecycle.status(name, refresh, block_warning_hours), as_json)
    elif as_json:
        ui.print_json(lifecycle.status(name, refresh, block_warning_hours))
    else:
        report = lifecycle.status(name, refresh, block_warning_hours)
        ui.print_status(report)
        for row in report if isinstance(report, list) else [report]:
            if row.get("problem"):
                ui.warning(f"cluster {row['name']}: its recorded spec does not validate: {row['problem']}")
            if row.get("note"):
                ui.note(f"cluster {row['name']}: {row['note']}")


def scale(
    target: str = typer.Argument(..., metavar="NAME|SPEC", autocompletion=completion_names, callback=cluster_name_given,
                                 help="Cluster name, or a spec file whose node counts you edited."),
    counts: Optional[list[str]] = typer.Argument(None, metavar="QUEUE=N…", autocompletion=completion_queue_counts,
                                                 help="QUEUE=N (static) or QUEUE=MIN:MAX (scales with jobs).",
                                                 show_default=False),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before changing."),
    as_json: bool = typer.Option(False, "--json", help="Print the count changes applied as JSON."),
    force_unlock: bool = ForceUnlockOption,
) -> None:
    """Change node counts per queue: checked against what AWS would refuse (spec rules, Capacity Block and
    reservation sizes, the PCS cluster size), shown as live counts → new counts, then applied.

    Examples: fmcluster scale quickstart-pcs burst=0:4   ·   fmcluster scale configs/quickstart-pcs.yaml
    """
    from fmcluster.verbs import lifecycle

    raise typer.Exit(lifecycle.scale(target, counts or [], yes, as_json, force_unlock=force_unlock))


def destroy(
    name: str = NameArgument,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before deleting."),
    keep_storage: bool = typer.Option(False, "--keep-storage", help="Keep FSx file systems (and their data)."),
    as_json: bool = typer.Option(False, "--json", help="Print {cluster, status, kept, left} as JSON."),
    force_unlock: bool = ForceUnlockOption,
) -> None:
    """Tear the cluster down in reverse order, then scan for anything still tagged for it (exit 1 if so).
    Works from AWS's tags alone when the local record is gone; deletes only what is this cluster's.

    Example: fmcluster destroy quickstart-pcs --yes
    """
    from fmcluster.verbs import lifecycle

    raise typer.Exit(lifecycle.destroy(name, yes, keep_storage, as_json, force_unlock=force_unlock))


def register(app: typer.Typer) -> None:
    """Add these commands to ``app``, in the order ``fmcluster --help`` lists them."""
    for command in (create, diff, preflight, status, scale, destroy):
        app.command()(command)
