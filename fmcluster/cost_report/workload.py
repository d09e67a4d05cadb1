"""The workload figures of the plan: training state against HBM, checkpoint write time against Lustre and
the network, all-reduce time, and the checkpoint curve over Lustre sizes."""

from __future__ import annotations

import math

from fmcluster.cost_report.assumptions import (
    CHECKPOINT_ACCOUNTING,
    CHECKPOINT_BYTES_PER_PARAM,
    FLOPS_PER_PARAM_PER_TOKEN,
    GRADIENT_BYTES_PER_PARAM,
    HBM_STATE_FRACTION,
    LUSTRE_TIERS,
    NETWORK_ASSUMPTION,
    STATE_ACCOUNTING,
    STATE_BYTES_PER_PARAM,
)
from fmcluster.cost_report.hardware_figures import lustre_gb_s, training_queue
from fmcluster.cost_report.report_model import CheckpointPoint, QueueFigures, StorageFigures, WorkloadFigures
from fmcluster.spec.models import Spec


def _network_gb_s(queue: QueueFigures) -> float | None:
    """The training nodes' aggregate bandwidth to storage, in GB/s (see NETWORK_ASSUMPTION)."""
    if queue.efa_gbps_total:
        return queue.efa_gbps_total / 8
    return None


def checkpoint_write(
    checkpoint_bytes: int, lustre_gbps: float | None, network_gbps: float | None
) -> tuple[float | None, str | None, float | None]:
    """(write GB/s, what limits it, seconds) for one checkpoint."""
    if lustre_gbps is None:
        return None, None, None
    rate, limit = lustre_gbps, "lustre"
    if network_gbps is not None and network_gbps < lustre_gbps:
        rate, limit = network_gbps, "network"
    return rate, limit, checkpoint_bytes / (rate * 1e9)


def _allreduce(
    queue: QueueFigures, gradient_bytes: int
) -> tuple[int, str | None, float | None, float | None]:
    """Ring all-reduce time: 2(N-1)/N x gradient bytes / per-accelerator link bandwidth.

    Across nodes the ring is as slow as each accelerator's share of EFA. Inside a single node it runs on
    NVLink / NeuronLink; there one direction of the link is what a ring uses.
    """
    n = queue.accelerators
    if n <= 1:
        return n, None, None, 0.0
    if queue.nodes > 1:
        if not queue.efa_gbps_per_node:
            return n, None, None, None
        over = "EFA"
        gb_s = queue.efa_gbps_per_node / 8 / queue.accelerators_per_node
    else:
        link = queue.interconnect
        if link is None:
            return n, None, None, None
        over = link.name
        gb_s = link.gb_s_per_accelerator / (2 if link.bidirectional else 1)
    seconds = 2 * (n - 1) / n * gradient_bytes / (gb_s * 1e9)
    return n, over, gb_s, seconds


def workload_figures(
    spec: Spec, queues: list[QueueFigures], storage: StorageFigures
) -> WorkloadFigures | None:
    workload = spec.workload
    if workload is None:
        return None
    params = int(round(workload.model_params_b * 1e9))
    state = STATE_BYTES_PER_PARAM * params
    ckpt = CHECKPOINT_BYTES_PER_PARAM * params
    grads = GRADIENT_BYTES_PER_PARAM * params
    interval = workload.checkpoint_every_min * 60
    train = training_queue(queues)

    limit_bytes = fits = need = None
    if train is not None:
        per_node_bytes = train.hbm_total_gb / train.nodes * 1e9
        limit_bytes = int(HBM_STATE_FRACTION * train.hbm_total_gb * 1e9)
        fits = state <= limit_bytes
        need = max(1, math.ceil(state / (HBM_STATE_FRACTION * per_node_bytes)))

    lustre = storage.lustre
    rate = limit = seconds = fraction = None
    if lustre is not None:
        network = _network_gb_s(train) if train else None
        rate, limit, seconds = checkpoint_write(ckpt, lustre.throughput_gb_s, network)
        fraction = seconds / interval if seconds is not None else None

    n = over = link_gb_s = allreduce = None
    if train is not None:
        n, over, link_gb_s, allreduce = _allreduce(train, grads)

    utilization = None
    if train is not None and workload.tokens_per_second and train.bf16_dense_pflops:
        needed = FLOPS_PER_PARAM_PER_TOKEN * params * workload.tokens_per_second
        utilization = needed / (train.bf16_dense_pflops * 1e15)

    return WorkloadFigures(
        model_params_b=workload.model_params_b,
        params=params,
        training_queue=train.name if train else None,
        state_bytes=state,
        state_accounting=STATE_ACCOUNTING,
        hbm_state_fraction=HBM_STATE_FRACTION,
        hbm_state_limit_bytes=limit_bytes,
        fits_in_hbm=fits,
        min_nodes=need,
        checkpoint_bytes=ckpt,
        checkpoint_accounting=CHECKPOINT_ACCOUNTING,
        checkpoint_write_gb_s=round(rate, 4) if rate is not None else None,
        checkpoint_limited_by=limit,
        checkpoint_seconds=round(seconds, 2) if seconds is not None else None,
        checkpoint_interval_seconds=interval,
        checkpoint_fraction=round(fraction, 4) if fraction is not None else None,
        network_assumption=NETWORK_ASSUMPTION,
        gradient_bytes=grads,
        allreduce_gpus=n,
        allreduce_over=over,
        allreduce_gb_s_per_gpu=link_gb_s,
        allreduce_seconds=round(allreduce, 3) if allreduce is not None else None,
        tokens_per_second=workload.tokens_per_second,
        sequence_length=workload.sequence_length,
        implied_bf16_utilization=round(utilization, 4) if utilization is not None else None,
    )


def checkpoint_curve(
    spec: Spec, queues: list[QueueFigures], work: WorkloadFigures | None
) -> list[CheckpointPoint]:
    """Checkpoint time at every PERSISTENT_2 tier, at the spec's capacity and at twice it."""
    lustre = spec.storage.lustre
    if work is None or lustre is None:
        return []
    train = training_queue(queues)
    network = _network_gb_s(train) if train else None
    points = []
    for capacity in (lustre.capacity_gib, lustre.capacity_gib * 2):
        for tier in LUSTRE_TIERS:
            rate, _, seconds = checkpoint_write(work.checkpoint_bytes, lustre_gb_s(capacity, tier), network)
            assert rate is not None and seconds is not None
            points.append(
                CheckpointPoint(
                    throughput_per_tib_mb_s=tier,
                    capacity_gib=capacity,
                    write_gb_s=round(rate, 4),
                    seconds=round(seconds, 2),
                    fraction=round(seconds / work.checkpoint_interval_seconds, 4),
                    current=capacity == lustre.capacity_gib and tier == lustre.throughput_per_tib,
                )
            )
    return points
