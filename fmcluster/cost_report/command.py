"""`fmcluster plan SPEC [--json] [--svg FILE] [--live-prices]`: load, compute, print.

The CLI wires this to Typer. A bad spec raises SpecError (the CLI prints it and exits 2); a failed
price lookup or an unwritable SVG prints one message and returns 1; an SVG path that is a symbolic link is
refused (2) before anything is printed or written.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
from pathlib import Path

from rich.console import Console

from fmcluster.connection import aws
from fmcluster.cost_report.chart import chart_for, render_svg
from fmcluster.cost_report.figures import plan_report
from fmcluster.cost_report.report import print_report
from fmcluster.pricing.capacity_blocks import fetch_capacity_block_prices
from fmcluster.pricing.deadline import guard_deadline, refuse_unkeepable
from fmcluster.pricing.rates import LivePriceBook, PriceBook, PriceError, fetch_on_demand
from fmcluster.spec import decisions
from fmcluster.spec.instance_facts import load_with_instance_facts


def run_plan(
    spec_path: str,
    as_json: bool,
    svg: str | None,
    live_prices: bool,
    console_out: Console,
    console_err: Console,
) -> int:
    """Print the plan report for ``spec_path``; return the exit code."""
    loaded = load_with_instance_facts(spec_path, console_err)
    for warning in loaded.warnings:
        console_err.print(f"warning: {warning}", markup=False, highlight=False)
    spec = loaded.spec
    if svg is not None and Path(svg).is_symlink():
        console_err.print(_svg_is_a_link(svg), markup=False, highlight=False)
        return 2

    prices: PriceBook = PriceBook(spec.region)
    if live_prices:
        types = [q.instance_type for q in spec.queues] + [t for t in [decisions.head_node_type(spec)] if t]
        try:
            on_demand = fetch_on_demand(types, spec.region)
            blocks = fetch_capacity_block_prices(spec, aws.region_for(spec.region))
            prices = LivePriceBook(spec.region, on_demand, blocks)
        except PriceError as exc:
            console_err.print(f"error: {exc}", markup=False, highlight=False)
            return exc.exit_code

    now = dt.datetime.now(dt.timezone.utc)
    report = plan_report(spec, prices, now)
    if spec.budget is not None:  # a lease already over or a cap at zero cannot be planned: exit 2, as a bad spec
        refuse_unkeepable(spec.budget, guard_deadline(spec.budget, report.usd_per_hour, now, now), now,
                          loaded.document)
    if as_json:
        # Console.out writes the text as-is: no wrapping, markup or highlighting to corrupt the JSON.
        console_out.out(report.to_json(), highlight=False)
    else:
        print_report(report, console_out)

    if svg is not None:
        chart = chart_for(report)
        if chart is None:
            console_err.print(
                "error: --svg: nothing to chart: the spec has no storage.lustre",
                markup=False,
                highlight=False,
            )
            return 1
        try:
            _write_no_follow(svg, render_svg(chart))
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # made a link since the check above
                console_err.print(_svg_is_a_link(svg), markup=False, highlight=False)
                return 2
            console_err.print(
                f"error: --svg: cannot write {svg}: {exc.strerror or exc}", markup=False, highlight=False
            )
            return 1
        console_err.print(f"wrote {svg}", markup=False, highlight=False)
    return 0


def _svg_is_a_link(svg: str) -> str:
    return (f"error: --svg: {svg} is a symbolic link (to {os.readlink(svg) if os.path.islink(svg) else '?'}); "
            "plan does not write through links: give the real file's path")


def _write_no_follow(path: str, text: str) -> None:
    """Write ``text`` to ``path``, refusing (ELOOP) to follow a symbolic link there: a link could point the
    chart at any file the user can write."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
