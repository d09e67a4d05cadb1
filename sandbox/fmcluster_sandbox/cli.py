"""``fmcluster sandbox``: a local AWS-compatible endpoint for tests, demos and benchmarks.

Mounted by the main CLI as ``app.add_typer(sandbox.cli.app, name="sandbox")``. Imports stay light here:
moto, boto3 and cryptography load only inside the commands.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from fmcluster.errors import FmclusterError

HELP = """\
Run a local AWS-compatible endpoint for all three backends: moto (EC2, IAM, S3, FSx, CloudFormation for
ParallelCluster, Service Quotas, STS) plus emulators of PCS and EKS (each EKS cluster with its own
Kubernetes API), over HTTPS on 127.0.0.1, with injectable latency, throttling and
InsufficientInstanceCapacity faults. No AWS account is needed. It runs no instances and no pods.

With no subcommand it runs in the foreground until Ctrl-C.

\b
Examples:
  fmcluster sandbox                      # foreground, port 8787 (or any free one)
  fmcluster sandbox start                # background; reuses a running one
  eval "$(fmcluster sandbox env)"        # point boto3 / aws / pcluster at it
  fmcluster sandbox status --json
  fmcluster sandbox stop
  fmcluster --sandbox create spec.yaml   # start-or-reuse, then run any command against it
"""

app = typer.Typer(
    name="sandbox",
    help=HELP,
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
)

_PORT_HELP = "Port on 127.0.0.1 (default: 8787 if free, else any free port)."
_FAULTS_HELP = (
    "JSON/YAML file with the initial faults, e.g. "
    '{"throttle_rate": {"ec2": 0.2}, "insufficient_capacity": ["p5.48xlarge"], '
    '"latency": {"pcs.cluster": 10}}.'
)


def _fail(error: FmclusterError) -> None:
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(error.exit_code)


@app.callback()
def main(
    ctx: typer.Context,
    port: int | None = typer.Option(None, "--port", "-p", help=_PORT_HELP),
    faults: Path | None = typer.Option(None, "--faults", help=_FAULTS_HELP),
    no_tls: bool = typer.Option(False, "--no-tls", help="Serve plain HTTP (S3 TLS-only policies fail)."),
) -> None:
    """Run the sandbox in the foreground when no subcommand is given."""
    if ctx.invoked_subcommand is not None:
        return
    from fmcluster.extras import require
    from fmcluster_sandbox import manager

    try:
        require("sandbox", "fmcluster sandbox")
        current = manager.status()
        if current and current["running"]:
            raise FmclusterError(
                f"a sandbox is already running at {current['endpoint_url']} (pid {current['pid']}); "
                "use it, or stop it with `fmcluster sandbox stop`"
            )
        if faults is not None:
            manager.check_faults_file(faults)
        if port is None:
            port = manager.DEFAULT_PORT if manager.port_free(manager.DEFAULT_PORT) else 0
        elif port and not manager.port_free(port):
            raise FmclusterError(f"port {port} on 127.0.0.1 is in use; pick another with --port")
    except FmclusterError as exc:
        _fail(exc)
    from fmcluster_sandbox.server import serve

    typer.echo('fmcluster sandbox: starting; then run  eval "$(fmcluster sandbox env)"  in another shell '
               "(Ctrl-C stops)", err=True)
    serve(port, manager.home_dir(), faults, tls=not no_tls)
    raise typer.Exit(0)


@app.command("start")
def start_cmd(
    port: int | None = typer.Option(None, "--port", "-p", help=_PORT_HELP),
    faults: Path | None = typer.Option(None, "--faults", help=_FAULTS_HELP),
    no_tls: bool = typer.Option(False, "--no-tls", help="Serve plain HTTP."),
) -> None:
    """Start the sandbox in the background (reuse it if one is already running).

    \b
    Example:
      fmcluster sandbox start && eval "$(fmcluster sandbox env)"
    """
    from fmcluster_sandbox import manager

    try:
        info = manager.start(port=port, faults_file=faults, tls=not no_tls)
    except FmclusterError as exc:
        _fail(exc)
    verb = "already running" if info.get("reused") else "started"
    typer.echo(f"fmcluster sandbox {verb}: {info['endpoint_url']} (pid {info['pid']}, "
               f"log {manager.log_path()})", err=True)
    typer.echo('  point tools at it:  eval "$(fmcluster sandbox env)"', err=True)


@app.command("stop")
def stop_cmd() -> None:
    """Stop the background sandbox (its state is in memory and is lost).

    \b
    Example:
      fmcluster sandbox stop
    """
    from fmcluster_sandbox import manager

    try:
        info = manager.stop()
    except FmclusterError as exc:
        _fail(exc)
    if info is None:
        typer.echo("fmcluster sandbox: not running", err=True)
    elif info.get("was_running"):
        typer.echo(f"fmcluster sandbox stopped (pid {info['pid']})", err=True)
    else:
        typer.echo("fmcluster sandbox: not running (removed a stale record)", err=True)


@app.command("status")
def status_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON object: endpoint_url, ca_bundle, "
                                 "pid, port, running, started_at."),
) -> None:
    """Show whether the sandbox runs and where (always exits 0).

    \b
    Example:
      fmcluster sandbox status --json
    """
    from fmcluster_sandbox import manager

    info = manager.status()
    if as_json:
        keys = ("endpoint_url", "ca_bundle", "pid", "port", "running", "started_at")
        out = {k: (info or {}).get(k) for k in keys}
        out["running"] = bool(info and info["running"])
        out["home"] = str(manager.home_dir())
        typer.echo(json.dumps(out, indent=2))
        return
    if not info:
        typer.echo("fmcluster sandbox: not running  (start it with `fmcluster sandbox start`)")
    elif info["running"]:
        typer.echo(f"fmcluster sandbox: running at {info['endpoint_url']} (pid {info['pid']}, "
                   f"since {info.get('started_at')})")
        if info.get("ca_bundle"):
            typer.echo(f"  CA bundle: {info['ca_bundle']}")
        typer.echo(f"  log:       {manager.log_path()}")
    else:
        typer.echo(f"fmcluster sandbox: not running (stale record for pid {info['pid']}; "
                   "`fmcluster sandbox start` replaces it)")


@app.command("env")
def env_cmd() -> None:
    """Print `export` lines that point boto3, the AWS CLI and pcluster at the sandbox.

    \b
    Example:
      eval "$(fmcluster sandbox env)"
    """
    from fmcluster_sandbox import manager

    info = manager.status()
    if not info or not info["running"]:
        typer.echo("error: no sandbox is running; start one with `fmcluster sandbox start`", err=True)
        raise typer.Exit(1)
    sys.stdout.write("\n".join(manager.env_lines(info)) + "\n")
