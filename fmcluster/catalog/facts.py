"""The shape of the instance catalog (``instances.yaml``): frozen pydantic models of each group of facts, and
the confidence labels every group carries (see ``meta.confidence_labels`` in the YAML)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fmcluster.catalog.type_names import is_valid_ec2_type_name

ConfidenceLabel = Literal["local", "doc", "secondary", "derived", "unconfirmed"]
CONFIDENCE_LABELS: tuple[str, ...] = ("local", "doc", "secondary", "derived", "unconfirmed")

#: Confidence groups every instance entry must label (``ultraserver`` too when it has one).
CONFIDENCE_GROUPS: tuple[str, ...] = (
    "accelerator",
    "hbm_capacity",
    "hbm_bandwidth",
    "bf16",
    "interconnect",
    "efa",
    "efa_version",
    "host",
    "nvme",
    "price",
)



class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Accelerator(_Frozen):
    vendor: Literal["nvidia", "aws"]
    model: str
    count: int = Field(ge=1)
    kind: Literal["gpu", "trainium"]


class Interconnect(_Frozen):
    """Accelerator-to-accelerator link inside one instance (NVLink / NeuronLink)."""

    name: str
    gb_s_per_accelerator: float
    bidirectional: bool | None = None  # None: the source does not say
    links_per_accelerator: int | None = None
    description: str = ""


class Efa(_Frozen):
    """Elastic Fabric Adapter facts. ``version`` is the EFA generation (1..4 = EFAv1..EFAv4)."""

    version: int = Field(ge=1, le=4)
    gbps: float
    network_cards: int = Field(ge=1)
    max_interfaces: int | None = Field(default=None, ge=1)  # None: unknown
    # Cards whose interfaces can only be efa-only (DescribeInstanceTypes NetworkCards[].InterfaceTypes): p6e-gb200's
    # odd cards.
    efa_only_cards: tuple[int, ...] = ()
    layout: str = ""
    nitro: str | None = None
    gpudirect_rdma: bool | None = None  # None: not applicable (Trainium) or unknown
    rdma: str = ""


class Price(_Frozen):
    usd_per_hour: float | None = None  # None: no On-Demand SKU / unknown
    region: str
    as_of: str | None = None
    source: str = ""
    capacity_block_usd_per_accelerator_hour: float | None = None
    capacity_block_usd_per_hour: float | None = None
    # The AWS page the Capacity Block rate comes from, where it differs from ``source``.
    capacity_block_source: str = ""


class UltraServerType(_Frozen):
    name: str
    instances: int
    gpus: int | None = None
    chips: int | None = None
    vcpus: int | None = None
    memory_gib: float | None = None
    hbm_tb: float | None = None
    hbm_gib: float | None = None
    hbm_tbps: float | None = None
    efa_tbps: float | None = None
    nvme_tb: float | None = None
    nvlink_domain_tbps: float | None = None
    fp8_dense_pf: float | None = None
    fp8_pf: float | None = None
    bf16_dense_pf: float | None = None
    capacity_block_usd_per_hour: float | None = None

    @property
    def accelerators(self) -> int | None:
        return self.gpus if self.gpus is not None else self.chips


class UltraServer(_Frozen):
    only_sold_as_ultraserver: bool
    types: dict[str, UltraServerType]
    description: str = ""
    source: str = ""

    @model_validator(mode="before")
    @classmethod
    def _name_types(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("types"), dict):
            data = dict(data)
            data["types"] = {
                k: ({"name": k, **v} if isinstance(v, dict) else v) for k, v in data["types"].items()
            }
        return data


class InstanceFacts(_Frozen):
    """Facts about one EC2 instance type, with derived convenience properties."""

    name: str
    family: str
    accelerator: Accelerator
    hbm_gib_per_accelerator: float
    hbm_gb_per_accelerator: float | None = None  # vendor nameplate (decimal GB); None if not given
    hbm_tbps_per_accelerator: float
    bf16_dense_tflops_per_accelerator: float | None = None
    interconnect: Interconnect | None = None
    efa: Efa | None = None
    vcpus: int
    memory_gib: float
    nvme_gb: float | None = None
    ebs_max_mbps: float | None = None
    arch: Literal["x86_64", "arm64"]
    processor: str = ""
    purchase: str | None = None
    price: Price
    ultraserver: UltraServer | None = None
    confidence: dict[str, ConfidenceLabel]
    notes: str = ""

    @model_validator(mode="after")
    def _check(self) -> InstanceFacts:
        required = set(CONFIDENCE_GROUPS) | ({"ultraserver"} if self.ultraserver else set())
        missing = required - set(self.confidence)
        if missing:
            raise ValueError(f"{self.name}: confidence labels missing for {sorted(missing)}")
        if not is_valid_ec2_type_name(self.name):
            raise ValueError(f"{self.name}: not a valid EC2 instance type name")
        return self

    # --- derived -------------------------------------------------------------------------------
    @property
    def accelerators(self) -> int:
        """Accelerators (GPUs or Trainium chips) per instance."""
        return self.accelerator.count

    @property
    def hbm_gib_total(self) -> float:
        """Usable HBM per instance in GiB (EC2-reported / Neuron-doc figure x count)."""
        return self.hbm_gib_per_accelerator * self.accelerators

    @property
    def hbm_gb_total(self) -> float:
        """HBM per instance in decimal GB: nameplate x count, or the GiB figure converted when the
        vendor gives no GB nameplate (Trainium)."""
        if self.hbm_gb_per_accelerator is not None:
            return self.hbm_gb_per_accelerator * self.accelerators
        return round(self.hbm_gib_total * 1.073741824, 1)

    @property
    def hbm_tbps_total(self) -> float:
        """Aggregate HBM bandwidth per instance in TB/s."""
        return round(self.hbm_tbps_per_accelerator * self.accelerators, 4)

    @property
    def efa_supported(self) -> bool:
        return self.efa is not None

    @property
    def efa_interfaces(self) -> int | None:
        """EFA interfaces a launch template should attach (one per EFA-capable network card).

        ``None`` when unknown (p6e-gb200.36xlarge) or when the type has no EFA.
        """
        return self.efa.max_interfaces if self.efa is not None else None

    @property
    def efa_gbps(self) -> float | None:
        return self.efa.gbps if self.efa is not None else None

    @property
    def usd_per_hour(self) -> float | None:
        """On-Demand USD/hour in ``price.region``; ``None`` when there is no On-Demand SKU."""
        return self.price.usd_per_hour

    @property
    def is_ultraserver_only(self) -> bool:
        return bool(self.ultraserver and self.ultraserver.only_sold_as_ultraserver)


class Persistent2PerfTier(_Frozen):
    network_baseline_mb_s: float
    network_burst_mb_s: float | None = None
    ram_cache_gib: float
    disk_baseline_mb_s: float
    disk_burst_mb_s: float | None = None


class CapacitySteps(_Frozen):
    first_steps: tuple[int, ...]
    increment_after: int
    source: str = ""
    notes: str = ""

    def is_valid(self, gib: int) -> bool:
        """Whether ``gib`` is an allowed SSD capacity (1200, 2400, then +2400 GiB steps)."""
        if gib in self.first_steps:
            return True
        last = max(self.first_steps)
        return gib > last and (gib - last) % self.increment_after == 0

    def round_up(self, gib: float) -> int:
        """Smallest allowed capacity >= ``gib``."""
        for step in sorted(self.first_steps):
            if gib <= step:
                return step
        last = max(self.first_steps)
        n = -(-(gib - last) // self.increment_after)
        return int(last + n * self.increment_after)


class Persistent2(_Frozen):
    description: str = ""
    ssd_throughput_mb_s_per_tib: tuple[int, ...]
    ssd_performance_per_tib: dict[int, Persistent2PerfTier]
    performance_source: str = ""
    capacity_gib: CapacitySteps
    throughput_formula: str = ""
    metadata_iops: str = ""
    intelligent_tiering: str = ""


class FsxEfa(_Frozen):
    enabled_field: str
    notes: str


class FsxLustreFacts(_Frozen):
    persistent_2: Persistent2
    efa: FsxEfa
    other_deployment_types: dict[str, str]
    prices: dict[str, Any] | None = None  # None: the facts file has no FSx prices
    source: str = ""
    confidence: dict[str, ConfidenceLabel]


class CatalogMeta(_Frozen):
    model_config = ConfigDict(frozen=True, extra="allow")

    source: str
    compiled: str
    confidence_labels: dict[ConfidenceLabel, str]
    units: dict[str, str]


class OnDemandPrices(_Frozen):
    """On-Demand prices of a few types outside the accelerated catalog (the EKS system node group's default)."""

    region: str
    as_of: str
    source: str
    confidence: ConfidenceLabel
    usd_per_hour: dict[str, float]


class _Catalog(_Frozen):
    meta: CatalogMeta
    instances: dict[str, InstanceFacts]
    on_demand_prices: OnDemandPrices
    fsx_lustre: FsxLustreFacts

    @model_validator(mode="before")
    @classmethod
    def _name_instances(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("instances"), dict):
            data = dict(data)
            data["instances"] = {
                k: ({"name": k, **v} if isinstance(v, dict) else v) for k, v in data["instances"].items()
            }
        return data
