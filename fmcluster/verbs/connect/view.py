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
