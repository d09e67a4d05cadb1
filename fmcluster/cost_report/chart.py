"""How checkpoint time falls as Lustre gets faster: a terminal bar chart and a standalone SVG of it.

Both draw the same :class:`Chart`, built from a :class:`PlanReport`. The SVG is written by hand (no
plotting dependency) and is plain, valid XML that any browser shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

from rich.text import Text

from fmcluster.cost_report.assumptions import CHECKPOINT_FRACTION_LIMIT, LUSTRE_TIERS
from fmcluster.cost_report.hardware_figures import lustre_gb_s
from fmcluster.cost_report.report_model import PlanReport


@dataclass(frozen=True)
class Bar:
    group: str
    label: str
    value: float
    text: str  # the value as shown next to the bar
    current: bool


@dataclass(frozen=True)
class Chart:
    title: str
    subtitle: str
    unit: str
    bars: list[Bar]
    threshold: float | None = None  # a reference line (checkpoint share limit), in the chart's unit
    threshold_label: str = ""


def chart_for(report: PlanReport) -> Chart | None:
    """Checkpoint seconds per tier when there is a workload; Lustre throughput per tier otherwise."""
    lustre = report.storage.lustre
    if lustre is None:
        return None
    work = report.workload
    if report.checkpoint_curve and work is not None:
        bars = [
            Bar(
                group=f"{p.capacity_gib:,} GiB"
                + (" (spec)" if p.capacity_gib == lustre.capacity_gib else " (2x)"),
                label=f"{p.throughput_per_tib_mb_s} MB/s/TiB",
                value=p.seconds,
                text=f"{p.seconds:,.0f} s  {p.fraction * 100:.1f}%",
                current=p.current,
            )
            for p in report.checkpoint_curve
        ]
        minutes = work.checkpoint_interval_seconds / 60
        return Chart(
            title=f"Checkpoint time of {work.checkpoint_bytes / 1e9:,.0f} GB vs FSx for Lustre throughput",
            subtitle=f"{report.cluster}: seconds per checkpoint and share of the {minutes:g}-min interval",
            unit="s",
            bars=bars,
            threshold=CHECKPOINT_FRACTION_LIMIT * work.checkpoint_interval_seconds,
            threshold_label=f"{CHECKPOINT_FRACTION_LIMIT:.0%} of the interval",
        )
    bars = []
    for capacity in (lustre.capacity_gib, lustre.capacity_gib * 2):
        suffix = " (spec)" if capacity == lustre.capacity_gib else " (2x)"
        for tier in LUSTRE_TIERS:
            gb_s = lustre_gb_s(capacity, tier)
            bars.append(
                Bar(
                    group=f"{capacity:,} GiB{suffix}",
                    label=f"{tier} MB/s/TiB",
                    value=gb_s,
                    text=f"{gb_s:,.2f} GB/s",
                    current=capacity == lustre.capacity_gib and tier == lustre.throughput_per_tib_mb_s,
                )
            )
    return Chart(
        title="FSx for Lustre throughput by tier",
        unit="GB/s",
        bars=bars,
        subtitle=f"{report.cluster}: add a workload section to chart checkpoint time",
    )


# --- terminal -----------------------------------------------------------------------------------------

BAR_WIDTH = 44  # label (16) + bar (44) + value (~22) + marker stays inside 100 columns


def render_terminal(chart: Chart) -> Text:
    peak = max((b.value for b in chart.bars), default=0) or 1
    text = Text()
    text.append(chart.title + "\n", style="bold")
    group = None
    for bar in chart.bars:
        if bar.group != group:
            group = bar.group
            text.append(f"{group}\n", style="dim")
        filled = max(1, round(bar.value / peak * BAR_WIDTH)) if bar.value > 0 else 0
        text.append(f"  {bar.label:>14} ")
        text.append("█" * filled, style="bold cyan" if bar.current else "cyan")
        text.append(" " * (BAR_WIDTH - filled) + f" {bar.text}")
        text.append("  ◀ spec" if bar.current else "", style="bold")
        text.append("\n")
    if chart.threshold is not None:
        text.append(
            f"  target: under {chart.threshold:,.0f} {chart.unit} ({chart.threshold_label})\n", style="dim"
        )
    return text


# --- SVG ----------------------------------------------------------------------------------------------


def render_svg(chart: Chart) -> str:
    """A standalone SVG document (UTF-8 text) of ``chart``."""
    left, right, top, row, gap = 170, 200, 70, 26, 22
    plot = 420
    groups: list[str] = list(dict.fromkeys(b.group for b in chart.bars))
    height = top + len(chart.bars) * row + len(groups) * gap + 60
    width = left + plot + right
    peak = max([b.value for b in chart.bars] + [chart.threshold or 0]) or 1

    def x(value: float) -> float:
        return left + value / peak * plot

    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="13">',
        f"<title>{escape(chart.title)}</title>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="20" y="28" font-size="17" font-weight="bold" fill="#111">{escape(chart.title)}</text>',
        f'<text x="20" y="50" fill="#555">{escape(chart.subtitle)}</text>',
    ]
    y = top
    for group in groups:
        out.append(f'<text x="20" y="{y + 14}" font-weight="bold" fill="#333">{escape(group)}</text>')
        y += gap
        for bar in (b for b in chart.bars if b.group == group):
            fill = "#d95f02" if bar.current else "#1b9e77"
            w = max(1.0, x(bar.value) - left) if bar.value > 0 else 0
            out.append(
                f'<text x="{left - 8}" y="{y + 15}" text-anchor="end" fill="#222">{escape(bar.label)}</text>'
            )
            out.append(f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 8}" fill="{fill}"/>')
            label = bar.text + ("  (spec)" if bar.current else "")
            out.append(f'<text x="{left + w + 6:.1f}" y="{y + 15}" fill="#222">{escape(label)}</text>')
            y += row
    if chart.threshold is not None:
        tx = x(chart.threshold)
        out.append(
            f'<line x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{y}" stroke="#7570b3" '
            'stroke-width="1.5" stroke-dasharray="5,4"/>'
        )
        out.append(
            f'<text x="{tx:.1f}" y="{y + 18}" text-anchor="middle" fill="#7570b3">'
            f"{escape(f'{chart.threshold:,.0f} {chart.unit} = {chart.threshold_label}')}</text>"
        )
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{y}" stroke="#999"/>')
    out.append(
        f'<text x="20" y="{height - 12}" fill="#777" font-size="11">orange: the spec as written; '
        f"values in {escape(chart.unit)}</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"
