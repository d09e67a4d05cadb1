"""What each emulated node's devices and fabric are, for the tools the launcher runs (:mod:`.fake_tools`).

A healthy node has what EC2 publishes for its instance type (the sandbox's DescribeInstanceTypes data,
:mod:`fmcluster_sandbox.instance_catalog`): ``GpuInfo``'s NVIDIA GPU count, and the EFA devices attached to the
instance (what the EFA device plugin counts on the Node: ``vpc.amazonaws.com/efa``). The bus bandwidth of an
all-reduce is never computed: it is a published measurement replayed (kube/data/nccl/SOURCES.md lists them: 2 ×
p5.48xlarge and 2 × p4de.24xlarge). Any other type or node count has none, and its all_reduce_perf fails saying so:
a figure nobody measured would let a smoke test pass or fail on the sandbox's word.

Faults (``POST /_fmcluster/faults``, :class:`fmcluster_sandbox.faults.Faults`), by node name or instance id:
``node_health: {"<node>": {"gpus_missing": n, "efa_devices_missing": n, "never_finishes": true,
"dcgm_failures": [{"gpu": i, "test": "<dcgmi diag test>"}]}}`` and
``slow_link: ["<node a>", "<node b>", factor]``. A model, said here so no one takes it for a measurement: a ring
all-reduce runs at its slowest member's speed, so the measured rows are scaled by the smallest of each node's
remaining share of its EFA devices and, when both ends of the slow link are in the job, the link's factor.
With the ``nccl_replay_larger_runs`` switch a run of more nodes replays its type's 2-node capture (off by default).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from fmcluster_sandbox import instance_catalog

DATA = Path(__file__).parent / "data" / "nccl"
MEASURED = {("p5.48xlarge", 2): "aws-samples-2x-p5.48xlarge.txt",
            ("p4de.24xlarge", 2): "aws-samples-2x-p4de.24xlarge.txt"}
# The CUDA device name nccl-tests printed for an H100 on a p5-class node (tests/data/nccl-tests/2x-h100-full-run.txt,
# the same name nvidia-smi -L prints); other GPUs get "NVIDIA <GpuInfo Name>", EC2's name, with nothing invented.
GPU_NAMES = {"H100": "NVIDIA H100 80GB HBM3"}
EFA = "vpc.amazonaws.com/efa"


@functools.cache
def measured_rows(file: str) -> tuple[tuple[float, ...], ...]:
    """The table rows of a capture: (size, count, time, algbw, busbw) out of place, then (time, algbw, busbw)
    in place."""
    rows = []
    for line in (DATA / file).read_text(encoding="utf-8").splitlines():
        fields = line.split(":", 1)[-1].split() if line[:1].isdigit() else line.split()
        if len(fields) == 13 and fields[0].isdigit():
            rows.append(tuple(float(fields[i]) for i in (0, 1, 5, 6, 7, 9, 10, 11)))
    return tuple(rows)


def instance_id(node: dict[str, Any]) -> str:
    return ((node.get("spec") or {}).get("providerID") or "").rsplit("/", 1)[-1]


def node_faults(faults: Any, node: dict[str, Any]) -> dict[str, Any]:
    health = getattr(faults, "node_health", {}) or {}
    return {**health.get(instance_id(node), {}), **health.get(node["metadata"]["name"], {})}


def node_facts(node: dict[str, Any], faults: Any) -> dict[str, Any]:
    """One node as its tools see it: GPUs, EFA devices, GPU name, whether it hangs, which DCGM tests fail."""
    instance_type = node["metadata"]["labels"].get("node.kubernetes.io/instance-type", "")
    facts = instance_catalog.instance_type(instance_type) or {}
    gpus = [g for g in facts.get("GpuInfo", {}).get("Gpus", []) if g.get("Manufacturer") == "NVIDIA"]
    count = sum(int(g.get("Count", 0)) for g in gpus)
    name = GPU_NAMES.get(gpus[0]["Name"], f"NVIDIA {gpus[0]['Name']}") if gpus else ""
    efa = int((node.get("status") or {}).get("capacity", {}).get(EFA, 0))
    fault = node_faults(faults, node)
    return {"gpus": max(0, count - int(fault.get("gpus_missing", 0))), "gpu_name": name,
            "efa": max(0, efa - int(fault.get("efa_devices_missing", 0))), "healthy_efa": efa,
            "never_finishes": bool(fault.get("never_finishes", False)), "instance_type": instance_type,
            "dcgm_failures": [dict(f) for f in fault.get("dcgm_failures", [])]}


def bandwidth(nodes: list[dict[str, Any]], facts: list[dict[str, Any]], faults: Any) -> dict[str, Any]:
    """The measured rows the job's all_reduce_perf replays and the factor faults scale them by."""
    types = {f["instance_type"] for f in facts}
    key = (next(iter(types)), len(nodes)) if len(types) == 1 else None
    file = MEASURED.get(key) if key else None
    if file is None and key and key[1] > 2 and getattr(faults, "nccl_replay_larger_runs", False):
        file = MEASURED.get((key[0], 2))  # the test asked for it: runs of one size compare, no figure is true
    if file is None:
        what = " + ".join(sorted(types)) or "no node"
        return {"rows": None, "source": None, "factor": 1.0,
                "missing": f"no published all_reduce_perf measurement for {what} x {len(nodes)} node(s); the "
                           "sandbox prints no bandwidth nobody measured (fmcluster_sandbox/kube/data/nccl/"
                           "SOURCES.md lists the ones it has)"}
    factor = min([f["efa"] / f["healthy_efa"] for f in facts if f["healthy_efa"]] or [1.0])
    link = getattr(faults, "slow_link", None)
    if link:
        names = {n["metadata"]["name"] for n in nodes} | {instance_id(n) for n in nodes}
        if link[0] in names and link[1] in names:
            factor = min(factor, float(link[2]))
    return {"rows": [list(row) for row in measured_rows(file)], "source": file, "factor": factor, "missing": None}
