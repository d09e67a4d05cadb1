"""How ``fmcluster smoke`` prints its report: one row per check, per node and then for the whole job."""

from __future__ import annotations

from typing import Any

from fmcluster.output import ui

_MARKS = {"passed": "[green]✓[/]", "failed": "[red]✗[/]", "absent": "[red]✗[/]", "skipped": "[dim]–[/]"}


def print_smoke(report: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = ui.out_console()
    job = f"MPIJob {report['job_id']}" if report.get("scheduler") else f"Slurm job {report['job_id']}"
    console.print(f"[bold]smoke test of {escape(report['cluster'])}[/]: queue {escape(report['queue'])}, "
                  f"{report['nodes']} × {report['instance_type']}, {escape(job)} {report['job_state']}",
                  soft_wrap=True)
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("", "node", "check", "result", "detail"):
        table.add_column(column)
    rows = [(node["node"], check) for node in report["node_checks"] for check in node["checks"]]
    rows += [("all", check) for check in report["checks"]]
    for node, check in rows:
        table.add_row(_MARKS.get(check["status"], "?"), escape(node), check["name"], check["status"],
                      escape(check["detail"] or ""))
    console.print(table)
    failing = sum(1 for _, check in rows if check["status"] in ("failed", "absent"))
    if failing:
        where = (f"the job's output is in {escape(report['output_file'])} on the cluster" if report.get("output_file")
                 else "the launcher's log was read through the Kubernetes API; the job is deleted")
        console.print(f"[red]✗[/] {failing} check(s) failed; {where}", soft_wrap=True)
    else:
        console.print("[green]✓[/] every check passed")


_STATES = {"passed": "[green]✓[/]", "failed": "[red]✗[/]", "busy": "[dim]–[/]"}


def print_burn_in(report: dict[str, Any]) -> None:
    """One row per node (its state and failed checks with their figures), then the all-reduce runs' finding."""
    from rich.markup import escape
    from rich.table import Table

    console = ui.out_console()
    console.print(f"[bold]burn-in of {escape(report['cluster'])}[/]: queue {escape(report['queue'])} "
                  f"({report['instance_type']}), level {report['level']}", soft_wrap=True)
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("", "node", "state", "detail"):
        table.add_column(column)
    for node in report["nodes"]:
        bad = [f"{c['name']}: {c['detail']}" for c in node["checks"] if c["status"] not in ("passed", "skipped")]
        detail = "; ".join(bad) or node.get("detail") or ", ".join(c["name"] for c in node["checks"]) + " passed"
        table.add_row(_STATES.get(node["state"], "?"), escape(node["node"]), node["state"], escape(detail))
    console.print(table)
    finding = report["nccl"]["finding"]
    if finding:
        console.print(f"all-reduce: {escape(finding['summary'])} ({len(report['nccl']['runs'])} run(s), "
                      f"{finding['rounds']} round(s))", soft_wrap=True)
    else:
        console.print(f"all-reduce: not run ({escape(report['nccl']['note'])})", soft_wrap=True)
    for layer in report["nccl"].get("layers") or []:
        low, high = layer["lowest_gb_s"], layer["highest_gb_s"]
        figure = "did not finish" if low is None else f"{low:.1f} GB/s" if low == high else \
            f"{low:.1f}–{high:.1f} GB/s"
        console.print(f"  {layer['crossing']}: {figure} ({layer['pairs']} pair(s))", soft_wrap=True)
    failed = [n["node"] for n in report["nodes"] if n["state"] == "failed"]
    if failed:
        console.print(f"[red]✗[/] {len(failed)} node(s) failed: {escape(', '.join(failed))}", soft_wrap=True)
    else:
        console.print("[green]✓[/] every checked node passed")
