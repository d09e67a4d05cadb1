"""All-reduce bus-bandwidth floors per instance type and node count (``nccl_floors.yaml``), each from a published
run, and the ceiling no floor may pass.

The ceiling. nccl-tests reports all-reduce bus bandwidth as ``busbw = algbw · 2(n−1)/n`` over the n ranks
(NVIDIA/nccl-tests ``doc/PERFORMANCE.md``), a figure that assumes every rank's link carries the traffic. Across N
nodes the GPUs of a node first combine over NVLink, so each node must send only ``2(N−1)/N`` of the buffer over EFA
(the least any all-reduce without in-network reduction can send). So the most a node's EFA line rate L can carry is
``busbw ≤ L · [2(n−1)/n] / [2(N−1)/N]``, and with two nodes that is above L itself: published 2x p5.48xlarge runs
reach 487 GB/s of bus bandwidth on 400 GB/s (3,200 Gbps) of EFA. The EFA line rate alone is therefore not the
bound (it would refuse that published run); this ceiling is. It takes the catalog's EFA Gbps as per direction, which
is what that run needs it to be.

Public API::

    floor("p5.48xlarge", 2)                 -> Floor (raises NoKnownFloor for a type or node count without one)
    ceiling_gb_s("p5.48xlarge", 2)          -> 750.0
    check_floor("p5.48xlarge", 2, 800.0)    -> raises FloorAboveCeiling
"""

from __future__ import annotations

import functools
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field

from fmcluster import catalog
from fmcluster.errors import UsageError

_DATA_FILE = "nccl_floors.yaml"


class NoKnownFloor(UsageError):
    """No published run gives this type (at this node count) a floor: the gate cannot judge its all-reduce."""


class FloorAboveCeiling(UsageError):
    """A floor the hardware cannot reach: every node would fail it."""


class Floor(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_type: str
    nodes: int = Field(ge=2)
    measured_busbw_gb_s: float = Field(gt=0)
    floor_gb_s: float = Field(gt=0)
    run: str
    source: str


class _File(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    floors: list[Floor]


def ceiling_gb_s(instance_type: str, nodes: int) -> float:
    """The most all-reduce bus bandwidth ``nodes`` of the type can show over EFA (GB/s); raises NoKnownFloor when
    the catalog lacks the type's EFA bandwidth or accelerator count."""
    facts = catalog.instance(instance_type)
    if facts is None or facts.efa_gbps is None or not facts.accelerators:
        raise NoKnownFloor(f"no known floor for {instance_type}: the catalog has no EFA bandwidth or accelerator "
                           "count for it")
    if nodes < 2:
        raise ValueError("an all-reduce crosses EFA only with two or more nodes")
    ranks = nodes * facts.accelerators
    line_rate = facts.efa_gbps / 8  # Gbit/s → GB/s, nccl-tests' unit
    return line_rate * (2 * (ranks - 1) / ranks) / (2 * (nodes - 1) / nodes)


def check_floor(instance_type: str, nodes: int, gb_s: float) -> None:
    """Refuse a floor (the catalog's or one a user gives) above what the hardware can carry."""
    top = ceiling_gb_s(instance_type, nodes)
    if gb_s > top:
        facts = catalog.instance(instance_type)
        gbps = facts.efa_gbps if facts is not None else None
        raise FloorAboveCeiling(
            f"an all-reduce floor of {gb_s:g} GB/s for {nodes}x {instance_type} is above what the hardware can "
            f"carry: EFA {gbps:,.0f} Gbps per node allows at most {top:.1f} GB/s of bus bandwidth across "
            f"{nodes} nodes; use a floor at or below it")


def load(text: str) -> dict[tuple[str, int], Floor]:
    """Parse and check a floors file: every entry's floor at or below its measurement, and both at or below the
    ceiling; one entry per (type, node count)."""
    entries: dict[tuple[str, int], Floor] = {}
    for entry in _File.model_validate(yaml.safe_load(text)).floors:
        key = (entry.instance_type, entry.nodes)
        if key in entries:
            raise ValueError(f"two floors for {entry.nodes}x {entry.instance_type}")
        if entry.floor_gb_s > entry.measured_busbw_gb_s:
            raise ValueError(f"floor {entry.floor_gb_s:g} GB/s for {entry.nodes}x {entry.instance_type} is above "
                             f"its own measurement ({entry.measured_busbw_gb_s:g} GB/s)")
        try:
            check_floor(entry.instance_type, entry.nodes, entry.measured_busbw_gb_s)
            check_floor(entry.instance_type, entry.nodes, entry.floor_gb_s)
        except UsageError as err:  # in the shipped file it is fmcluster's mistake, not the user's
            raise ValueError(f"{_DATA_FILE}: {err}") from None
        entries[key] = entry
    return entries


@functools.cache
def floors() -> dict[tuple[str, int], Floor]:
    return load(resources.files(catalog.__name__).joinpath(_DATA_FILE).read_text(encoding="utf-8"))


def floor(instance_type: str, nodes: int) -> Floor:
    known = floors()
    if (instance_type, nodes) in known:
        return known[(instance_type, nodes)]
    counts = sorted(n for (name, n) in known if name == instance_type)
    if not counts:
        raise NoKnownFloor(f"no known floor for {instance_type}: no published all-reduce run over EFA for it")
    raise NoKnownFloor(f"no known floor for {nodes}x {instance_type}: published runs cover "
                       f"{', '.join(map(str, counts))} node(s); a floor from another node count does not carry "
                       "over (bus bandwidth falls as nodes are added)")
