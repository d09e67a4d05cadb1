"""What a cluster costs: per hour at the queues' maximum (``plan``, ``create``), and from the instances AWS
runs now (``status``): dollars per hour now and dollars so far since each instance launched.

Both use the catalog's bundled On-Demand prices, so ``plan`` and ``status`` agree on the price of the same
nodes. What AWS bills can differ (Savings Plans, Capacity Block fees, Spot); the figures say their basis.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fmcluster import catalog
from fmcluster.spec.models import Spec, max_nodes


def price(instance_type: str | None) -> float | None:
    facts = catalog.instance(instance_type) if instance_type else None
    return facts.usd_per_hour if facts is not None else None


def usd_per_hour_max(spec: Spec) -> float | None:
    """Compute at every queue's maximum (the head or login node is priced where the catalog has it)."""
    total = 0.0
    for queue in spec.queues:
        total += (price(queue.instance_type) or 0.0) * max_nodes(queue)
    total += price(spec.head_node.instance_type) or 0.0
    from fmcluster.render.network import network_usd_per_hour

    total += network_usd_per_hour(spec) or 0.0  # the NAT gateway of a network fmcluster creates
    return total or None


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


def live_cost(report: dict[str, Any], now: dt.datetime | None = None) -> dict[str, Any]:
    """Cost fields for ``status``, from the report's instances (with launch times) and queues."""
    now = now or dt.datetime.now(dt.timezone.utc)
    so_far = 0.0
    per_hour_now = 0.0
    unpriced: set[str] = set()
    per_queue: dict[str, dict[str, float]] = {}
    for instance in report.get("instances") or []:
        if instance.get("state") not in ("pending", "running"):
            continue
        hourly = price(instance.get("instance_type"))
        if hourly is None:
            unpriced.add(str(instance.get("instance_type")))
            continue
        launched = _launched(instance.get("launch_time"))
        hours = max(0.0, (now - launched).total_seconds() / 3600) if launched else 0.0
        so_far += hourly * hours
        per_hour_now += hourly
        queue = per_queue.setdefault(instance.get("queue") or "", {"usd_so_far": 0.0, "usd_per_hour_now": 0.0})
        queue["usd_so_far"] += hourly * hours
        queue["usd_per_hour_now"] += hourly
    per_hour_max = 0.0
    for queue in report.get("queues") or []:
        types = [t.strip() for t in str(queue.get("instance_type") or "").split(",") if t.strip()]
        hourly = max((price(t) or 0.0 for t in types), default=0.0)
        unpriced.update(t for t in types if price(t) is None)
        per_hour_max += hourly * (queue.get("max") or 0)
    # The head or login node runs whatever the queues do.
    per_hour_max += sum(price(i.get("instance_type")) or 0.0 for i in report.get("instances") or []
                        if i.get("queue") in ("(head node)", "login") and i.get("state") in ("pending", "running"))
    # A NAT gateway fmcluster created bills while it exists, from its CreateTime.
    nat = _nat_gateway_usd_per_hour(report.get("region"))
    for gateway in _live_nat_gateways(report):
        if nat is None:
            unpriced.add(f"NAT gateway in {report.get('region')}")
            break
        created = _launched(gateway.get("created"))
        so_far += nat * max(0.0, (now - created).total_seconds() / 3600) if created else 0.0
        per_hour_now += nat
        per_hour_max += nat
    return {"usd_so_far": round(so_far, 2), "usd_per_hour_now": round(per_hour_now, 2),
            "usd_per_hour_max": round(per_hour_max, 2),
            "cost_by_queue": {q: {k: round(v, 2) for k, v in c.items()} for q, c in sorted(per_queue.items())},
            "cost_basis": f"bundled On-Demand prices as of {catalog.price_as_of()}, from instance launch times "
                          "(a created NAT gateway's from its creation)"
                          + (f"; no price for {', '.join(sorted(unpriced))}" if unpriced else "")}


def _live_nat_gateways(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in report.get("resources") or [] if r.get("type") == "nat_gateway"
            and str(r.get("status", "")).lower() in ("pending", "available")]


def _nat_gateway_usd_per_hour(region: str | None) -> float | None:
    """One NAT gateway with its public IPv4 address; None when the region's price is not bundled."""
    from fmcluster.render.network import NAT_GATEWAY_PRICED_REGIONS, NAT_GATEWAY_USD_PER_HOUR, PUBLIC_IPV4_USD_PER_HOUR

    if region not in NAT_GATEWAY_PRICED_REGIONS:
        return None
    return NAT_GATEWAY_USD_PER_HOUR + PUBLIC_IPV4_USD_PER_HOUR
