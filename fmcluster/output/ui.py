"""Rich output shared by commands: progress and notes to stderr, results to stdout."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from fmcluster.checks import CheckResult
    from fmcluster.errors import SpecProblem


# Off a terminal (a pipe, a file, a CI log) nothing is wrapped or cut: lines are as long as their content.
# COLUMNS is ignored there on purpose, since CI runners often export a narrow one.
UNLIMITED_WIDTH = 100_000


def _console(stderr: bool) -> Console:
    from rich.console import Console

    # emoji=False: names are printed as they are, so a queue named "train" next to a colon never becomes rich's
    # :train: emoji. Text built from names is escaped (escape()) or passed as Text, so markup in a name stays text.
    console = Console(stderr=stderr, highlight=False, emoji=False)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, highlight=False, emoji=False, width=UNLIMITED_WIDTH, soft_wrap=True)


@functools.cache
def err_console() -> Console:
    return _console(stderr=True)


@functools.cache
def out_console() -> Console:
    return _console(stderr=False)


def error(message: str) -> None:
    """``error: <first line>`` with the rest indented below; each line printed whole (no wrapping)."""
    lines = message.splitlines() or [""]
    console = err_console()
    console.print(f"[bold red]error:[/] {_escape(lines[0])}", soft_wrap=True)
    for line in lines[1:]:
        console.print(f"  {_escape(line)}", soft_wrap=True)


def errors(messages: Iterable[str]) -> None:
    """One ``error:`` line per message (spec problems: ``file:line:col: path: message``, grep-able)."""
    for message in messages:
        error(message)


def warning(message: str) -> None:
    err_console().print(f"[yellow]warning:[/] {_escape(message)}", soft_wrap=True)


def note(message: str) -> None:
    err_console().print(f"[dim]·[/] {_escape(message)}", soft_wrap=True)


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


KUBE_OBJECT = "kube_object"


def resource_label(resource: str) -> str:
    """A resource as people read it: a Kubernetes object as kubectl names one, ``Kind/name`` and ``(namespace)``
    when it has one, instead of its engine key (``kube_object:CustomResourceDefinition__resourceflavors_kueue_x-k8s_io__
    apiextensions_k8s_io__v1``, or the key alone); a trailing ``.attribute`` path (drift) is kept. Anything else as
    it is. JSON output keeps the key: it is the stable identifier."""
    from fmcluster.engine.object_keys import manifest_of_key

    key, _, attribute = resource.removeprefix(f"{KUBE_OBJECT}:").partition(".")
    if "__" not in key or (":" in resource and not resource.startswith(f"{KUBE_OBJECT}:")):
        return resource
    try:
        manifest = manifest_of_key(key)
    except ValueError:
        return resource
    meta = manifest["metadata"]
    label = f"{manifest['kind']}/{meta['name']}" + (f" ({meta['namespace']})" if meta.get("namespace") else "")
    return label + (f" {attribute}" if attribute else "")


def escape(text: str) -> str:
    """``text`` shown as is inside rich markup."""
    return _escape(text)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def print_json(value: Any, one_line: bool = False) -> None:
    """JSON on stdout as it is (no markup, no wrapping); ``one_line`` for JSON Lines."""
    import json

    text = json.dumps(value, default=str, separators=(",", ":")) if one_line else json.dumps(value, indent=2,
                                                                                                default=str)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def status_view(report: dict | list) -> RenderableType:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if isinstance(report, list):
        if not report:
            return Text("no clusters yet: `fmcluster create SPEC` makes one")
        table = Table(box=None, header_style="bold")
        table.add_column("name", no_wrap=True)
        for column in ("backend", "region", "status", "where", "queues", "max nodes", "$/hour", "not priced"):
            table.add_column(column, no_wrap=column in ("status", "$/hour"))
        for row in report:
            cost = f"{row['usd_per_hour']:,.2f}" if row.get("usd_per_hour") else "n/a"
            # what bills with no bundled price is named beside the figure it is left out of
            unpriced = ", ".join(row.get("usd_unpriced") or []) or "—"
            table.add_row(*map(Text, (row["name"], row["backend"], row["region"], row["status"], row.get("where", ""),
                                      ", ".join(row["queues"]) or "—", str(row["nodes_max"] or "—"), cost,
                                      unpriced)))
        return table
    raw = f" ({report['backend_status']})" if report.get("backend_status") not in (None, report["status"]) else ""
    parts: list[RenderableType] = [Text.from_markup(
        f"[bold]{_escape(report['name'])}[/] ({report['backend']}, {report['region']}): [bold]{report['status']}[/]"
        + _escape(raw), emoji=False)]
    for key in ("since", "slurm_endpoint", "kubernetes_endpoint", "kubernetes_version", "head_node", "compute_fleet",
                "version", "error"):
        if report.get(key):
            parts.append(Text(f"  {key.replace('_', ' ')}: {report[key]}"))
    owner = report.get("owner")
    if owner:
        parts.append(Text(f"  owner: {owner['owner']} (state directory {owner['state_dir']} on {owner['host']}"
                          + (", this one)" if owner.get("yours") else ", not this one)")))
    for problem in report.get("problems") or []:
        parts.append(Text(f"  problem: {problem}", style="yellow"))
    parts += _block_lines(report.get("capacity_blocks") or [])
    parts += _budget_lines(report.get("budget"))
    if "usd_so_far" in report:
        # usd_per_hour_max is null when no node of the spec has a price
        at_max = report.get("usd_per_hour_max")
        at_max_text = f"${at_max:,.2f}" if at_max is not None else "n/a"
        parts.append(Text.from_markup(emoji=False, text=
            f"  cost: ${report['usd_so_far']:,.2f} so far, ${report['usd_per_hour_now']:,.2f}/hour now, "
            f"{at_max_text}/hour at the queues' maximum [dim]({_escape(report['cost_basis'])})[/]"))
    queues = Table(box=None, header_style="bold", title="queues", title_justify="left")
    for column in ("name", "instance type", "min", "max", "running", "status"):
        queues.add_column(column)
    # A Kubernetes cluster's queues also say what its API sees: nodes Ready, devices allocatable, the queue's quota.
    inside = any("nodes_ready" in queue for queue in report["queues"])
    if inside:
        for column in ("ready", "GPUs", "EFA", "quota"):
            queues.add_column(column)
    for queue in report["queues"]:
        cells = [queue["name"], str(queue.get("instance_type")), str(queue.get("min")), str(queue.get("max")),
                 str(queue.get("running_instances", "")), str(queue.get("status"))]
        if inside:
            quota = queue.get("quota")
            cells += [str(queue.get("nodes_ready", "")), str(queue.get("gpus", "")), str(queue.get("efa", "")),
                      "none (no scheduler queue)" if queue.get("scheduler_queue") is False
                      else ", ".join(f"{k}={v}" for k, v in quota.items()) if quota else "missing"]
        queues.add_row(*map(Text, cells))
    from fmcluster.output.status_topology import topology_lines

    lines, warnings = topology_lines(report["queues"], report["name"])
    network = [Text(line) for line in lines] + [Text(f"  warning: {w}", style="yellow") for w in warnings]
    network += _burn_in_lines(report["queues"])
    scheduler = (_scheduler_table(report.get("scheduler")) + _scheduler_table(report.get("autoscaler"), "autoscaler")
                 + _scheduler_table(report.get("dra_driver"), "driver"))
    resources = Table(box=None, header_style="bold", title="resources", title_justify="left")
    for column in ("type", "id", "status"):
        resources.add_column(column)
    for item in report["resources"]:
        resources.add_row(Text(item["type"]), Text(resource_label(str(item["id"])) if item["type"] == "kube_object"
                                                   else str(item["id"])),
                          Text(str(item["status"]) + (f" — {item['error']}" if item.get("error") else "")))
    drift = report.get("drift")
    if drift is None:
        drift_view: list[RenderableType] = [Text.from_markup(emoji=False, text=
            f"[yellow]drift not checked:[/] {_escape(report.get('drift_unknown') or '')}")]
    elif drift:
        drift_view = [Text.from_markup(emoji=False, text=f"[yellow]drift from the spec[/] ({len(drift)}; "
                                       "`fmcluster create SPEC` repairs it):")]
        drift_view += [Text(f"  {resource_label(item['resource'])}: expected {item['expected']}, "
                            f"actual {item['actual']}") for item in drift]
    else:
        drift_view = [Text.from_markup("[green]in sync with the spec[/]")]
    return Group(*parts, queues, *network, *scheduler, resources, *drift_view)


def _burn_in_lines(queues: list[dict]) -> list[RenderableType]:
    """Per queue the burn-in gate has judged: its nodes per state, then each node that is not passed, with what it
    failed (``status --json``'s ``queues[].burn_in`` lists every node)."""
    from rich.text import Text

    lines: list[RenderableType] = []
    for queue in queues:
        burn_in = queue.get("burn_in")
        if not burn_in:
            continue
        counts = ", ".join(f"{burn_in[state]} {state}" for state in ("passed", "failed", "pending", "replaced")
                           if burn_in[state] or state == "passed")
        lines.append(Text(f"  burn-in {queue['name']}: {counts}"))
        for node in burn_in["nodes"]:
            if node["state"] == "passed":
                continue
            why = node.get("detail") or node.get("checks")
            lines.append(Text(f"    {node['node']} ({node['instance']}): {node['state']}" + (f": {why}" if why else ""),
                              style="yellow" if node["state"] == "failed" else ""))
    return lines


def _scheduler_table(scheduler: dict | None, what: str = "scheduler") -> list[RenderableType]:
    """An EKS cluster's scheduler (or, as ``what`` says, its Cluster Autoscaler or DRA driver): its components'
    ready/desired replicas (``status --json``'s ``scheduler``, ``autoscaler``, ``dra_driver``)."""
    from rich.table import Table
    from rich.text import Text

    if not scheduler:
        return []
    state = "ready" if scheduler["ready"] else "not ready"
    table = Table(box=None, header_style="bold", title_justify="left",
                  title=f"{what} {scheduler['name']} {scheduler['version']}: {state}")
    for column in ("kind", "namespace", "name", "available"):
        table.add_column(column)
    for component in scheduler["components"]:
        table.add_row(*map(Text, (component["kind"], str(component.get("namespace") or ""), component["name"],
                                  "missing" if component.get("missing")
                                  else f"{component['ready']}/{component['desired']}")))
    operator = scheduler.get("operator")
    if operator:
        said = {True: "Ready", False: "not Ready", None: "not reported"}[operator["ready"]]
        table.add_row(*map(Text, (operator["kind"], "", operator["name"],
                                  said + (f" ({operator['reason']})" if operator.get("reason") else ""))))
    return [table]


def _block_lines(blocks: list[dict]) -> list[Any]:
    """One line per Capacity Block the cluster uses: its countdown, use and interconnect; then its warning."""
    from rich.text import Text

    lines = []
    for block in blocks:
        rid = (block.get("reservation_ids") or [block.get("capacity_block_id")])[0]
        interconnect = block.get("interconnect_status") or "not reported"
        lines.append(Text(f"  capacity block {rid} (queue {', '.join(block.get('queues') or [])}): "
                          f"{block['state']}, {block['countdown']}; {block.get('instances_in_use')} of "
                          f"{block.get('instance_count')} instances in use; interconnect {interconnect}"))
        if block.get("warning"):
            lines.append(Text(f"  warning: {block['warning']}", style="yellow"))
    return lines


def _budget_lines(budget: dict | None) -> list[Any]:
    """The budget guard beside the Capacity Blocks: its countdown on AWS's clock, the spend it counts, its cap."""
    from rich.text import Text

    if not budget:
        return []
    cap = f" of ${budget['max_usd']:,.2f}" if budget.get("max_usd") is not None else ""
    limit = budget["decided_by"] or "no placeable limit"
    return [Text(f"  budget guard ({budget['on_limit']}): {budget['countdown']}, on {limit}; "
                 f"${budget['usd_spent']:,.2f} spent{cap}", style="yellow" if budget.get("passed") else "")]


def print_status(report: dict | list) -> None:
    out_console().print(status_view(report))


def watch(fetch: Callable[[], Any], as_json: bool, interval: float = 5.0) -> None:
    """Show ``fetch()`` every ``interval`` seconds until Ctrl-C: redrawn in place on a terminal, one JSON
    document per line with ``as_json``, else a fresh copy each time (a log keeps them all)."""
    import time

    console = out_console()
    try:
        if as_json or not console.is_terminal:
            while True:
                if as_json:
                    print_json(fetch(), one_line=True)
                else:
                    console.print(status_view(fetch()))
                time.sleep(interval)
        from rich.live import Live

        with Live(status_view(fetch()), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                live.update(status_view(fetch()), refresh=True)
    except KeyboardInterrupt:
        return


class Ticker:
    """One status line while waiting: a spinner on a terminal; elsewhere a line each time it changes."""

    def __init__(self, title: str):
        self.title = title
        self._status: Any = None
        self._last = ""

    def __enter__(self) -> Ticker:
        console = err_console()
        if console.is_terminal:
            self._status = console.status(self.title)
            self._status.__enter__()
        return self

    def update(self, text: str, elapsed: float) -> None:
        if self._status is not None:
            self._status.update(f"{self.title}: {text} ({elapsed:.0f} s)")
        elif text != self._last:
            note(f"{self.title}: {text} ({elapsed:.0f} s)")
        self._last = text

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)


def confirm(question: str, yes: bool) -> None:
    """Ask before a change; ``--yes`` answers for the user, and without a terminal nobody can, so that is bad input."""
    from fmcluster.errors import Aborted, UsageError

    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question} — no terminal to ask on; re-run with --yes to go ahead")
    import typer

    if not typer.confirm(question, default=False, err=True):
        raise Aborted("aborted; nothing changed")
