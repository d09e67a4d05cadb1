"""Rich output shared by commands: progress and notes to stderr, results to stdout."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from fmcluster.errors import SpecProblem
    from fmcluster.validate import CheckResult


@functools.cache
def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


@functools.cache
def out_console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


def error(message: str) -> None:
    lines = message.splitlines() or [""]
    console = err_console()
    console.print(f"[bold red]error:[/] {_escape(lines[0])}")
    for line in lines[1:]:
        console.print(f"  {_escape(line)}")


def warning(message: str) -> None:
    err_console().print(f"[yellow]warning:[/] {_escape(message)}")


def note(message: str) -> None:
    err_console().print(f"[dim]·[/] {_escape(message)}")


def print_warnings(problems: Iterable[SpecProblem]) -> None:
    for problem in problems:
        warning(str(problem))


_MARKS = {"passed": "[green]✓[/]", "failed": "[red]✗[/]", "skipped": "[dim]–[/]", "warning": "[yellow]![/]"}


def print_check_results(results: Iterable[CheckResult], console: Console | None = None) -> None:
    """One table: check, result and details, and the fix for each failure."""
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("")
    table.add_column("check")
    table.add_column("result")
    table.add_column("fix")
    for result in results:
        fixes = [d[len("fix: "):] for d in result.details if d.startswith("fix: ")]
        table.add_row(_MARKS[result.status], result.name, _escape(result.summary), _escape("\n".join(fixes)))
        for detail in result.details:
            if not detail.startswith("fix: "):
                table.add_row("", "", f"[dim]{_escape(detail)}[/]", "")
    (console or out_console()).print(table)


def escape(text: str) -> str:
    """``text`` shown as is inside rich markup."""
    return _escape(text)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def print_status(report: dict | list) -> None:
    from rich.table import Table

    console = out_console()
    if isinstance(report, list):
        if not report:
            console.print("no clusters yet: `fmcluster create SPEC` makes one")
            return
        table = Table(box=None, header_style="bold")
        for column in ("name", "backend", "region", "where", "status", "queues", "max nodes", "$/hour"):
            table.add_column(column)
        for row in report:
            cost = f"{row['usd_per_hour']:,.2f}" if row.get("usd_per_hour") else "n/a"
            table.add_row(row["name"], row["backend"], row["region"], row.get("where", ""), row["status"],
                          ", ".join(row["queues"]) or "—", str(row["nodes_max"] or "—"), cost)
        console.print(table)
        for row in report:
            if row.get("problem"):
                console.print(f"[dim]{_escape(row['name'])}: {_escape(row['problem'])}[/]")
        return
    raw = f" ({report['backend_status']})" if report.get("backend_status") not in (None, report["status"]) else ""
    console.print(f"[bold]{report['name']}[/] ({report['backend']}, {report['region']}): "
                  f"[bold]{report['status']}[/]{_escape(raw)}")
    for key in ("since", "slurm_endpoint", "head_node", "compute_fleet", "version", "error"):
        if report.get(key):
            console.print(f"  {key.replace('_', ' ')}: {_escape(str(report[key]))}")
    if "usd_so_far" in report:
        console.print(f"  cost: ${report['usd_so_far']:,.2f} so far, ${report['usd_per_hour_now']:,.2f}/hour now, "
                      f"${report['usd_per_hour_max']:,.2f}/hour at the queues' maximum "
                      f"[dim]({_escape(report['cost_basis'])})[/]")
    queues = Table(box=None, header_style="bold", title="queues", title_justify="left")
    for column in ("name", "instance type", "min", "max", "running", "status"):
        queues.add_column(column)
    for queue in report["queues"]:
        queues.add_row(queue["name"], str(queue.get("instance_type")), str(queue.get("min")), str(queue.get("max")),
                       str(queue.get("running_instances", "")), str(queue.get("status")))
    console.print(queues)
    resources = Table(box=None, header_style="bold", title="resources", title_justify="left")
    for column in ("type", "id", "status"):
        resources.add_column(column)
    for item in report["resources"]:
        resources.add_row(item["type"], str(item["id"]), str(item["status"]) + (f" — {item['error']}"
                                                                              if item.get("error") else ""))
    console.print(resources)
    drift = report.get("drift")
    if drift is None:
        console.print(f"[yellow]drift not checked:[/] {_escape(report.get('drift_unknown') or '')}")
    elif drift:
        console.print(f"[yellow]drift from the spec[/] ({len(drift)}; `fmcluster create SPEC` repairs it):")
        for item in drift:
            console.print(f"  {_escape(item['resource'])}: expected {_escape(str(item['expected']))}, "
                          f"actual {_escape(str(item['actual']))}")
    else:
        console.print("[green]in sync with the spec[/]")
