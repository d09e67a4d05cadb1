"""The one cost model: what a cluster costs per hour at its queues' maximum (``plan``, ``create``, ``destroy``
and ``status`` all read :func:`spec_cost`), and what the instances AWS runs now cost (``status``).

Each queue is priced at its capacity type's rate (:mod:`fmcluster.pricing.rates`: a Capacity Block at its own
rate, never On-Demand; an ODCR, Spot or On-Demand queue at the On-Demand rate), the head or login node and the
system nodes at On-Demand, a managed controller at its fee (EKS) or as unknown (PCS), the file systems fmcluster
creates (:mod:`fmcluster.pricing.parts`: FSx and EFS, unknown) and the network fmcluster creates at its NAT gateway
and public IPv4 address (:mod:`fmcluster.pricing.network`). A part with no price is named in ``unknown``, never
dropped. Every dollar figure is rounded once, by :func:`round_usd`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, get_args

from fmcluster.pricing.network import NETWORK_NOTE, nat_gateway_usd_per_hour, network_usd_per_hour
from fmcluster.pricing.parts import UNPRICED_RESOURCES, CostPart, storage_parts
from fmcluster.pricing.rates import PriceBook, QueuePrice
from fmcluster.spec import decisions
from fmcluster.spec.backend_rules import backend_rules
from fmcluster.spec.field_types import Backend
from fmcluster.spec.models import Spec, max_nodes
from fmcluster.spec.networking import creates_network

#: Decimal places of every dollar figure, so that plan and status agree to the cent and beyond.
USD_DECIMALS = 4
# The instances' queue names for the head node (ParallelCluster) and the login node (PCS): On-Demand.
HEAD_QUEUES = ("(head node)", "login")
BACKENDS = get_args(Backend)
# The name the cost model gives the nodes a backend runs for cluster software (EKS's system node group).
SYSTEM_NODES = "system"


def round_usd(value: float) -> float:
    return round(value, USD_DECIMALS)


@dataclass(frozen=True)
class QueueCost:
    name: str
    instance_type: str
    nodes: int  # the queue's maximum
    price: QueuePrice  # per instance-hour
    usd_per_hour: float | None  # at the maximum; None when the type has no price


@dataclass(frozen=True)
class SpecCost:
    """The per-part breakdown ``plan`` shows, and its total."""

    queues: list[QueueCost]
    head_node_instance_type: str | None  # None where the backend runs no head or login node
    head_node: QueuePrice | None
    compute_usd_per_hour: float | None
    storage_usd_per_hour: float | None
    network_usd_per_hour: float | None
    unknown: list[str]  # the parts with no price, left out of the total
    usd_per_hour: float | None  # the known parts; None when no node is priced
    # A managed control plane's hourly fee (EKS); 0 where the backend bills none.
    control_plane_usd_per_hour: float = 0.0
    # The nodes the backend runs for cluster software (EKS's system node group, On-Demand); None where none.
    system_nodes: QueueCost | None = None
    # Every part besides the queues, priced or not, each with its rate's source or why it has none.
    parts: list[CostPart] = field(default_factory=list)


def spec_cost(spec: Spec, prices: PriceBook | None = None) -> SpecCost:
    """What ``spec`` costs per hour with every queue at its maximum, priced from ``prices`` (bundled by
    default)."""
    prices = prices or PriceBook(spec.region)
    queues = []
    for queue in spec.queues:
        price = prices.queue_price(queue)
        nodes = max_nodes(queue)
        total = round_usd(price.usd_per_hour * nodes) if price.usd_per_hour is not None else None
        queues.append(QueueCost(queue.name, queue.instance_type, nodes, price, total))
    head_type = decisions.head_node_type(spec)
    head = prices.instance_price(head_type) if head_type else None
    rules = backend_rules(spec.backend)
    controller = rules.controller(spec)
    control_plane = (controller.usd_per_hour or 0.0) if controller is not None else 0.0
    system = None
    if (system_group := rules.system_nodes(spec)) is not None:
        system_type, count = system_group
        price = prices.instance_price(system_type, "on-demand")
        system = QueueCost(SYSTEM_NODES, system_type, count, price,
                           round_usd(price.usd_per_hour * count) if price.usd_per_hour is not None else None)
    unknown = [f"queue {q.name} ({q.instance_type})" for q in queues if q.usd_per_hour is None]
    if head is not None and head.usd_per_hour is None:
        unknown.append(f"head node ({head_type})")
    if system is not None and system.usd_per_hour is None:
        unknown.append(f"system nodes ({system.instance_type})")
    if controller is not None and controller.usd_per_hour is None:
        unknown.append(controller.name)
    stored = storage_parts(spec)
    unknown += [part.name for part in stored if part.usd_per_hour is None]
    network = network_usd_per_hour(spec)
    if network is None:
        unknown.append(f"NAT gateway of the created network (no bundled price for {spec.region})")
    known = [q.usd_per_hour for q in queues if q.usd_per_hour is not None]
    compute = round_usd(sum(known)) if known else None
    priced_storage = [part.usd_per_hour for part in stored if part.usd_per_hour is not None]
    storage = round_usd(sum(priced_storage)) if priced_storage else None
    nodes = [p for p in (compute, head.usd_per_hour if head else None, storage,
                         system.usd_per_hour if system else None) if p is not None]
    # The network and the control plane alone are no total: with no node priced, the total stays unknown.
    total = round_usd(sum(nodes) + (network or 0.0) + control_plane) if nodes else None
    parts = _parts(spec, head_type, head, system, controller, stored, network)
    return SpecCost(queues, head_type, head, compute, storage, network, unknown, total, control_plane, system, parts)


def _parts(spec: Spec, head_type: str | None, head: QueuePrice | None, system: QueueCost | None,
           controller: CostPart | None, stored: list[CostPart], network: float | None) -> list[CostPart]:
    """The breakdown besides the queues, in the order the plan's table shows it."""
    parts = []
    if head_type is not None and head is not None:
        parts.append(CostPart(f"head node ({head_type})", head.usd_per_hour, head.note))
    if system is not None:
        parts.append(CostPart(f"system nodes ({system.nodes} × {system.instance_type})", system.usd_per_hour,
                              system.price.note))
    if controller is not None:
        parts.append(controller)
    parts += stored
    if creates_network(spec):
        parts.append(CostPart("NAT gateway + public IPv4", network,
                              NETWORK_NOTE if network is not None else
                              f"no bundled NAT gateway price for {spec.region} (Amazon VPC pricing)"))
    return parts


def usd_per_hour_max(spec: Spec) -> float | None:
    """``plan``'s ``usd_per_hour``: the known parts at the queues' maximum, at bundled prices."""
    return spec_cost(spec).usd_per_hour


def _launched(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, str) and value:
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)
    return None


def _hours(since: Any, now: dt.datetime) -> float:
    started = _launched(since)
    return max(0.0, (now - started).total_seconds() / 3600) if started else 0.0


def live_cost(report: dict[str, Any], spec: Spec | None = None, now: dt.datetime | None = None) -> dict[str, Any]:
    """Cost fields for ``status``: dollars so far and per hour now, from the instances running (at their
    queue's capacity rate) and the NAT gateways alive; per hour at the maximum from :func:`spec_cost` when the
    spec is known (the figure ``plan`` shows), else from the queues AWS runs at On-Demand rates."""
    now = now or dt.datetime.now(dt.timezone.utc)
    prices = PriceBook(report.get("region") or (spec.region if spec else ""))
    capacity = {q.name: q.capacity.type for q in spec.queues} if spec else {}
    so_far = per_hour_now = 0.0
    unpriced: set[str] = set()
    per_queue: dict[str, dict[str, float]] = {}
    for instance in report.get("instances") or []:
        if instance.get("state") not in ("pending", "running"):
            continue
        queue_name = instance.get("queue") or ""
        instance_type = str(instance.get("instance_type"))
        hourly = prices.instance_price(instance_type, capacity.get(queue_name, "on-demand")).usd_per_hour
        if hourly is None:
            unpriced.add(instance_type)
            continue
        hours = _hours(instance.get("launch_time"), now)
        so_far += hourly * hours
        per_hour_now += hourly
        queue = per_queue.setdefault(queue_name, {"usd_so_far": 0.0, "usd_per_hour_now": 0.0})
        queue["usd_so_far"] += hourly * hours
        queue["usd_per_hour_now"] += hourly
    nat = nat_gateway_usd_per_hour(report.get("region"))
    gateways = _live_nat_gateways(report)
    if gateways and nat is None:
        unpriced.add(f"NAT gateway in {report.get('region')}")
    for gateway in gateways if nat is not None else []:
        # A NAT gateway bills while it exists, from its CreateTime.
        so_far += nat * _hours(gateway.get("created"), now)
        per_hour_now += nat
    # A managed control plane (EKS) bills by the hour from the cluster's creation.
    control_plane = report.get("control_plane_usd_per_hour") or 0.0
    if control_plane:
        so_far += control_plane * _hours(report.get("created"), now)
        per_hour_now += control_plane
    billing_unpriced = unpriced_billing(report, spec)
    unpriced.update(billing_unpriced)
    if spec is not None:
        cost = spec_cost(spec, prices)
        per_hour_max = cost.usd_per_hour
        # a part the live list already names with its id is not named twice
        unpriced.update(u for u in cost.unknown if not any(b.startswith(u) for b in billing_unpriced))
        at_max = "at the maximum as `plan` computes it from the spec"
    else:
        per_hour_max = _reported_max(report, prices, unpriced) + (nat or 0.0) * len(gateways)
        at_max = "at the maximum from the queues AWS runs (no spec: On-Demand rates)"
    return {"usd_so_far": round_usd(so_far), "usd_per_hour_now": round_usd(per_hour_now),
            "usd_per_hour_max": round_usd(per_hour_max) if per_hour_max is not None else None,
            "cost_by_queue": {q: {k: round_usd(v) for k, v in c.items()} for q, c in sorted(per_queue.items())},
            "cost_unpriced_now": billing_unpriced,
            "cost_unpriced": sorted(unpriced),
            "cost_basis": f"bundled prices as of {prices.as_of} (Capacity Block queues at their block rate, or "
                          "unpriced where none is bundled; the rest On-Demand), from instance launch times (a "
                          f"created NAT gateway's and a control plane's from their creation); {at_max}"
                          + (f"; no price for {', '.join(sorted(unpriced))} (left out of these figures)"
                             if unpriced else "")}


def unpriced_billing(report: dict[str, Any], spec: Spec | None) -> list[str]:
    """What exists in AWS now and bills by the hour with no bundled price: the file systems made for the cluster,
    and a managed controller without a bundled rate (PCS) while the cluster is there."""
    found = [r for r in report.get("resources") or [] if str(r.get("status") or "").lower() != "deleted"]
    items = [f"{UNPRICED_RESOURCES[r['type']]} {r.get('id')}" for r in found if r.get("type") in UNPRICED_RESOURCES]
    backend = spec.backend if spec is not None else report.get("backend")
    if backend in BACKENDS and any(r.get("type") == "cluster" for r in found):
        controller = backend_rules(backend).controller(spec)
        if controller is not None and controller.usd_per_hour is None:
            items.append(controller.name)
    return items


def _reported_max(report: dict[str, Any], prices: PriceBook, unpriced: set[str]) -> float:
    """Without a spec: each reported queue's dearest type at its maximum, and the head or login node running."""
    total = 0.0
    for queue in report.get("queues") or []:
        types = [t.strip() for t in str(queue.get("instance_type") or "").split(",") if t.strip()]
        rates = {t: prices.instance_price(t).usd_per_hour for t in types}
        unpriced.update(t for t, rate in rates.items() if rate is None)
        total += max((rate or 0.0 for rate in rates.values()), default=0.0) * (queue.get("max") or 0)
    for instance in report.get("instances") or []:
        if instance.get("queue") in HEAD_QUEUES and instance.get("state") in ("pending", "running"):
            total += prices.instance_price(str(instance.get("instance_type"))).usd_per_hour or 0.0
    return total


def _live_nat_gateways(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in report.get("resources") or [] if r.get("type") == "nat_gateway"
            and str(r.get("status", "")).lower() in ("pending", "available")]
