"""What fmcluster knows about one instance type's hardware, and where each fact comes from.

In order: the curated catalog (``instances.yaml``); else the DescribeInstanceTypes facts of every type EC2 lists,
shipped with fmcluster (``ec2_instance_types.json.gz``, written by ``scripts/generate_instance_types.py`` from the
data moto publishes, read once and only when a type outside the catalog is asked about); else EC2's own
``DescribeInstanceTypes`` answer for a type newer than that list, read whenever an endpoint is reachable and cached
on disk (``<state dir>/cache/instance-types.json``) so that later offline commands know it too; else only what
the type's name says, which is its architecture (EC2's instance type naming: a ``g`` right after the generation
digit is AWS Graviton, arm64). A catalog entry whose EFA interface count is unknown takes it from EC2's facts.

Public API::

    hardware("g5.12xlarge")            -> Hardware
    known_instance_type("m7i.xlarge")  -> True (the catalog, EC2's list, or a cached EC2 answer has it)
    discover(names, region)            -> DiscoveryResult (reads DescribeInstanceTypes, fills the cache)
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from fmcluster import catalog
from fmcluster.connection import aws
from fmcluster.state.store import home

Source = Literal["catalog", "ec2", "name"]
AcceleratorKind = Literal["gpu", "trainium", "inferentia"]
MIB_PER_GIB = 1024
CACHE_FILE = "instance-types.json"
SHIPPED_FILE = "ec2_instance_types.json.gz"
# EC2 instance type naming (EC2 User Guide, "Amazon EC2 instance type naming conventions"): the processor family
# letter after the generation, "g" = AWS Graviton. a1 (first-generation Graviton) predates the convention.
_GRAVITON_FAMILY = re.compile(r"^[a-z]+\d+g")
_ARM_FAMILIES = {"a1"}


@dataclass(frozen=True)
class Hardware:
    """One instance type's hardware facts; ``None`` means fmcluster does not know it."""

    name: str
    source: Source
    architecture: str | None
    accelerators: int | None
    accelerator_kind: AcceleratorKind | None
    accelerator_model: str | None
    accelerator_memory_gib: float | None  # per accelerator
    efa_supported: bool | None
    network_cards: int | None
    efa_interfaces: int | None  # EFA interfaces a launch template attaches: one per EFA-capable card
    nvme_gb: float | None
    vcpus: int | None = None
    memory_gib: float | None = None  # host memory (what a Kubernetes node offers before system reservations)
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Cards whose EC2 NetworkCards[].InterfaceTypes allow only "efa-only" (p6e-gb200's odd cards): an "efa"
    # interface there is refused by RunInstances.
    efa_only_cards: frozenset[int] = frozenset()
    # Accelerators EC2 lists besides GPUs and Neuron devices (FPGAs, inference and media accelerators).
    other_accelerators: bool = False
    # EC2's SupportedUsageClasses (on-demand, spot, capacity-block); empty when not known.
    usage_classes: tuple[str, ...] = ()

    @property
    def has_gpus(self) -> bool:
        return self.accelerator_kind == "gpu" and bool(self.accelerators)

    @property
    def accelerated(self) -> bool:
        """Whether the type carries accelerators of any kind (GPUs, Neuron devices, FPGAs, media accelerators)."""
        return bool(self.accelerators) or self.other_accelerators


def name_architecture(name: str) -> str:
    family = name.split(".")[0]
    if family in _ARM_FAMILIES or _GRAVITON_FAMILY.match(family):
        return "arm64"
    return "x86_64"


def hardware(name: str) -> Hardware:
    """The facts for ``name``: catalog, else EC2's list shipped with fmcluster, else a cached DescribeInstanceTypes
    answer, else its name's architecture."""
    facts = catalog.instance(name)
    described = None if facts is not None and facts.efa is not None and facts.efa_interfaces is not None \
        else described_type(name)
    if facts is not None:
        efa_interfaces = facts.efa_interfaces
        efa_only = frozenset(facts.efa.efa_only_cards) if facts.efa else frozenset()
        if efa_interfaces is None and facts.efa is not None and described is not None:
            efa_interfaces = from_ec2(described).efa_interfaces
            efa_only = from_ec2(described).efa_only_cards
        return Hardware(
            name=name, source="catalog", architecture=facts.arch, accelerators=facts.accelerators,
            accelerator_kind=facts.accelerator.kind, accelerator_model=facts.accelerator.model,
            accelerator_memory_gib=facts.hbm_gib_per_accelerator, efa_supported=facts.efa is not None,
            network_cards=facts.efa.network_cards if facts.efa else None, efa_interfaces=efa_interfaces,
            nvme_gb=facts.nvme_gb, vcpus=facts.vcpus, memory_gib=facts.memory_gib, efa_only_cards=efa_only,
            usage_classes=tuple(described.get("SupportedUsageClasses") or ()) if described else ())
    if described is not None:
        return from_ec2(described)
    return Hardware(name=name, source="name", architecture=name_architecture(name), accelerators=None,
                    accelerator_kind=None, accelerator_model=None, accelerator_memory_gib=None,
                    efa_supported=None, network_cards=None, efa_interfaces=None, nvme_gb=None)


def from_ec2(described: dict[str, Any]) -> Hardware:
    """Facts from one DescribeInstanceTypes ``InstanceTypes[]`` entry."""
    gpus = described.get("GpuInfo") or {}
    neuron = described.get("NeuronInfo") or {}
    network = described.get("NetworkInfo") or {}
    kind: AcceleratorKind | None = None
    count = 0
    model = None
    memory = None
    for gpu in gpus.get("Gpus", []):
        kind, count = "gpu", count + int(gpu.get("Count", 0))
        model = f"{gpu.get('Manufacturer', '')} {gpu.get('Name', '')}".strip()
        memory = (gpu.get("MemoryInfo") or {}).get("SizeInMiB", 0) / MIB_PER_GIB or None
    for device in neuron.get("NeuronDevices", []):
        name = str(device.get("Name", ""))
        kind = "trainium" if name.lower().startswith("trainium") else "inferentia"
        count, model = count + int(device.get("Count", 0)), name
        memory = (device.get("MemoryInfo") or {}).get("SizeInMiB", 0) / MIB_PER_GIB or None
    efa = bool(network.get("EfaSupported"))
    architectures = (described.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
    return Hardware(
        name=described["InstanceType"], source="ec2",
        architecture="arm64" if "arm64" in architectures else (architectures[0] if architectures else None),
        accelerators=count, accelerator_kind=kind, accelerator_model=model, accelerator_memory_gib=memory,
        efa_supported=efa, network_cards=network.get("MaximumNetworkCards"),
        efa_interfaces=(network.get("EfaInfo") or {}).get("MaximumEfaInterfaces") if efa else None,
        nvme_gb=(described.get("InstanceStorageInfo") or {}).get("TotalSizeInGB"),
        vcpus=(described.get("VCpuInfo") or {}).get("DefaultVCpus"),
        memory_gib=((described.get("MemoryInfo") or {}).get("SizeInMiB") or 0) / MIB_PER_GIB or None,
        efa_only_cards=frozenset(int(card["NetworkCardIndex"]) for card in network.get("NetworkCards") or []
                                 if "efa-only" in (card.get("InterfaceTypes") or [])
                                 and "efa" not in card["InterfaceTypes"]),
        other_accelerators=any(described.get(member) for member in
                               ("FpgaInfo", "InferenceAcceleratorInfo", "MediaAcceleratorInfo")),
        usage_classes=tuple(described.get("SupportedUsageClasses") or ()))


# --- EC2's list of instance types, shipped with fmcluster -----------------------------------------------------


@functools.cache
def shipped_types() -> dict[str, dict[str, Any]]:
    """Every instance type EC2 lists, as trimmed DescribeInstanceTypes entries (scripts/generate_instance_types.py).
    Read once, on first use: ``fmcluster --help`` and a spec of catalog types never open it."""
    data = resources.files(catalog.__name__).joinpath(SHIPPED_FILE).read_bytes()
    return json.loads(gzip.decompress(data))["instance_types"]


def described_type(name: str) -> dict[str, Any] | None:
    """The DescribeInstanceTypes entry for ``name``: EC2's shipped list, else a cached answer from an endpoint."""
    return shipped_types().get(name) or _cache().get(name)


def known_instance_type(name: str) -> bool:
    """Whether ``name`` is a type AWS sells as far as fmcluster knows: the catalog, EC2's shipped list, or an answer
    read from EC2 since."""
    return catalog.instance(name) is not None or described_type(name) is not None


def known_instance_types() -> list[str]:
    """Every name :func:`known_instance_type` accepts (for did-you-mean)."""
    return list(dict.fromkeys([*catalog.instance_names(), *shipped_types(), *_cache()]))


# --- the on-disk cache of DescribeInstanceTypes answers ----------------------------------------------------


def cache_path() -> Path:
    return home() / "cache" / CACHE_FILE


# The cache file read once per state dir (FMCLUSTER_HOME may change between commands run in one process).
_memory: dict[Path, dict[str, dict[str, Any]]] = {}


def _cache() -> dict[str, dict[str, Any]]:
    path = cache_path()
    if path not in _memory:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            _memory[path] = {k: v for k, v in data.get("instance_types", {}).items()
                             if isinstance(v, dict) and v.get("InstanceType") == k}
        except (OSError, ValueError, AttributeError):
            _memory[path] = {}  # no cache, or a damaged one: start again (it only ever saves a lookup)
    return _memory[path]


def remember(described: Iterable[dict[str, Any]]) -> None:
    cache = dict(_cache())
    for entry in described:
        cache[entry["InstanceType"]] = entry
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as handle:
            json.dump({"instance_types": cache}, handle, default=str)
        os.replace(handle.name, path)
    except OSError:
        pass  # a read-only state dir: the facts still serve this command
    _memory[path] = cache


@dataclass
class DiscoveryResult:
    learned: list[str] = field(default_factory=list)  # read from EC2 now
    unknown_to_ec2: list[str] = field(default_factory=list)
    problem: str | None = None  # why EC2 could not be asked


def needs_discovery(names: Iterable[str]) -> list[str]:
    """Types whose facts are neither in the catalog (complete) nor in the cache."""
    wanted = []
    for name in dict.fromkeys(names):
        facts = catalog.instance(name)
        if described_type(name) is not None:
            continue
        if facts is None or (facts.efa is not None and facts.efa_interfaces is None):
            wanted.append(name)
    return wanted


def discover(names: Iterable[str], region: str, ec2: Any = None) -> DiscoveryResult:
    """Read DescribeInstanceTypes for the types fmcluster lacks facts on, when an endpoint is reachable."""
    result = DiscoveryResult()
    wanted = needs_discovery(names)
    if not wanted:
        return result
    if ec2 is None:
        if not aws.target().endpoint_url and not aws.has_credentials(region):
            result.problem = "no AWS endpoint or credentials"
            return result
        ec2 = aws.client("ec2", region, aws.READING)
    from botocore.exceptions import BotoCoreError, ClientError

    found: list[dict[str, Any]] = []
    for name in wanted:  # one by one: one unknown name fails the whole call (InvalidInstanceType)
        try:
            found.extend(ec2.describe_instance_types(InstanceTypes=[name]).get("InstanceTypes", []))
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("InvalidInstanceType", "InvalidParameterValue"):
                result.unknown_to_ec2.append(name)
            else:
                result.problem = f"DescribeInstanceTypes: {code or exc}"
                break
        except BotoCoreError as exc:
            result.problem = f"DescribeInstanceTypes: {exc}"
            break
    if found:
        remember(found)
        result.learned = [entry["InstanceType"] for entry in found]
    return result
