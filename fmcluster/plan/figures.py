"""The plan report's numbers: a spec in, a :class:`PlanReport` out. Pure arithmetic on the catalog.

Nothing here prints, calls AWS or reads files; prices come in through a :class:`PriceBook` so that the
same computation serves bundled and live prices. Every assumption is a named constant below and is
repeated in the report, so a reader can redo the sums.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fmcluster import catalog
from fmcluster.catalog.hardware import hardware
from fmcluster.plan.prices import PriceBook, QueuePrice
from fmcluster.spec.decisions import efa_enabled, ultraserver_shape
from fmcluster.spec.models import Queue, Spec, max_nodes, min_nodes

# --- accounting (mixed-precision training with Adam, the common FM recipe) ------------------------
#: bf16 weights 2 B + fp32 master weights 4 B + Adam first and second moments (fp32) 8 B + bf16 gradients 2 B.
STATE_BYTES_PER_PARAM = 16
STATE_ACCOUNTING = (
    "16 B/param: bf16 weights 2 + fp32 master weights 4 + Adam moments (fp32 m, v) 8 + bf16 gradients 2; "
    "fully sharded (FSDP / ZeRO-3) across every accelerator of the training queue"
)
#: A checkpoint holds what a restart needs: the fp32 master weights, the Adam moments and bf16 weights.
#: Gradients are recomputed, so they are not saved.
CHECKPOINT_BYTES_PER_PARAM = 14
CHECKPOINT_ACCOUNTING = "14 B/param: bf16 weights 2 + fp32 master weights 4 + Adam moments 8 (no gradients)"
#: Gradients are reduced in bf16.
GRADIENT_BYTES_PER_PARAM = 2
#: Activations, NCCL buffers and the framework need the rest of HBM; 70% for state is a common planning rule.
HBM_STATE_FRACTION = 0.70
#: Checkpoints that block training for more than this share of the interval are worth fixing.
CHECKPOINT_FRACTION_LIMIT = 0.05
#: FLOPs per token for a dense transformer's forward + backward pass: 6 x parameters.
FLOPS_PER_PARAM_PER_TOKEN = 6
#: AWS counts FSx capacity in decimal steps: 1,200 GiB is sold as "1.2 TiB", and the throughput of a
#: PERSISTENT_2 file system is that figure x MB/s/TiB (4,800 GiB at 250 MB/s/TiB = 1,200 MB/s).
GIB_PER_FSX_TIB = 1000
#: DescribeInstanceTypes gives accelerator memory in MiB; the report counts HBM in decimal GB.
GB_PER_GIB = 1.073741824
LUSTRE_TIERS = (125, 250, 500, 1000)
NETWORK_ASSUMPTION = (
    "the nodes reach storage at most at their EFA bandwidth (Gbps x nodes); Lustre over TCP uses ENA, "
    "which can be lower, so this is an upper bound and Lustre is normally the limit"
)


@dataclass(frozen=True)
class InterconnectFigures:
    name: str
    gb_s_per_accelerator: float
    bidirectional: bool | None


@dataclass(frozen=True)
class QueueFigures:
    name: str
    instance_type: str
    nodes: int  # the queue's maximum: what a dynamic queue can grow to
    min_nodes: int
    dynamic: bool
    in_catalog: bool
    accelerators_per_node: int
    accelerators: int
    accelerator_model: str | None
    accelerator_kind: str | None
    gpus: int
    hbm_total_gb: float
    hbm_bandwidth_tbps: float
    bf16_dense_pflops: float | None
    interconnect: InterconnectFigures | None
    efa_version: int | None
    efa_gbps_per_node: float | None
    efa_gbps_total: float | None
    usd_per_node_hour: float | None
    usd_per_hour: float | None
    price_basis: str | None
    price_note: str
    price_as_of: str | None
    # Where the hardware facts come from: "catalog", "ec2" (DescribeInstanceTypes, cached) or "name" (unknown).
    facts_source: str = "catalog"
    # capacity.ultraserver: the accelerators that share one NVLink / NeuronLink domain, and how many domains.
    ultraserver: UltraServerFigures | None = None


@dataclass(frozen=True)
class UltraServerFigures:
    type: str
    count: int
    instances_per_domain: int
    accelerators_per_domain: int | None
    link: str | None


@dataclass(frozen=True)
class LustreFigures:
    mount: str
    capacity_gib: int
    capacity_tib: float
    throughput_per_tib_mb_s: int
    throughput_mb_s: float
    throughput_gb_s: float
    metadata_mode: str
    metadata_iops: int | None
    existing_id: str | None
    s3_import: str | None
    usd_per_hour: None = None  # FSx prices are not in the catalog


@dataclass(frozen=True)
class HomeFigures:
    type: str
    mount: str
    capacity_gib: int | None
    usd_per_hour: None = None


@dataclass(frozen=True)
class StorageFigures:
    lustre: LustreFigures | None
    home: HomeFigures | None
    price_note: str = "FSx prices are not bundled with fmcluster (the catalog has none)"


@dataclass(frozen=True)
class WorkloadFigures:
    model_params_b: float
    params: int
    training_queue: str | None
    state_bytes: int
    state_accounting: str
    hbm_state_fraction: float
    hbm_state_limit_bytes: int | None
    fits_in_hbm: bool | None
    min_nodes: int | None
    checkpoint_bytes: int
    checkpoint_accounting: str
    checkpoint_write_gb_s: float | None
    checkpoint_limited_by: str | None  # "lustre" | "network"
    checkpoint_seconds: float | None
    checkpoint_interval_seconds: float
    checkpoint_fraction: float | None
    network_assumption: str
    gradient_bytes: int
    allreduce_gpus: int | None
    allreduce_over: str | None
    allreduce_gb_s_per_gpu: float | None
    allreduce_seconds: float | None
    tokens_per_second: float | None
    sequence_length: int | None
    implied_bf16_utilization: float | None


@dataclass(frozen=True)
class CostFigures:
    compute_usd_per_hour: float | None
    head_node_instance_type: str
    head_node_usd_per_hour: float | None
    storage_usd_per_hour: float | None
    unknown: list[str]
    # The network fmcluster creates (NAT gateway and its public address); 0 with the spec's own subnet.
    network_usd_per_hour: float | None = 0.0


@dataclass(frozen=True)
class PricesInfo:
    source: str  # "bundled" | "live"
    as_of: str | None


@dataclass(frozen=True)
class CheckpointPoint:
    """One bar of the chart: checkpoint time at one Lustre tier and capacity."""

    throughput_per_tib_mb_s: int
    capacity_gib: int
    write_gb_s: float
    seconds: float
    fraction: float
    current: bool


@dataclass(frozen=True)
class PlanReport:
    cluster: str
    backend: str
    region: str
    queues: list[QueueFigures]
    storage: StorageFigures
    workload: WorkloadFigures | None
    usd_per_hour: float | None
    usd_per_day: float | None
    cost: CostFigures
    bottleneck: str | None
    advice: list[str]
    prices: PricesInfo
    checkpoint_curve: list[CheckpointPoint] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


# --- per queue --------------------------------------------------------------------------------------


def queue_figures(queue: Queue, price: QueuePrice) -> QueueFigures:
    facts = catalog.instance(queue.instance_type)
    if facts is None:
        return _described_queue_figures(queue, price)
    figures = _catalog_queue_figures(queue, price, facts)
    shape = ultraserver_shape(queue.capacity.ultraserver) if queue.capacity.ultraserver else None
    if shape is None:
        return figures
    domains = UltraServerFigures(shape.name, max_nodes(queue) // shape.instances, shape.instances,
                                 shape.accelerators, shape.domain)
    return replace(figures, ultraserver=domains)


def _catalog_queue_figures(queue: Queue, price: QueuePrice, facts: catalog.InstanceFacts) -> QueueFigures:
    nodes = max_nodes(queue)
    per_node = facts.accelerators if facts else 0
    efa_on = facts is not None and facts.efa is not None and efa_enabled(queue)
    link = facts.interconnect if facts else None
    tflops = facts.bf16_dense_tflops_per_accelerator if facts else None
    return QueueFigures(
        name=queue.name,
        instance_type=queue.instance_type,
        nodes=nodes,
        min_nodes=min_nodes(queue),
        dynamic=not isinstance(queue.nodes, int),
        in_catalog=facts is not None,
        accelerators_per_node=per_node,
        accelerators=per_node * nodes,
        accelerator_model=facts.accelerator.model if facts else None,
        accelerator_kind=facts.accelerator.kind if facts else None,
        gpus=per_node * nodes,
        hbm_total_gb=round(facts.hbm_gb_total * nodes, 1) if facts else 0.0,
        hbm_bandwidth_tbps=round(facts.hbm_tbps_total * nodes, 3) if facts else 0.0,
        bf16_dense_pflops=round(tflops * per_node * nodes / 1000, 2) if tflops else None,
        interconnect=InterconnectFigures(link.name, link.gb_s_per_accelerator, link.bidirectional)
        if link
        else None,
        efa_version=facts.efa.version if efa_on and facts and facts.efa else None,
        efa_gbps_per_node=facts.efa_gbps if efa_on and facts else None,
        efa_gbps_total=(facts.efa_gbps or 0) * nodes if efa_on and facts else None,
        usd_per_node_hour=price.usd_per_hour,
        usd_per_hour=round(price.usd_per_hour * nodes, 4) if price.usd_per_hour is not None else None,
        price_basis=price.basis,
        price_note=price.note,
        price_as_of=price.as_of,
    )


def _described_queue_figures(queue: Queue, price: QueuePrice) -> QueueFigures:
    """A type outside the catalog: what DescribeInstanceTypes told (accelerators and their memory), or nothing."""
    facts = hardware(queue.instance_type)
    nodes = max_nodes(queue)
    per_node = facts.accelerators or 0
    hbm_gb = (facts.accelerator_memory_gib or 0) * GB_PER_GIB * per_node * nodes
    return QueueFigures(
        name=queue.name, instance_type=queue.instance_type, nodes=nodes, min_nodes=min_nodes(queue),
        dynamic=not isinstance(queue.nodes, int), in_catalog=False, accelerators_per_node=per_node,
        accelerators=per_node * nodes, accelerator_model=facts.accelerator_model,
        accelerator_kind=facts.accelerator_kind, gpus=per_node * nodes,
        hbm_total_gb=round(hbm_gb, 1), hbm_bandwidth_tbps=0.0, bf16_dense_pflops=None, interconnect=None,
        efa_version=None, efa_gbps_per_node=None, efa_gbps_total=None, usd_per_node_hour=price.usd_per_hour,
        usd_per_hour=round(price.usd_per_hour * nodes, 4) if price.usd_per_hour is not None else None,
        price_basis=price.basis, price_note=price.note, price_as_of=price.as_of, facts_source=facts.source)


def training_queue(queues: list[QueueFigures]) -> QueueFigures | None:
    """The largest accelerated queue (most accelerators at its maximum; first wins ties)."""
    accelerated = [q for q in queues if q.accelerators > 0]
    return max(accelerated, key=lambda q: q.accelerators) if accelerated else None


# --- storage ----------------------------------------------------------------------------------------


def storage_figures(spec: Spec) -> StorageFigures:
    lustre = spec.storage.lustre
    home = spec.storage.home
    lustre_figures = None
    if lustre is not None:
        tib = lustre.capacity_gib / GIB_PER_FSX_TIB
        mb_s = tib * lustre.throughput_per_tib
        iops = None if lustre.metadata_iops == "auto" else int(lustre.metadata_iops)
        lustre_figures = LustreFigures(
            mount=lustre.mount,
            capacity_gib=lustre.capacity_gib,
            capacity_tib=tib,
            throughput_per_tib_mb_s=lustre.throughput_per_tib,
            throughput_mb_s=round(mb_s, 3),
            throughput_gb_s=round(mb_s / 1000, 4),
            metadata_mode="AUTOMATIC" if iops is None else "USER_PROVISIONED",
            metadata_iops=iops,
            existing_id=lustre.existing_id,
            s3_import=lustre.s3_import,
        )
    home_figures = None
    if home is not None:
        home_figures = HomeFigures(
            type=home.type,
            mount=home.mount,
            capacity_gib=home.capacity_gib if home.type == "openzfs" and not home.existing_id else None,
        )
    return StorageFigures(lustre=lustre_figures, home=home_figures)


def lustre_gb_s(capacity_gib: int, throughput_per_tib: int) -> float:
    return capacity_gib / GIB_PER_FSX_TIB * throughput_per_tib / 1000


# --- workload ---------------------------------------------------------------------------------------


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


# --- cost -------------------------------------------------------------------------------------------


def cost_figures(spec: Spec, queues: list[QueueFigures], head: QueuePrice) -> CostFigures:
    unknown = [f"queue {q.name} ({q.instance_type})" for q in queues if q.usd_per_hour is None]
    known = [q.usd_per_hour for q in queues if q.usd_per_hour is not None]
    if head.usd_per_hour is None:
        unknown.append(f"head node ({spec.head_node.instance_type})")
    if spec.storage.lustre is not None:
        unknown.append("FSx for Lustre")
    if spec.storage.home is not None:
        unknown.append("FSx for OpenZFS /home" if spec.storage.home.type == "openzfs" else "EFS /home")
    from fmcluster.render.network import network_usd_per_hour

    network = network_usd_per_hour(spec)
    if network is None:
        unknown.append(f"NAT gateway of the created network (no bundled price for {spec.region})")
    return CostFigures(
        compute_usd_per_hour=round(sum(known), 4) if known else None,
        head_node_instance_type=spec.head_node.instance_type,
        head_node_usd_per_hour=head.usd_per_hour,
        storage_usd_per_hour=None,
        unknown=unknown,
        network_usd_per_hour=network,
    )


def _total(cost: CostFigures) -> float | None:
    parts = [
        p
        for p in (cost.compute_usd_per_hour, cost.head_node_usd_per_hour, cost.storage_usd_per_hour)
        if p is not None
    ]
    # The network alone is no total: with no node priced, the total stays unknown.
    return round(sum(parts) + (cost.network_usd_per_hour or 0.0), 4) if parts else None


# --- verdict ----------------------------------------------------------------------------------------


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


# --- entry point ------------------------------------------------------------------------------------


def plan_report(spec: Spec, prices: PriceBook) -> PlanReport:
    """Every figure of the plan report for ``spec``, priced from ``prices``."""
    queues = [queue_figures(q, prices.queue_price(q)) for q in spec.queues]
    storage = storage_figures(spec)
    work = workload_figures(spec, queues, storage)
    curve = checkpoint_curve(spec, queues, work)
    cost = cost_figures(spec, queues, prices.instance_price(spec.head_node.instance_type))
    bottleneck, advice = verdict(spec, queues, work, curve, cost)
    total = _total(cost)
    return PlanReport(
        cluster=spec.name,
        backend=spec.backend,
        region=spec.region,
        queues=queues,
        storage=storage,
        workload=work,
        usd_per_hour=total,
        usd_per_day=round(total * 24, 2) if total is not None else None,
        cost=cost,
        bottleneck=bottleneck,
        advice=advice,
        prices=PricesInfo(source=prices.source, as_of=prices.as_of),
        checkpoint_curve=curve,
    )
