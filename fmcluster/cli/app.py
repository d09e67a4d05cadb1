"""The ``fmcluster`` command. Thin: parse, call the core, render. Heavy imports happen inside commands
so that ``fmcluster --help`` stays fast."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from fmcluster import __version__
from fmcluster.errors import Aborted, FmclusterError, SpecError

app = typer.Typer(
    name="fmcluster",
    help=(
        "Launch and manage foundation-model training clusters on AWS from one short YAML spec.\n\n"
        "Start offline: [bold]fmcluster plan configs/quickstart-pcs.yaml[/] shows GPUs, HBM, EFA, storage and "
        "cost; [bold]fmcluster validate SPEC[/] checks the rendered config with the backend's own rules. "
        "No AWS account? Add [bold]--sandbox[/] to any command to use a local AWS-compatible endpoint. "
        "Global options may also come after the command: [bold]fmcluster status --sandbox[/]."
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    add_completion=False,  # ours take the shell as a value: `--show-completion zsh` prints zsh's script
)


class _State:
    verbose: bool = False


state = _State()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fmcluster {__version__}")
        raise typer.Exit()


def _completion_option(action: str):
    def callback(shell: Optional[str]) -> None:
        if shell:
            from fmcluster.cli import completion

            typer.echo(completion.for_shell(action, shell))
            raise typer.Exit()

    return callback


@app.callback()
def main_options(
    profile: Optional[str] = typer.Option(None, "--profile", metavar="NAME", help="AWS profile to use.",
                                          envvar="AWS_PROFILE"),
    region: Optional[str] = typer.Option(None, "--region", metavar="REGION",
                                         help="AWS region (overrides the spec's region)."),
    endpoint_url: Optional[str] = typer.Option(
        None, "--endpoint-url", metavar="URL", help="Send every AWS call here (also AWS_ENDPOINT_URL).",
        envvar="AWS_ENDPOINT_URL"
    ),
    sandbox: bool = typer.Option(
        False, "--sandbox", help="Start (or reuse) the local sandbox and point every AWS call at it."
    ),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Also print the AWS API calls the command made."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    show_completion: Optional[str] = typer.Option(
        None, "--show-completion", metavar="SHELL", callback=_completion_option("script"), is_eager=True,
        help="Print the completion script for bash, zsh or fish (default: your $SHELL).",
    ),
    install_completion: Optional[str] = typer.Option(
        None, "--install-completion", metavar="SHELL", callback=_completion_option("install"), is_eager=True,
        help="Install completion for bash, zsh or fish (default: your $SHELL).",
    ),
) -> None:
    # Importing the registry hands each backend's spec rules to the spec layer, which sits below the backends.
    import fmcluster.backends.registry  # noqa: F401
    from fmcluster.connection import aws

    state.verbose = verbose
    info: dict = {}
    if sandbox:
        from fmcluster.cli.sandbox_link import start_or_reuse

        info = start_or_reuse()
        endpoint_url = info["endpoint_url"]
    aws.configure(profile, region, endpoint_url, sandbox=str(info["started_at"]) if sandbox else "")


ForceUnlockOption = typer.Option(
    False, "--force-unlock", help="Take the cluster's lock from a command that still holds it (it may be hung); "
    "warns loudly, since both may then change the cluster.",
)


def completion_names(incomplete: str) -> list[tuple[str, str]]:
    from fmcluster.cli.completion import cluster_names

    return cluster_names(incomplete)


def completion_queue_counts(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    from fmcluster.cli.completion import queue_counts

    return queue_counts(ctx, incomplete)


def cluster_name_given(value: Optional[str]) -> Optional[str]:
    """An empty NAME ('' from a shell variable that was never set) is a usage error here, before any AWS call: AWS
    would answer it with a validation error, or a tag scan would match clusters it should not."""
    if value is not None and not value.strip():
        raise typer.BadParameter("a cluster name cannot be empty (see `fmcluster status` for the known ones)")
    return value


SpecArgument = typer.Argument(..., metavar="SPEC", help="Path to the cluster spec (YAML).", show_default=False)
NameArgument = typer.Argument(..., metavar="NAME", help="Cluster name (see `fmcluster status`).", show_default=False,
                              autocompletion=completion_names, callback=cluster_name_given)
JsonOption = typer.Option(False, "--json", help="Print the stable JSON object (docs/checks-json.md).")


@app.command()
def schema() -> None:
    """Print the spec's JSON Schema (for editor completion and checks).

    Example: fmcluster schema > fmcluster.schema.json
    """
    import json

    from fmcluster.spec.models import Spec

    typer.echo(json.dumps(Spec.model_json_schema(), indent=2))


@app.command()
def render(
    spec: Path = SpecArgument,
    output: Optional[Path] = typer.Option(
        None, "-o", "--output", metavar="DIR", help="Write the documents into this directory instead of printing them."
    ),
) -> None:
    """Render the backend documents for review or for use with plain AWS tools and kubectl: a ParallelCluster
    cluster-config.yaml; the PCS, EC2, IAM and FSx request documents; or for EKS the EKS, EC2, IAM and FSx
    request documents and the Kubernetes manifests (the scheduler's CRDs and queues, device plugins, storage).

    Values AWS issues at create time appear as references such as ${security_group.id}.

    Example: fmcluster render configs/p5-odcr-parallelcluster.yaml -o rendered/
    """
    from fmcluster.backends.registry import render as render_spec
    from fmcluster.output import ui
    from fmcluster.render import write_documents
    from fmcluster.spec import load_spec

    loaded = load_spec(spec)
    ui.print_warnings(loaded.warnings)
    rendered = render_spec(loaded.spec, str(spec))
    for note in rendered.notes:
        ui.note(note)
    if output is None:
        for document in [*rendered.documents, *rendered.examples]:
            if len(rendered.documents) + len(rendered.examples) > 1:
                typer.echo(f"--- # {document.filename}")
            typer.echo(document.text.rstrip("\n"))
        return
    for path in write_documents(rendered, output):
        ui.note(f"wrote {path}")


@app.command()
def validate(spec: Path = SpecArgument, as_json: bool = JsonOption) -> None:
    """Render the spec, then check it with the backend's own rules.

    Offline: ParallelCluster's ClusterSchema (with the parallelcluster extra) and botocore's PCS/EC2/IAM/FSx
    request shapes. With an AWS endpoint (credentials, --endpoint-url or --sandbox): ParallelCluster's
    validators through pcluster.lib.create_cluster(dryrun=True), and DescribeInstanceTypes. Exit 1 when a check
    fails.

    Example: fmcluster --sandbox validate configs/quickstart-parallelcluster.yaml --json
    """
    from fmcluster.backends import registry
    from fmcluster.checks import checks_report
    from fmcluster.output import ui
    from fmcluster.validate import run_checks

    results = run_checks(spec, registry.get)
    if as_json:
        ui.print_json(checks_report(results, command="validate", spec=str(spec)))
    else:
        ui.print_check_results(results)
    if any(result.status == "failed" for result in results):
        raise typer.Exit(1)


@app.command()
def plan(
    spec: Path = SpecArgument,
    as_json: bool = typer.Option(False, "--json", help="Print the stable JSON report (see docs/plan-json.md)."),
    svg: Optional[Path] = typer.Option(None, "--svg", metavar="FILE",
                                       help="Also write the checkpoint-time chart as an SVG file."),
    live_prices: bool = typer.Option(
        False, "--live-prices", help="Ask the AWS Pricing API instead of the bundled prices."
    ),
) -> None:
    """Offline report before anyone pays: per queue GPUs, HBM, EFA and $/hour; Lustre throughput;
    training-state fit, checkpoint time and all-reduce time for the spec's workload; the bottleneck.

    Example: fmcluster plan configs/p5-odcr-parallelcluster.yaml
    """
    from fmcluster.cost_report.command import run_plan
    from fmcluster.output import ui

    code = run_plan(str(spec), as_json, str(svg) if svg else None, live_prices, ui.out_console(),
                    ui.err_console())
    if code:
        raise typer.Exit(code)


@app.command()
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


@app.command()
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


@app.command()
def preflight(spec: Path = SpecArgument, as_json: bool = JsonOption) -> None:
    """Check the account before creating anything: credentials, subnet and AZ, instance-type offerings,
    vCPU quotas, capacity reservations and Capacity Blocks, key pair, S3 bucket, PCS limits, ParallelCluster
    and Node.js. Each failure comes with its fix; exit 1 when any check fails. `create` runs this first.

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


@app.command()
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
    hour at the maximum). On EKS also what its Kubernetes API sees: nodes Ready, GPUs and EFA devices, each
    queue's quota; Kubernetes objects show as Kind/name (namespace), as kubectl names them.

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


@app.command()
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


@app.command()
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


capacity_app = typer.Typer(
    name="capacity", no_args_is_help=True, rich_markup_mode="rich",
    help="Find, buy, list and extend EC2 Capacity Blocks for ML: reserved GPU/Trainium capacity for fixed dates, "
         "paid up front. Examples, in order:\n\n"
         "1. [bold]fmcluster capacity find --instance-type p5.48xlarge --count 2 --days 1 --regions "
         "us-east-1,us-east-2[/] (or [bold]find SPEC[/] for the spec's capacity-block queues)\n\n"
         "2. [bold]fmcluster capacity buy OFFERING_ID --spec SPEC --queue train[/] (after a dry run and a "
         "confirmation; the fee is not refundable)\n\n"
         "3. [bold]fmcluster create SPEC[/]; [bold]fmcluster capacity list[/] shows each block's time left and who "
         "uses it; [bold]fmcluster capacity extend RESERVATION_ID --days 1[/] adds time",
)
app.add_typer(capacity_app, name="capacity")
CapacityDryRun = typer.Option(False, "--dry-run", help="Ask EC2 with DryRun and show the charge; buy nothing.")
CapacityYes = typer.Option(False, "--yes", "-y", help="Do not ask before buying (the fee is not refundable).")


@capacity_app.command("find")
def capacity_find(
    spec: Optional[Path] = typer.Argument(None, metavar="SPEC", show_default=False,
                                          help="Search for each capacity-block queue of this spec (its type and "
                                               "node count), in its Region unless --regions."),
    instance_type: Optional[str] = typer.Option(None, "--instance-type", metavar="TYPE",
                                                help="Instance type, e.g. p5.48xlarge."),
    count: Optional[int] = typer.Option(None, "--count", metavar="N", help="Instances in the block (1-64)."),
    ultraserver_type: Optional[str] = typer.Option(None, "--ultraserver-type", metavar="TYPE",
                                                   help="EC2 UltraServer type, e.g. u-p6e-gb200x72."),
    ultraservers: Optional[int] = typer.Option(None, "--ultraservers", metavar="K", help="UltraServers in the block."),
    hours: Optional[int] = typer.Option(None, "--hours", metavar="H",
                                        help="Block length: 24-336 in steps of 24, then weekly up to 4368."),
    days: Optional[int] = typer.Option(None, "--days", metavar="D",
                                       help="Block length in days: 1-14, then 21, 28, … 182 (default 1)."),
    start_after: Optional[str] = typer.Option(None, "--start-after", metavar="WHEN",
                                              help="Earliest start: 2026-12-24, 2026-12-24T11:30 (UTC unless an "
                                                   "offset), or +3d / +12h."),
    end_before: Optional[str] = typer.Option(None, "--end-before", metavar="WHEN", help="Latest end (as WHEN)."),
    regions: Optional[str] = typer.Option(None, "--regions", metavar="R1,R2",
                                          help="Regions to search at once (default: the spec's, or --region)."),
    as_json: bool = typer.Option(False, "--json", help="Print {searched, offerings, errors} as JSON."),
) -> None:
    """List the Capacity Blocks EC2 offers now, in every Availability Zone of each Region: id, Region and zone,
    start and end (UTC and local, "starts in …"), length, the upfront fee, $ per instance-hour and per GPU-hour
    (per Trainium chip-hour), and the ratio to On-Demand for the same hours. Sorted by start, then price.

    Examples: fmcluster capacity find --instance-type p5.48xlarge --count 2 --days 2 --regions us-east-1,us-east-2
    ·  fmcluster capacity find configs/p5en-capacity-block-parallelcluster.yaml --start-after +7d
    """
    from fmcluster.verbs.capacity import find

    raise typer.Exit(find.run(spec, instance_type, count, ultraserver_type, ultraservers, hours, days, start_after,
                              end_before, regions, as_json))


@capacity_app.command("buy")
def capacity_buy(
    offering_id: str = typer.Argument(..., metavar="OFFERING_ID", show_default=False,
                                      help="An offering id that `capacity find` listed (cb-…)."),
    dry_run: bool = CapacityDryRun,
    yes: bool = CapacityYes,
    spec: Optional[Path] = typer.Option(None, "--spec", metavar="SPEC",
                                        help="Write the bought reservation id into this spec (comments kept)."),
    queue: Optional[str] = typer.Option(None, "--queue", metavar="QUEUE",
                                        help="The spec's capacity-block queue that gets the id."),
    as_json: bool = typer.Option(False, "--json", help="Print the reservation (or the dry run) as JSON."),
) -> None:
    """Buy a Capacity Block: EC2 is asked first with DryRun, then you see exactly what is charged (the whole fee,
    now, not refundable) and confirm. Prints the reservation id, zone, start and end. With --spec/--queue the id is
    written into that queue's capacity.reservation_id, and a zone that differs from the spec's subnet is said
    before buying.

    Example: fmcluster capacity buy cb-0123456789abcdef0 --spec configs/p5en-capacity-block-parallelcluster.yaml
    --queue train
    """
    from fmcluster.verbs.capacity import purchase

    raise typer.Exit(purchase.buy(offering_id, dry_run, yes, spec, queue, as_json))


@capacity_app.command("extend")
def capacity_extend(
    reservation_id: str = typer.Argument(..., metavar="RESERVATION_ID", show_default=False,
                                         help="The Capacity Block's reservation id (cr-…)."),
    hours: Optional[int] = typer.Option(None, "--hours", metavar="H",
                                        help="Hours to add: 24-336 in steps of 24, then weekly."),
    days: Optional[int] = typer.Option(None, "--days", metavar="D", help="Days to add: 1-14, then 21, 28, …"),
    offering: Optional[str] = typer.Option(None, "--offering", metavar="ID",
                                           help="Which extension offering to buy (default: the cheapest)."),
    dry_run: bool = CapacityDryRun,
    yes: bool = CapacityYes,
    as_json: bool = typer.Option(False, "--json", help="Print the offerings and the purchase as JSON."),
) -> None:
    """Extend an active or scheduled Capacity Block: lists EC2's extension offerings with their price, asks EC2
    with DryRun, then buys one after a confirmation. The reservation id stays the same; its end moves.

    Example: fmcluster capacity extend cr-0123456789abcdef0 --days 1 --dry-run
    """
    from fmcluster.verbs.capacity import purchase

    raise typer.Exit(purchase.extend(reservation_id, hours, days, offering, dry_run, yes, as_json))



@capacity_app.command("list")
def capacity_list(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list, one object per block."),
) -> None:
    """The account's Capacity Blocks in the Region (--region, else the environment's): state, instance type and
    count, AZ, start and end, time left or until the start, instances in use and free, the accelerator
    interconnect's status, and the fmcluster clusters that use each block (by their tags and launch templates).

    EC2 stops a block's instances 30 minutes before its end; `fmcluster status NAME` counts down and warns.

    Example: fmcluster --sandbox capacity list --json
    """
    from fmcluster.output import ui
    from fmcluster.verbs.capacity.command import blocks_table, run_list

    rows = run_list()
    if as_json:
        ui.print_json(rows)
    else:
        ui.out_console().print(blocks_table(rows))


def _mount_more() -> None:
    from fmcluster.cli.cluster_access import register
    from fmcluster.cli.sandbox_link import mount

    register(app, NameArgument)
    mount(app)


_mount_more()


def _report_api_calls() -> None:
    if not state.verbose or "fmcluster.connection.aws" not in sys.modules:
        return
    from fmcluster.connection import aws
    from fmcluster.output import ui

    calls = sorted(aws.api_calls.items(), key=lambda item: (-item[1], item[0]))
    ui.note(f"{sum(aws.api_calls.values())} AWS API calls" + (": " + ", ".join(f"{op} {n}" for op, n in calls)
                                                              if calls else ""))


def main() -> None:
    """Entry point: every user-facing failure becomes one message and an exit code, never a traceback."""
    import atexit

    from fmcluster.cli import argv as argv_rules
    from fmcluster.cli import completion, helptext
    from fmcluster.output import plain_text

    plain_text.degrade_standard_streams()
    atexit.register(_report_api_calls)
    command = helptext.tidy(typer.main.get_command(app))
    if completion.complete_var("fmcluster") in os.environ:
        completion.init()
    try:
        args = argv_rules.hoist_global_options(sys.argv[1:], set(command.commands))  # type: ignore[attr-defined]
        code = command.main(args=args, prog_name="fmcluster", standalone_mode=False)
        if code == 130:  # Typer turns Ctrl-C outside the engine into exit 130 before we see it
            sys.stderr.write("interrupted; re-run the same command to continue\n")
        if isinstance(code, int) and code:
            sys.exit(code)
    except Aborted as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(Aborted.exit_code)
    except SpecError as exc:
        from fmcluster.output import ui

        ui.errors(str(problem) for problem in exc.problems)
        sys.exit(exc.exit_code)
    except FmclusterError as exc:
        from fmcluster.output import ui

        ui.error(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        sys.exit(130)
    except SystemExit:
        raise
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        sys.exit(130)
    except argv_rules.click_exception_types() as exc:  # usage errors: bad flag, missing argument, unknown command
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    except Exception as exc:  # AWS errors a command did not translate still get one clear line
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(exc, (BotoCoreError, ClientError)):
            from fmcluster.connection.aws import describe_error
            from fmcluster.output import ui

            error = describe_error("AWS", exc)
            ui.error(str(error))
            sys.exit(error.exit_code)
        raise
