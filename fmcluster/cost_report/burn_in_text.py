"""The plan's burn-in lines for people: per queue the level, its checks, its expected time and, on a Capacity
Block of known length, that time's share of the rental."""

from __future__ import annotations

from rich.text import Text

from fmcluster.cost_report.report_model import BurnInFigures, PlanReport


def burn_in_text(report: PlanReport) -> list[Text]:
    queues = [(q.name, q.burn_in) for q in report.queues if q.burn_in is not None]
    if not queues:
        return []
    text = Text()
    text.append("Burn-in: ", style="bold")
    text.append(f"{queues[0][1].note}\n")
    for name, figures in queues:
        text.append(f"  {name}: {_summary(figures)}\n")
        text.append(f"    runs: {'; '.join(figures.runs)}\n")
        for floor in figures.floors:
            source = "the spec" if floor.source == "spec" else "the catalog"
            text.append(f"    floor: {floor.gb_s:g} GB/s all-reduce bus bandwidth on {floor.nodes} nodes (from "
                        f"{source})\n")
    text.append(f"  times leave out {queues[0][1].leaves_out}\n", style="dim")
    return [text]


def _summary(figures: BurnInFigures) -> str:
    default = " (the default)" if figures.default else ""
    text = f"{figures.level}{default} on {figures.nodes} node{'s' if figures.nodes != 1 else ''}: "
    if figures.low_seconds is None or figures.high_seconds is None:
        text += f"time unknown: no published figure for {', '.join(figures.unknown)}"
    else:
        text += f"expected {_span(figures.low_seconds, figures.high_seconds)}"
    if figures.block_hours is None:
        return text + (f"; {figures.block_note}" if figures.block_note else "")
    block = f"{figures.block_hours / 24:g}-day" if figures.block_hours % 24 == 0 else f"{figures.block_hours} h"
    if figures.block_fraction is None:
        return text + f"; its share of the {block} Capacity Block is unknown with it"
    return text + f"; on its {block} Capacity Block: up to {figures.block_fraction:.1%} of the rental"


def _span(low: float, high: float) -> str:
    shown_low, shown_high = _duration(low), _duration(high)
    return f"about {shown_high}" if shown_low == shown_high else f"{shown_low} to {shown_high}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
