"""Write fmcluster/catalog/ec2_instance_types.json.gz: the facts of every instance type EC2 lists, for offline use.

Source: the DescribeInstanceTypes answers that moto publishes (``moto/ec2/resources/instance_types.json.gz`` of the
installed moto, AWS's own data captured by moto's maintainers; about 1,400 types), each trimmed to the members
fmcluster reads (:func:`fmcluster.catalog.hardware.from_ec2`): vCPUs, memory, architectures, GPUs (count, maker,
model, memory), Neuron devices, FPGA / inference / media accelerators (as present or not), instance store, the
network cards and their interface types, EFA support and the most EFA interfaces, the usage classes. Types moto
lacks (p6e-gb200.36xlarge, sold only in UltraServers) come from fmcluster's curated catalog
(fmcluster/catalog/instances.yaml), in the same shape. Where both have a type, fmcluster reads the curated catalog
first at run time (:func:`fmcluster.catalog.hardware.hardware`), so the catalog wins.

Run from the repository root after moto (or the catalog) changes, and commit the result:

    .venv/bin/python scripts/generate_instance_types.py

The output is deterministic (sorted keys, gzip without a timestamp), so an unchanged source gives the same bytes.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

OUTPUT = Path(__file__).resolve().parent.parent / "fmcluster" / "catalog" / "ec2_instance_types.json.gz"
MIB_PER_GIB = 1024
# The members of an InstanceTypes[] entry that say the type carries an accelerator of some kind.
ACCELERATOR_MEMBERS = ("GpuInfo", "NeuronInfo", "FpgaInfo", "InferenceAcceleratorInfo", "MediaAcceleratorInfo")


def _device(device: dict[str, Any]) -> dict[str, Any]:
    kept = {k: device[k] for k in ("Count", "Manufacturer", "Name") if k in device}
    if (device.get("MemoryInfo") or {}).get("SizeInMiB"):
        kept["MemoryInfo"] = {"SizeInMiB": device["MemoryInfo"]["SizeInMiB"]}
    return kept


def trim(entry: dict[str, Any]) -> dict[str, Any]:
    """One DescribeInstanceTypes entry, reduced to what fmcluster reads."""
    network = entry.get("NetworkInfo") or {}
    out: dict[str, Any] = {
        "InstanceType": entry["InstanceType"],
        "VCpuInfo": {"DefaultVCpus": (entry.get("VCpuInfo") or {}).get("DefaultVCpus")},
        "MemoryInfo": {"SizeInMiB": (entry.get("MemoryInfo") or {}).get("SizeInMiB")},
        "ProcessorInfo": {"SupportedArchitectures": (entry.get("ProcessorInfo") or {}).get("SupportedArchitectures")
                          or []},
        "SupportedUsageClasses": entry.get("SupportedUsageClasses") or [],
        "NetworkInfo": {"EfaSupported": bool(network.get("EfaSupported")),
                        "MaximumNetworkCards": network.get("MaximumNetworkCards")},
    }
    if network.get("EfaSupported"):
        out["NetworkInfo"]["EfaInfo"] = {"MaximumEfaInterfaces": (network.get("EfaInfo") or {}).get(
            "MaximumEfaInterfaces")}
        out["NetworkInfo"]["NetworkCards"] = [
            {"NetworkCardIndex": card["NetworkCardIndex"], "InterfaceTypes": card.get("InterfaceTypes") or []}
            for card in network.get("NetworkCards") or []]
    gpus = (entry.get("GpuInfo") or {}).get("Gpus")
    if gpus:
        out["GpuInfo"] = {"Gpus": [_device(g) for g in gpus]}
    neuron = (entry.get("NeuronInfo") or {}).get("NeuronDevices")
    if neuron:
        out["NeuronInfo"] = {"NeuronDevices": [_device(d) for d in neuron]}
    for member, key in (("FpgaInfo", "Fpgas"), ("InferenceAcceleratorInfo", "Accelerators"),
                        ("MediaAcceleratorInfo", "Accelerators")):
        devices = (entry.get(member) or {}).get(key)
        if devices:
            out[member] = {key: [_device(d) for d in devices]}
    storage = (entry.get("InstanceStorageInfo") or {}).get("TotalSizeInGB")
    if storage:
        out["InstanceStorageInfo"] = {"TotalSizeInGB": storage}
    return out


def from_catalog(name: str, facts: Any) -> dict[str, Any]:
    """A curated catalog entry (fmcluster.catalog.InstanceFacts) in DescribeInstanceTypes' shape."""
    efa = facts.efa
    out: dict[str, Any] = {
        "InstanceType": name,
        "VCpuInfo": {"DefaultVCpus": facts.vcpus},
        "MemoryInfo": {"SizeInMiB": int(facts.memory_gib * MIB_PER_GIB)},
        "ProcessorInfo": {"SupportedArchitectures": [facts.arch]},
        "SupportedUsageClasses": ["capacity-block"] if facts.price.usd_per_hour is None else ["on-demand"],
        "NetworkInfo": {"EfaSupported": efa is not None, "MaximumNetworkCards": efa.network_cards if efa else 1},
    }
    if efa is not None:
        out["NetworkInfo"]["EfaInfo"] = {"MaximumEfaInterfaces": efa.max_interfaces}
        out["NetworkInfo"]["NetworkCards"] = [
            {"NetworkCardIndex": card, "InterfaceTypes": ["efa-only"] if card in efa.efa_only_cards
             else ["interface", "efa", "efa-only"] if card else ["interface"]}
            for card in range(efa.network_cards)]
    device = {"Count": facts.accelerator.count, "Manufacturer": "NVIDIA" if facts.accelerator.vendor == "nvidia"
              else "AWS", "Name": facts.accelerator.model,
              "MemoryInfo": {"SizeInMiB": int(facts.hbm_gib_per_accelerator * MIB_PER_GIB)}}
    if facts.accelerator.kind == "gpu":
        out["GpuInfo"] = {"Gpus": [device]}
    else:
        out["NeuronInfo"] = {"NeuronDevices": [device]}
    if facts.nvme_gb:
        out["InstanceStorageInfo"] = {"TotalSizeInGB": facts.nvme_gb}
    return out


def build() -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from fmcluster import catalog

    # Found without importing moto (its import is slow); the file sits in the installed package.
    moto = importlib.util.find_spec("moto")
    if moto is None or moto.origin is None:
        raise SystemExit("moto is not installed: pip install 'moto[server]' (the sandbox extra has it)")
    moto_file = Path(moto.origin).parent / "ec2" / "resources" / "instance_types.json.gz"
    published = json.loads(gzip.decompress(moto_file.read_bytes()))
    types = {name: trim(entry) for name, entry in published.items()}
    curated_only = [name for name in catalog.instance_names() if name not in types]
    for name in curated_only:
        types[name] = from_catalog(name, catalog.instance(name))
    return {"source": f"moto {metadata.version('moto')} moto/ec2/resources/instance_types.json.gz "
                      "(AWS DescribeInstanceTypes, as moto publishes it)",
            "curated": {"source": "fmcluster/catalog/instances.yaml", "types": sorted(curated_only)},
            "instance_types": dict(sorted(types.items()))}


def main() -> int:
    data = json.dumps(build(), sort_keys=True, separators=(",", ":")).encode()
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0) as handle:
        handle.write(data)
    OUTPUT.write_bytes(buffer.getvalue())
    print(f"wrote {OUTPUT} ({len(buffer.getvalue()):,} bytes, {len(data):,} uncompressed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
