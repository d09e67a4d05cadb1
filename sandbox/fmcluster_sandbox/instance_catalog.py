"""EC2 instance types as AWS publishes them: moto's DescribeInstanceTypes snapshot plus the types it lacks.

moto 5.2.5 carries AWS's own DescribeInstanceTypes and DescribeInstanceTypeOfferings data for every type
fmcluster's README names except ``p6e-gb200.36xlarge`` (sold only as part of an EC2 UltraServer, in the
Dallas Local Zone). That type is added here, each fact with where it comes from; values no AWS source
states are left out rather than guessed. The sandbox's EC2 rules (``ec2_launch``) and Capacity Block
offerings (``capacity_blocks``) read instance facts through :func:`instance_type` only.
"""

from __future__ import annotations

import copy
from typing import Any

# p6e-gb200.36xlarge, from: the EKS user guide "ml-eks-nvidia-ultraserver" (4 NVIDIA Blackwell GPUs, only
# as part of P6e-GB200 UltraServers); the EC2 accelerated-computing specifications as compiled in
# /work/shared/reference/instance-facts.yaml (144 vCPUs, 960 GiB, NVIDIA Grace arm64, 17 network cards,
# 1,600 Gbps EFA); aws-parallelcluster 3.16.1 pcluster/templates/queues_stack.py (card 0 carries no EFA:
# MaximumEfaInterfaces < MaximumNetworkCards; odd cards take only efa-only interfaces, even cards efa as
# well; every secondary card gets one EFA interface, so 16 in all). Per-card interface limits and
# bandwidths follow the same facts file (card 0 ~100 Gbps ENA, odd cards 400 Gbps, even cards 200 Gbps).
_GB200_CARDS = [
    {"NetworkCardIndex": 0, "InterfaceTypes": ["interface"], "MaximumNetworkInterfaces": 2,
     "BaselineBandwidthInGbps": 100.0, "PeakBandwidthInGbps": 100.0, "NetworkPerformance": "100 Gigabit"},
] + [
    {"NetworkCardIndex": card,
     "InterfaceTypes": ["efa-only"] if card % 2 else ["interface", "efa", "efa-only"],
     "MaximumNetworkInterfaces": 2,
     "BaselineBandwidthInGbps": 400.0 if card % 2 else 200.0,
     "PeakBandwidthInGbps": 400.0 if card % 2 else 200.0,
     "NetworkPerformance": "400 Gigabit" if card % 2 else "200 Gigabit"}
    for card in range(1, 17)
]

EXTRA_INSTANCE_TYPES: dict[str, dict[str, Any]] = {
    "p6e-gb200.36xlarge": {
        "InstanceType": "p6e-gb200.36xlarge",
        "CurrentGeneration": True,
        "FreeTierEligible": False,
        "SupportedUsageClasses": ["capacity-block"],  # Capacity Blocks only (UltraServers)
        "SupportedRootDeviceTypes": ["ebs"],
        "SupportedVirtualizationTypes": ["hvm"],
        "BareMetal": False,
        "Hypervisor": "nitro",
        "ProcessorInfo": {"SupportedArchitectures": ["arm64"], "Manufacturer": "NVIDIA"},
        "VCpuInfo": {"DefaultVCpus": 144},
        "MemoryInfo": {"SizeInMiB": 960 * 1024},
        "GpuInfo": {
            "Gpus": [{"Name": "GB200", "Manufacturer": "NVIDIA", "Count": 4, "MemoryInfo": {"SizeInMiB": 185 * 1024}}],
            "TotalGpuMemoryInMiB": 4 * 185 * 1024,
        },
        "NetworkInfo": {
            "NetworkPerformance": "1600 Gigabit",
            "MaximumNetworkCards": 17,
            "MaximumNetworkInterfaces": 34,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": _GB200_CARDS,
            "EfaSupported": True,
            "EfaInfo": {"MaximumEfaInterfaces": 16},
            "EnaSupport": "required",
            "Ipv6Supported": True,
        },
        "PlacementGroupInfo": {"SupportedStrategies": ["cluster"]},
        "SupportedInRegion": True,
    },
}

# Where AWS sells it: the US East (Dallas) Local Zone of us-east-1 (instance-facts.yaml, "purchase").
EXTRA_OFFERINGS: dict[str, dict[str, list[str]]] = {
    "p6e-gb200.36xlarge": {"us-east-1": ["us-east-1-dfw-2a"]},
}
# AWS's zone ids for the zones above (DescribeInstanceTypeOfferings LocationType=availability-zone-id).
ZONE_IDS = {"us-east-1-dfw-2a": "use1-dfw2-az1"}

_installed = False


def install() -> None:
    """Add the types above to moto's DescribeInstanceTypes/DescribeInstanceTypeOfferings data (idempotent)."""
    global _installed
    if _installed:
        return
    from moto.ec2.models.instance_types import (
        INSTANCE_TYPE_OFFERINGS,
        INSTANCE_TYPES,
        InstanceType,
        InstanceTypeBackend,
    )

    for name, facts in EXTRA_INSTANCE_TYPES.items():
        if name not in INSTANCE_TYPES:
            INSTANCE_TYPES[name] = copy.deepcopy(facts)
            InstanceTypeBackend.instance_types.append(InstanceType(name))  # DescribeInstanceTypes lists these
    for name, regions in EXTRA_OFFERINGS.items():
        for region, zones in regions.items():
            by_region = INSTANCE_TYPE_OFFERINGS["region"].setdefault(region, [])
            if not any(o["InstanceType"] == name for o in by_region):
                by_region.append({"InstanceType": name, "Location": region, "LocationType": "region"})
            for zone in zones:
                INSTANCE_TYPE_OFFERINGS["availability-zone"].setdefault(region, []).append(
                    {"InstanceType": name, "Location": zone, "LocationType": "availability-zone"})
                INSTANCE_TYPE_OFFERINGS["availability-zone-id"].setdefault(region, []).append(
                    {"InstanceType": name, "Location": ZONE_IDS[zone], "LocationType": "availability-zone-id"})
    _installed = True


def instance_type(name: str) -> dict[str, Any] | None:
    """DescribeInstanceTypes facts for ``name``, or None when EC2 has no such type."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    install()
    return INSTANCE_TYPES.get(name)


def offered_zones(region: str, name: str) -> set[str]:
    """The Availability (and Local) Zones of ``region`` where EC2 sells ``name``."""
    from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS

    install()
    return {o["Location"] for o in INSTANCE_TYPE_OFFERINGS["availability-zone"].get(region, [])
            if o["InstanceType"] == name}


def network_cards(facts: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {card["NetworkCardIndex"]: card for card in facts.get("NetworkInfo", {}).get("NetworkCards", [])}


def has_nvidia_gpus(facts: dict[str, Any]) -> bool:
    return any(gpu.get("Manufacturer") == "NVIDIA" for gpu in facts.get("GpuInfo", {}).get("Gpus", []))


def architectures(facts: dict[str, Any]) -> list[str]:
    return list(facts.get("ProcessorInfo", {}).get("SupportedArchitectures", []))
