"""The plan report's numbers: a spec in, a :class:`PlanReport` out. Pure arithmetic on the catalog.

Nothing in ``fmcluster/plan`` that computes prints, calls AWS or reads files; prices come in through a
:class:`PriceBook` so that the same computation serves bundled and live prices. The parts: the assumptions
(``assumptions``), per-queue and storage figures (``hardware_figures``), the workload (``workload``), the cost
(here) and the verdict (``verdict``), gathered into the report's shape (``report_model``) by
:func:`plan_report`.
"""

from __future__ import annotations

from fmcluster.plan.hardware_figures import queue_figures, storage_figures
from fmcluster.plan.prices import PriceBook, QueuePrice
from fmcluster.plan.report_model import CostFigures, PlanReport, PricesInfo, QueueFigures
from fmcluster.plan.verdict import verdict
from fmcluster.plan.workload import checkpoint_curve, workload_figures
from fmcluster.spec.models import Spec

# --- cost -------------------------------------------------------------------------------------------


def cost_figures(spec: Spec, queues: list[QueueFigures], head: QueuePrice) -> CostFigures:
    unknown = [f"queue {q.name} ({q.instance_type})" for q in queues if q.usd_per_hour is None]
    known = [q.usd_per_hour for q in queues if q.usd_per_hour is not None]
    if head.usd_per_hour is None:
        unknown.append(f"head node ({spec.head_node.instance_type})")
    if spec.storage.lustre is not None:
        unknown.append("FSx for Lustre")
    if spec.storage.home is not None:
        unknown.append("FSx for OpenZFS /home" if spec.storage.home.type == "openzfs" else "EFS /home")
    from fmcluster.render.network import network_usd_per_hour

    network = network_usd_per_hour(spec)
    if network is None:
        unknown.append(f"NAT gateway of the created network (no bundled price for {spec.region})")
    return CostFigures(
        compute_usd_per_hour=round(sum(known), 4) if known else None,
        head_node_instance_type=spec.head_node.instance_type,
        head_node_usd_per_hour=head.usd_per_hour,
        storage_usd_per_hour=None,
        unknown=unknown,
        network_usd_per_hour=network,
    )


def _total(cost: CostFigures) -> float | None:
    parts = [
        p
        for p in (cost.compute_usd_per_hour, cost.head_node_usd_per_hour, cost.storage_usd_per_hour)
        if p is not None
    ]
    # The network alone is no total: with no node priced, the total stays unknown.
    return round(sum(parts) + (cost.network_usd_per_hour or 0.0), 4) if parts else None


# --- entry point ------------------------------------------------------------------------------------


def plan_report(spec: Spec, prices: PriceBook) -> PlanReport:
    """Every figure of the plan report for ``spec``, priced from ``prices``."""
    queues = [queue_figures(q, prices.queue_price(q)) for q in spec.queues]
    storage = storage_figures(spec)
    work = workload_figures(spec, queues, storage)
    curve = checkpoint_curve(spec, queues, work)
    cost = cost_figures(spec, queues, prices.instance_price(spec.head_node.instance_type))
    bottleneck, advice = verdict(spec, queues, work, curve, cost)
    total = _total(cost)
    return PlanReport(
        cluster=spec.name,
        backend=spec.backend,
        region=spec.region,
        queues=queues,
        storage=storage,
        workload=work,
        usd_per_hour=total,
        usd_per_day=round(total * 24, 2) if total is not None else None,
        cost=cost,
        bottleneck=bottleneck,
        advice=advice,
        prices=PricesInfo(source=prices.source, as_of=prices.as_of),
        checkpoint_curve=curve,
    )
