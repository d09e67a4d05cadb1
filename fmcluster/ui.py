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


def print_check_results(results: Iterable[CheckResult]) -> None:
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("")
    table.add_column("check")
    table.add_column("result")
    for result in results:
        table.add_row(_MARKS[result.status], result.name, _escape(result.summary))
        for detail in result.details:
            table.add_row("", "", f"[dim]{_escape(detail)}[/]")
    out_console().print(table)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
