"""The live view while the engine works: one line per resource with status, spinner and elapsed time.

On a terminal it is a rich Live tree on stderr; elsewhere (CI, pipes) it prints one line per event, so
logs stay readable.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fmcluster.connection import aws
from fmcluster.engine import Event
from fmcluster.output.ui import err_console, escape, resource_label

_STYLE = {"waiting": "dim", "started": "cyan", "progress": "cyan", "done": "green", "failed": "red",
          "skipped": "yellow"}
_MARK = {"done": "✓", "failed": "✗", "skipped": "–", "waiting": "·"}
# How long the live view keeps showing the last throttled retry.
_THROTTLE_SHOWN_S = 30.0


@dataclass
class _Row:
    name: str
    state: str = "waiting"
    status: str = ""
    detail: str = ""
    started: float | None = None
    ended: float | None = None


@dataclass
class ProgressView:
    title: str
    resources: list[str]
    console: Any = None
    rows: dict[str, _Row] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.console = self.console or err_console()
        self.rows = {name: _Row(name) for name in self.resources}
        self._lock = threading.Lock()
        self._live = None
        self._started = time.monotonic()
        self._throttled: tuple[str, float] | None = None
        self._unsubscribe = None

    def __enter__(self) -> ProgressView:
        self._unsubscribe = aws.on_throttled_retry(self.throttled)
        if self.console.is_terminal:
            from rich.live import Live

            self._live = Live(self._render(), console=self.console, refresh_per_second=8, transient=False,
                              get_renderable=self._render)
            self._live.__enter__()
        else:
            self.console.print(f"[bold]{escape(self.title)}[/]")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def throttled(self, operation: str, code: str, attempt: int, maximum: int | None) -> None:
        """AWS throttled a call and botocore is backing off before ``attempt``: say so, not silence."""
        of = f" of {maximum}" if maximum else ""
        text = f"throttled by AWS ({code} on {operation}), retrying (attempt {attempt}{of})"
        now = time.monotonic()
        with self._lock:
            self._throttled = (text, now)
        if self._live is None:
            self.console.print(f"{now - self._started:6.1f}s ! {text}", markup=False, highlight=False,
                               soft_wrap=True)

    def handle(self, event: Event) -> None:
        with self._lock:
            row = self.rows.setdefault(event.resource, _Row(event.resource))
            if event.kind == "started" and row.started is None:
                row.started = event.at
            if event.kind in ("done", "failed", "skipped"):
                row.ended = event.at
            row.state = event.kind
            row.status = event.status or row.status
            row.detail = event.detail
        if self._live is None:
            elapsed = f"{event.at - self._started:6.1f}s"
            text = " ".join(p for p in (event.status, event.detail.splitlines()[0] if event.detail else "") if p)
            mark = _MARK.get(event.kind, "›")
            self.console.print(f"{elapsed} {mark} {resource_label(event.resource):<34} {text}", markup=False,
                               highlight=False, soft_wrap=True)

    def _render(self) -> Any:
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.table import Table
        from rich.text import Text

        table = Table.grid(padding=(0, 1))
        table.add_column(width=2)
        table.add_column(min_width=34)
        table.add_column(min_width=14)
        table.add_column(justify="right", min_width=7)
        table.add_column(overflow="ellipsis", no_wrap=True, max_width=40)
        now = time.monotonic()
        with self._lock:
            for row in self.rows.values():
                style = _STYLE.get(row.state, "")
                if row.state in ("started", "progress"):
                    mark: Any = Spinner("dots", style="cyan")
                else:
                    mark = Text(_MARK.get(row.state, "·"), style=style)
                elapsed = ""
                if row.started is not None:
                    elapsed = f"{(row.ended or now) - row.started:.0f}s"
                table.add_row(mark, Text(resource_label(row.name), style=style),
                              Text(row.status or row.state, style=style), elapsed,
                              Text(row.detail.splitlines()[0] if row.detail else "", style="dim"))
        # A Group, not a grid around the table: a nested table is measured a column short and cut long names.
        parts: list[Any] = [Text(f"{self.title}  ({now - self._started:.0f}s)", style="bold")]
        with self._lock:
            throttled = self._throttled
        if throttled is not None and now - throttled[1] < _THROTTLE_SHOWN_S:
            parts.append(Text(f"! {throttled[0]} ({now - throttled[1]:.0f}s ago)", style="yellow"))
        parts.append(table)
        return Group(*parts)
