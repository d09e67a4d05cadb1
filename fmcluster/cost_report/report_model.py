"""The plan report's shape: one frozen dataclass per part, serialised as ``plan --json``
(docs/plan-json.md)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


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
    # queues[].auto_repair: what the backend does about the queue's unhealthy nodes (eks), else None.
    repair_note: str | None = None
    # queues[].burn_in: the level's checks and their expected time (None: level off).
    burn_in: BurnInFigures | None = None


@dataclass(frozen=True)
class BurnInPart:
    name: str
    low_seconds: float | None  # None: no published number for it
    high_seconds: float | None
    source: str


@dataclass(frozen=True)
class BurnInFloor:
    nodes: int
    gb_s: float
    source: str  # "spec", or the catalog entry's published run


@dataclass(frozen=True)
class BurnInFigures:
    """One queue's burn-in level (docs/plan-json.md, ``queues[].burn_in``)."""

    level: str
    default: bool  # the level is the queue's default, not written in the spec
    runs: list[str]
    nodes: int  # the node count the estimate is for: the queue's maximum
    parts: list[BurnInPart]
    low_seconds: float | None  # None when a part has no published number (named in ``unknown``)
    high_seconds: float | None
    unknown: list[str]
    leaves_out: str
    floors: list[BurnInFloor]
    block_hours: int | None  # the queue's Capacity Block length, when known
    block_fraction: float | None  # high_seconds over the block's length
    block_note: str | None  # a Capacity Block queue whose block's length is not known: how to learn it
    gated_at_create: bool  # the backend's create holds the queue's new nodes until they pass
    note: str


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
    head_node_instance_type: str | None  # None where the backend runs no head or login node
    head_node_usd_per_hour: float | None
    storage_usd_per_hour: float | None
    unknown: list[str]
    # The network fmcluster creates (NAT gateway and its public address); 0 with the spec's own subnet.
    network_usd_per_hour: float | None = 0.0
    # A managed control plane's fee (EKS: $0.10/h on standard support, $0.60/h on extended); 0 elsewhere.
    control_plane_usd_per_hour: float = 0.0
    # The nodes for cluster software (EKS's system node group, On-Demand); None/0 on a backend without them.
    system_nodes_instance_type: str | None = None
    system_nodes: int = 0
    system_nodes_usd_per_node_hour: float | None = None
    system_nodes_usd_per_hour: float | None = None
    system_nodes_price_note: str | None = None
    # Every part besides the queues ({name, usd_per_hour, note}): head or login node, system nodes, managed
    # controller, file systems, created network; usd_per_hour null = no bundled price (named in ``unknown``).
    parts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class BudgetFigures:
    """When the budget guard would fire for a cluster created now (``budget``; docs/plan-json.md)."""

    max_usd: float | None
    expires: str | None
    on_limit: str
    notify: list[str]
    fires_at: str | None  # ISO 8601 UTC, to the second
    decided_by: str | None  # "expires" | "max_usd"
    expires_at: str | None
    spend_at: str | None
    hours_left: float | None
    usd_per_hour_max: float | None
    why: str
    does: str  # what firing does on this backend
    warns_at: str | None = None  # when the warning goes to notify (None: no notify)


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
    budget: BudgetFigures | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
