"""The commands that read a spec and report, changing nothing in AWS: ``schema``, ``render``, ``validate``,
``plan``. Thin: parse, call the core, render; heavy imports happen inside commands."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from fmcluster.cli.options import JsonOption, SpecArgument


def schema() -> None:
    """Print the spec's JSON Schema (for editor completion and checks).

    Example: fmcluster schema > fmcluster.schema.json
    """
    import json

    from fmcluster.spec.models import Spec

    typer.echo(json.dumps(Spec.model_json_schema(), indent=2))


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
    training-state fit, checkpoint time and all-reduce time for the spec's workload; the bottleneck; each queue's
    burn-in level (queues[].burn_in), its checks and their expected time.

    Example: fmcluster plan configs/p5-odcr-parallelcluster.yaml
    """
    from fmcluster.cost_report.command import run_plan
    from fmcluster.output import ui

    code = run_plan(str(spec), as_json, str(svg) if svg else None, live_prices, ui.out_console(),
                    ui.err_console())
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add these commands to ``app``, in the order ``fmcluster --help`` lists them."""
    for command in (schema, render, validate, plan):
        app.command()(command)
