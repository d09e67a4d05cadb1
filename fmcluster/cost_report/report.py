"""The plan report for people: rich tables that fit a 100-column terminal."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from fmcluster.cost_report.burn_in_text import burn_in_text
from fmcluster.cost_report.chart import chart_for, render_terminal
from fmcluster.cost_report.report_model import CostFigures, PlanReport, QueueFigures

NA = "n/a"

BOTTLENECK_TEXT = {
    "hbm_capacity": "HBM capacity: the training state does not fit",
    "compute": "compute: the requested tokens/s is above the accelerators' peak",
    "checkpoint_write": "checkpoint writes to FSx for Lustre",
    "no_accelerators": "no accelerators",
    "none": "none found: memory fits and checkpoints are short",
}


def _num(value: float | None, fmt: str = ",.0f", unit: str = "") -> str:
    return NA if value is None else f"{value:{fmt}}{unit}"


def _usd(value: float | None) -> str:
    return NA if value is None else f"${value:,.2f}"


def _interconnect(queue: QueueFigures) -> str:
    link = queue.interconnect
    if link is None:
        return "-" if queue.accelerators_per_node <= 1 else NA
    direction = {True: " bidir", False: " unidir", None: ""}[link.bidirectional]
    return f"{link.name}\n{link.gb_s_per_accelerator:,.0f} GB/s{direction}"


def _efa(queue: QueueFigures) -> str:
    if queue.efa_gbps_per_node is None:
        return "off"
    return f"EFAv{queue.efa_version}\n{queue.efa_gbps_per_node:,.0f}"


def queues_table(report: PlanReport) -> Table:
    table = Table(
        title="Queues (dynamic queues at their maximum)",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        pad_edge=False,
    )
    for header, justify in (
        ("queue", "left"),
        ("instance", "left"),
        ("nodes", "right"),
        ("accel", "right"),
        ("HBM\nGB", "right"),
        ("HBM\nTB/s", "right"),
        ("link per\naccel", "left"),
        ("EFA Gbps\nper node", "right"),
        ("EFA Gbps\ntotal", "right"),
        ("$/hour", "right"),
    ):
        table.add_column(header, justify=justify, no_wrap=header in ("instance", "nodes"))
    for q in report.queues:
        nodes = f"{q.min_nodes}-{q.nodes}" if q.dynamic else str(q.nodes)
        known = q.in_catalog or q.facts_source == "ec2"
        accel = f"{q.accelerators:,}" if known else NA
        model = f"\n{q.accelerator_model.split(' (')[0]}" if q.accelerator_model else ""
        table.add_row(
            Text(q.name),  # names are shown as they are: no markup, no emoji codes
            Text(q.instance_type),
            nodes,
            accel + model,
            _num(q.hbm_total_gb) if known else NA,
            _num(q.hbm_bandwidth_tbps, ",.1f") if q.in_catalog else NA,
            _interconnect(q) if q.in_catalog else NA,
            _efa(q) if q.in_catalog else NA,
            _num(q.efa_gbps_total),
            _usd(q.usd_per_hour),
        )
    return table


def price_notes(report: PlanReport) -> Table:
    notes = Table.grid(padding=(0, 1))
    notes.add_column(style="dim", no_wrap=True)
    notes.add_column(style="dim")
    for q in report.queues:
        when = f", as of {q.price_as_of}" if q.price_as_of else ""
        per_node = f"{_usd(q.usd_per_node_hour)}/node-hour, " if q.usd_per_node_hour is not None else ""
        notes.add_row(Text(f"  {q.name}:"), Text(f"{per_node}{q.price_note}{when}"))
    return notes


def domain_notes(report: PlanReport) -> list[Text]:
    """UltraServer queues: how many accelerators share one NVLink / NeuronLink domain."""
    notes = []
    for q in report.queues:
        if q.facts_source == "ec2":
            notes.append(Text(f"  {q.name}: {q.instance_type} is not in fmcluster's catalog; its accelerators and "
                              "their memory come from EC2 DescribeInstanceTypes (HBM bandwidth, links and EFA "
                              "bandwidth are not known)\n"))
        u = q.ultraserver
        if u is None:
            continue
        kind = "GPUs" if q.accelerator_kind == "gpu" else "chips"
        per = f"{u.accelerators_per_domain} {kind} on {u.instances_per_domain} instances" \
            if u.accelerators_per_domain else f"{u.instances_per_domain} instances"
        notes.append(Text(f"  {q.name}: {u.count} × {u.type} UltraServer{'s' if u.count != 1 else ''}, each one "
                          f"{u.link or 'accelerator'} domain of {per}\n"))
    return notes


def repair_notes(report: PlanReport) -> list[Text]:
    """queues[].auto_repair: what the backend does about each queue's unhealthy nodes."""
    return [Text(f"  {q.name}: {q.repair_note}\n") for q in report.queues if q.repair_note]


def _size(n_bytes: float) -> str:
    return f"{n_bytes / 1e12:,.2f} TB" if n_bytes >= 1e12 else f"{n_bytes / 1e9:,.0f} GB"


def storage_text(report: PlanReport) -> Text:
    text = Text()
    text.append("Storage\n", style="bold")
    lustre = report.storage.lustre
    if lustre is None:
        text.append("  FSx for Lustre: none\n")
    else:
        text.append(
            f"  FSx for Lustre {lustre.mount}: {lustre.capacity_gib:,} GiB "
            f"({lustre.capacity_tib:g} TiB as AWS counts it) x {lustre.throughput_per_tib_mb_s} MB/s/TiB "
            f"= {lustre.throughput_gb_s:,.2f} GB/s\n"
        )
        iops = f" ({lustre.metadata_iops:,} IOPS)" if lustre.metadata_iops else ""
        text.append(f"  metadata: {lustre.metadata_mode}{iops}")
        if lustre.s3_import:
            text.append(f"; linked to {lustre.s3_import}")
        if lustre.existing_id:
            text.append(f"; existing {lustre.existing_id} (figures use the spec's capacity)")
        text.append("\n")
    home = report.storage.home
    if home is None:
        text.append("  home: not configured (no shared /home file system)\n")
    else:
        size = f", {home.capacity_gib:,} GiB" if home.capacity_gib else ""
        kind = "FSx for OpenZFS" if home.type == "openzfs" else "EFS"
        text.append(f"  home: {kind} {home.mount}{size}\n")
    return text


def workload_table(report: PlanReport) -> Table | Text:
    work = report.workload
    if work is None:
        return Text("Workload: none in the spec (add workload.model_params_b and checkpoint_every_min)\n")
    table = Table(
        title=f"Workload: {work.model_params_b:g}B parameters",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        show_header=False,
        pad_edge=False,
    )
    table.add_column("what", style="bold")
    table.add_column("figure")
    fits = {True: "fits", False: "DOES NOT FIT", None: NA}[work.fits_in_hbm]
    table.add_row("training state", f"{_size(work.state_bytes)} ({work.state_accounting})")
    limit = work.hbm_state_limit_bytes
    table.add_row(
        "memory fit",
        Text(f"{fits} in {work.hbm_state_fraction:.0%} of queue {work.training_queue}'s HBM "
             f"({_size(limit) if limit else NA}; the rest is left for activations); "
             f"needs ≥ {_num(work.min_nodes)} node(s)"),
    )
    if work.checkpoint_seconds is None:
        table.add_row("checkpoint", f"{_size(work.checkpoint_bytes)}; time n/a (no FSx for Lustre)")
    else:
        table.add_row(
            "checkpoint",
            f"{_size(work.checkpoint_bytes)} ({work.checkpoint_accounting}) in "
            f"{work.checkpoint_seconds:,.0f} s at {work.checkpoint_write_gb_s:,.2f} GB/s "
            f"({work.checkpoint_limited_by}-limited) = {(work.checkpoint_fraction or 0) * 100:.1f}% of every "
            f"{work.checkpoint_interval_seconds / 60:g} min",
        )
        table.add_row("network assumption", Text(work.network_assumption))
    if work.allreduce_seconds is None:
        table.add_row("gradient all-reduce", "n/a (no EFA or interconnect figure for the training queue)")
    else:
        over = (
            f" over {work.allreduce_over} at {work.allreduce_gb_s_per_gpu:,.1f} GB/s per accelerator"
            if work.allreduce_over
            else ""
        )
        table.add_row(
            "gradient all-reduce",
            f"~{work.allreduce_seconds:,.2f} s per step: ring 2(N-1)/N x {work.gradient_bytes / 1e9:,.0f} GB "
            f"bf16 gradients, N = {work.allreduce_gpus}{over}",
        )
    if work.implied_bf16_utilization is not None:
        table.add_row(
            "tokens/s check",
            f"{work.tokens_per_second:,.0f} tokens/s = "
            f"{work.implied_bf16_utilization:.0%} of bf16 dense peak (6 FLOPs/param/token)",
        )
    return table


def cost_table(report: PlanReport) -> Table:
    cost = report.cost
    table = Table(title="Cost", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    table.add_column("part")
    table.add_column("$/hour", justify="right")
    table.add_column("$/day", justify="right")

    def row(name: str, per_hour: float | None) -> None:
        table.add_row(name, _usd(per_hour), _usd(per_hour * 24 if per_hour is not None else None))

    row("compute (queues at max)", cost.compute_usd_per_hour)
    for part in cost.parts:  # each billed part, priced or "n/a", so that the total names all of them
        row(part["name"], part["usd_per_hour"])
    known = " (known parts)" if cost.unknown else ""
    table.add_row(f"total{known}", _usd(report.usd_per_hour), _usd(report.usd_per_day), style="bold")
    if cost.unknown:
        table.caption = f"not in the total (no bundled price): {'; '.join(_unknown_reasons(cost))}"
        table.caption_justify = "left"
    return table


def _unknown_reasons(cost: CostFigures) -> list[str]:
    """Each unpriced part with why, from its note where it has one."""
    notes = {part["name"]: part["note"] for part in cost.parts}
    return [f"{name}: {notes[name]}" if name in notes else name for name in cost.unknown]


def verdict_text(report: PlanReport) -> Group:
    name = report.bottleneck
    head = Text()
    head.append("Bottleneck: ", style="bold")
    head.append(
        BOTTLENECK_TEXT.get(name or "", "not assessed (no workload)"),
        style="bold red" if name not in (None, "none") else "bold green",
    )
    # A grid keeps wrapped advice indented under its bullet.
    bullets = Table.grid(padding=(0, 1))
    bullets.add_column(width=3, justify="right")
    bullets.add_column()
    for line in report.advice:
        bullets.add_row("•", Text(line))
    return Group(head, bullets, Text())


def render(report: PlanReport) -> RenderableType:
    prices = "bundled catalog prices" if report.prices.source == "bundled" else "live AWS Pricing API prices"
    header = Text()
    header.append(f"Plan for {report.cluster}", style="bold")
    header.append(
        f"  ({report.backend}, {report.region}; {prices}, as of {report.prices.as_of or 'unknown'})\n"
    )
    parts: list[RenderableType] = [
        header,
        queues_table(report),
        price_notes(report),
        *domain_notes(report),
        *repair_notes(report),
        *burn_in_text(report),
        storage_text(report),
        workload_table(report),
    ]
    chart = chart_for(report)
    if chart is not None:
        parts.append(render_terminal(chart))
    parts += [verdict_text(report), cost_table(report), *budget_text(report)]
    return Group(*parts)


def budget_text(report: PlanReport) -> list[Text]:
    """When the budget guard fires for the cluster created now, which limit decides, and what it does."""
    budget = report.budget
    if budget is None:
        return []
    head = Text()
    head.append("Budget guard: ", style="bold")
    if budget.fires_at is None:
        head.append("no moment can be placed: " + budget.why)
        return [head]
    head.append(f"fires {budget.fires_at} (in {budget.hours_left:,.2f} h if created now), on {budget.decided_by}")
    lines = [head, Text(f"  {budget.why}"), Text(f"  on_limit {budget.on_limit}: {budget.does}")]
    if budget.warns_at:
        lines.append(Text(f"  warns {', '.join(budget.notify)} at {budget.warns_at} by email (an SNS topic; each "
                          "address confirms its subscription first)"))
    elif not budget.notify:
        lines.append(Text("  no warning will be sent before it fires: add budget.notify (email addresses)"))
    if budget.notify and budget.max_usd is not None:
        lines.append(Text(f"  AWS Budgets notifies {', '.join(budget.notify)} at 80% and 100% of the cap"))
    return lines


def print_report(report: PlanReport, console: Console) -> None:
    console.print(render(report))
