"""What fmcluster knows about one instance type's hardware, and where each fact comes from.

In order: the bundled catalog (``instances.yaml``); else EC2's own ``DescribeInstanceTypes`` answer, read whenever
an endpoint is reachable and cached on disk (``<state dir>/cache/instance-types.json``) so that later offline
commands know it too; else only what the type's name says, which is its architecture (EC2's instance type
naming: a ``g`` right after the generation digit is AWS Graviton, arm64). A catalog entry whose EFA interface
count is unknown (p6e-gb200) takes it from the cached EC2 answer.

Public API::

    hardware("g5.12xlarge")            -> Hardware
    missing_facts(hardware(...))       -> ["GPU count and memory", ...]
    discover(names, region)            -> DiscoveryResult (reads DescribeInstanceTypes, fills the cache)
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fmcluster import aws, catalog
from fmcluster.state import home

Source = Literal["catalog", "ec2", "name"]
AcceleratorKind = Literal["gpu", "trainium", "inferentia"]
MIB_PER_GIB = 1024
CACHE_FILE = "instance-types.json"
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

    @property
    def has_gpus(self) -> bool:
        return self.accelerator_kind == "gpu" and bool(self.accelerators)


def name_architecture(name: str) -> str:
    family = name.split(".")[0]
    if family in _ARM_FAMILIES or _GRAVITON_FAMILY.match(family):
        return "arm64"
    return "x86_64"


def hardware(name: str) -> Hardware:
    """The facts for ``name``: catalog, else cached DescribeInstanceTypes, else its name's architecture."""
    described = _cache().get(name)
    facts = catalog.instance(name)
    if facts is not None:
        efa_interfaces = facts.efa_interfaces
        if efa_interfaces is None and facts.efa is not None and described is not None:
            efa_interfaces = from_ec2(described).efa_interfaces
        return Hardware(
            name=name, source="catalog", architecture=facts.arch, accelerators=facts.accelerators,
            accelerator_kind=facts.accelerator.kind, accelerator_model=facts.accelerator.model,
            accelerator_memory_gib=facts.hbm_gib_per_accelerator, efa_supported=facts.efa is not None,
            network_cards=facts.efa.network_cards if facts.efa else None, efa_interfaces=efa_interfaces,
            nvme_gb=facts.nvme_gb, vcpus=facts.vcpus, memory_gib=facts.memory_gib,
            efa_only_cards=from_ec2(described).efa_only_cards if described is not None else frozenset())
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
                                 and "efa" not in card["InterfaceTypes"]))


def missing_facts(facts: Hardware) -> list[str]:
    """What a plan, health checks and EFA layout would need but fmcluster does not know about this type."""
    if facts.source != "name":
        return []
    return ["GPU/accelerator count and memory", "EFA support", "network cards and EFA interfaces",
            "architecture (guessed from the name)"]


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
        if name in _cache():
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
