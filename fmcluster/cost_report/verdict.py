"""The plan's verdict: the one named bottleneck, and advice with numbers."""

from __future__ import annotations

import math

from fmcluster import catalog
from fmcluster.cost_report.assumptions import (
    CHECKPOINT_FRACTION_LIMIT,
    GIB_PER_FSX_TIB,
    HBM_STATE_FRACTION,
    LUSTRE_TIERS,
)
from fmcluster.cost_report.hardware_figures import training_queue
from fmcluster.cost_report.report_model import CheckpointPoint, CostFigures, QueueFigures, WorkloadFigures
from fmcluster.spec.models import Spec


def _gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e12:,.2f} TB" if n_bytes >= 1e12 else f"{n_bytes / 1e9:,.0f} GB"


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.0f}%" if fraction >= 0.095 else f"{fraction * 100:.1f}%"


def verdict(
    spec: Spec,
    queues: list[QueueFigures],
    work: WorkloadFigures | None,
    curve: list[CheckpointPoint],
    cost: CostFigures,
) -> tuple[str | None, list[str]]:
    """The one named bottleneck and what to do about it (and about anything else worth saying)."""
    advice: list[str] = []
    train = training_queue(queues)
    if work is None:
        advice.append(
            "add a workload section (model_params_b, checkpoint_every_min) to get memory-fit, "
            "checkpoint and all-reduce estimates"
        )
        return None, advice + _cost_advice(cost)
    if train is None:
        return "no_accelerators", [
            "no queue has accelerators in fmcluster's catalog: there is nothing to train on"
        ]

    issues: list[str] = []
    # Advice by topic, so the named bottleneck's advice can come first.
    memory: list[str] = []
    compute: list[str] = []
    checkpoint: list[str] = []
    network: list[str] = []
    node_word = "node" if work.min_nodes == 1 else "nodes"
    if work.fits_in_hbm is False:
        issues.append("hbm_capacity")
        memory.append(
            f"training state is {_gb(work.state_bytes)} but {HBM_STATE_FRACTION:.0%} of queue "
            f"{train.name}'s HBM is {_gb(work.hbm_state_limit_bytes or 0)}: use at least {work.min_nodes} "
            f"{node_word} of {train.instance_type} (the queue has {train.nodes})"
        )
    elif work.min_nodes is not None:
        memory.append(
            f"training state ({_gb(work.state_bytes)}) fits in {HBM_STATE_FRACTION:.0%} of HBM with full "
            f"sharding on {work.min_nodes} or more {node_word} of {train.instance_type} "
            f"(queue {train.name} has {train.nodes})"
        )

    if work.implied_bf16_utilization is not None and work.implied_bf16_utilization > 1:
        issues.append("compute")
        compute.append(
            f"tokens_per_second {work.tokens_per_second:,.0f} needs {work.implied_bf16_utilization:.0%} of "
            f"queue {train.name}'s bf16 dense peak ({train.bf16_dense_pflops:,.1f} PFLOP/s at "
            "6 FLOPs/param/token): "
            "it cannot be reached; expect 35-55% utilization, or add nodes"
        )
    elif work.implied_bf16_utilization is not None:
        compute.append(
            f"tokens_per_second implies {work.implied_bf16_utilization:.0%} of the bf16 dense peak "
            "(6 FLOPs/param/token)"
        )

    if work.checkpoint_fraction is None:
        checkpoint.append(
            "no storage.lustre: checkpoint time is not estimated; add FSx for Lustre for checkpoints"
        )
    else:
        if work.checkpoint_fraction >= CHECKPOINT_FRACTION_LIMIT:
            issues.append("checkpoint_write")
        checkpoint.extend(_checkpoint_advice(spec, train, work, curve))

    if work.allreduce_seconds and work.tokens_per_second:
        tokens = work.allreduce_seconds * work.tokens_per_second
        text = (
            f"gradient all-reduce moves {_gb(work.gradient_bytes)} in ~{work.allreduce_seconds:.2f} s per "
            f"step over {work.allreduce_over}; at {work.tokens_per_second:,.0f} tokens/s a step needs "
            f"≥ {tokens / 1e6:,.1f}M tokens to hide it behind compute"
        )
        if work.sequence_length:
            text += f" (≥ {math.ceil(tokens / work.sequence_length):,} sequences of {work.sequence_length:,})"
        network.append(text)

    # Memory decides whether training runs at all; checkpoint waits are what the cluster's design (its
    # storage) controls; an out-of-reach tokens/s target comes after them.
    ranked = [name for name in ("hbm_capacity", "checkpoint_write", "compute") if name in issues]
    bottleneck = ranked[0] if ranked else "none"
    sections = {"hbm_capacity": memory, "checkpoint_write": checkpoint, "compute": compute}
    first = sections.pop(bottleneck, [])
    for lines in (first, *sections.values(), network):
        advice.extend(lines)
    return bottleneck, advice + _cost_advice(cost)


def _checkpoint_advice(
    spec: Spec, train: QueueFigures, work: WorkloadFigures, curve: list[CheckpointPoint]
) -> list[str]:
    lustre = spec.storage.lustre
    assert lustre is not None and work.checkpoint_seconds is not None and work.checkpoint_fraction is not None
    minutes = work.checkpoint_interval_seconds / 60
    lines = [
        f"checkpoints take {_pct(work.checkpoint_fraction)} of each {minutes:g}-min interval "
        f"({work.checkpoint_seconds:,.0f} s to write {_gb(work.checkpoint_bytes)} at "
        f"{work.checkpoint_write_gb_s:,.2f} GB/s, limited by {work.checkpoint_limited_by})"
    ]
    if work.checkpoint_fraction < CHECKPOINT_FRACTION_LIMIT:
        return lines
    if train.usd_per_hour is not None:
        lines.append(
            f"while a blocking checkpoint writes, ~${train.usd_per_hour * work.checkpoint_fraction:,.0f}/h "
            f"of queue {train.name}'s compute waits"
        )
    if work.checkpoint_limited_by == "network":
        lines.append(
            "the nodes' network, not Lustre, limits checkpoint writes: write shards from every node "
            "and consider an EFA-enabled FSx file system"
        )
        return lines
    better = [
        p
        for p in curve
        if p.capacity_gib == lustre.capacity_gib and p.throughput_per_tib_mb_s > lustre.throughput_per_tib
    ]
    if better:
        options = ", ".join(
            f"{p.throughput_per_tib_mb_s} MB/s/TiB → {p.seconds:,.0f} s ({_pct(p.fraction)})" for p in better
        )
        lines.append(
            f"at {lustre.capacity_gib:,} GiB: {options}; FSx prices are not bundled, so the extra "
            "$/h is not shown"
        )
    target = _capacity_for(work, max(LUSTRE_TIERS))
    if target is not None and target > lustre.capacity_gib:
        lines.append(
            f"to get under {CHECKPOINT_FRACTION_LIMIT:.0%} at 1000 MB/s/TiB, grow Lustre to "
            f"{target:,} GiB (or checkpoint less often, or asynchronously to local NVMe first)"
        )
    elif target is None:
        lines.append("no Lustre size gets under the target: checkpoint less often or asynchronously")
    return lines


def _capacity_for(work: WorkloadFigures, tier: int) -> int | None:
    """Smallest allowed Lustre capacity whose checkpoint share is under the limit at ``tier``."""
    steps = catalog.fsx_lustre_facts().persistent_2.capacity_gib
    needed_gb_s = work.checkpoint_bytes / 1e9 / (CHECKPOINT_FRACTION_LIMIT * work.checkpoint_interval_seconds)
    gib = needed_gb_s * 1000 / tier * GIB_PER_FSX_TIB
    return steps.round_up(gib)


def _cost_advice(cost: CostFigures) -> list[str]:
    if not cost.unknown:
        return []
    return ["cost leaves out what has no bundled price: " + ", ".join(cost.unknown)]
