"""The plan report's numbers: a spec in, a :class:`PlanReport` out. Pure arithmetic on the catalog.

Nothing in ``fmcluster/cost_report`` that computes prints, calls AWS or reads files; prices come in through a
:class:`PriceBook` so that the same computation serves bundled and live prices. The parts: the assumptions
(``assumptions``), per-queue and storage figures (``hardware_figures``), the workload (``workload``), the cost
(:mod:`fmcluster.pricing.model`, the one ``create`` and ``status`` use too) and the verdict (``verdict``),
gathered into the report's shape (``report_model``) by :func:`plan_report`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from fmcluster.cost_report.burn_in_figures import burn_in_figures
from fmcluster.cost_report.hardware_figures import queue_figures, storage_figures
from fmcluster.cost_report.report_model import BudgetFigures, CostFigures, PlanReport, PricesInfo
from fmcluster.cost_report.verdict import verdict
from fmcluster.cost_report.workload import checkpoint_curve, workload_figures
from fmcluster.pricing.deadline import guard_deadline
from fmcluster.pricing.model import SpecCost, spec_cost
from fmcluster.pricing.rates import PriceBook
from fmcluster.spec.backend_rules import backend_rules
from fmcluster.spec.models import Spec

# --- cost -------------------------------------------------------------------------------------------


def cost_figures(cost: SpecCost) -> CostFigures:
    """The report's cost part: :func:`fmcluster.pricing.model.spec_cost`'s breakdown, as ``plan --json`` shows it."""
    system = cost.system_nodes
    return CostFigures(
        system_nodes_instance_type=system.instance_type if system else None,
        system_nodes=system.nodes if system else 0,
        system_nodes_usd_per_node_hour=system.price.usd_per_hour if system else None,
        system_nodes_usd_per_hour=system.usd_per_hour if system else None,
        system_nodes_price_note=system.price.note if system else None,
        compute_usd_per_hour=cost.compute_usd_per_hour,
        head_node_instance_type=cost.head_node_instance_type,
        head_node_usd_per_hour=cost.head_node.usd_per_hour if cost.head_node else None,
        control_plane_usd_per_hour=cost.control_plane_usd_per_hour,
        storage_usd_per_hour=cost.storage_usd_per_hour,
        unknown=cost.unknown,
        network_usd_per_hour=cost.network_usd_per_hour,
        parts=[part.as_json() for part in cost.parts],
    )


# --- budget -----------------------------------------------------------------------------------------

ON_LIMIT_DOES = {
    "stop": "every queue to zero nodes; storage, the head or login node and the control plane stay (and bill)",
    "destroy-compute": "every queue's node group deleted; storage, the head or login node and the control plane "
                       "stay (and bill)",
}


def budget_figures(spec: Spec, usd_per_hour_max: float | None, now: dt.datetime) -> BudgetFigures | None:
    """When the guard fires for the cluster created at ``now`` (nothing spent yet)."""
    budget = spec.budget
    if budget is None:
        return None
    deadline = guard_deadline(budget, usd_per_hour_max, now, now)
    shown = deadline.as_json(now)
    return BudgetFigures(
        max_usd=budget.max_usd, expires=budget.expires, on_limit=budget.on_limit, notify=list(budget.notify),
        fires_at=shown["fires_at"], decided_by=deadline.decided_by, expires_at=shown["expires_at"],
        spend_at=shown["spend_at"], hours_left=shown["hours_left"], usd_per_hour_max=usd_per_hour_max,
        why=deadline.why, does=ON_LIMIT_DOES[budget.on_limit], warns_at=shown["warns_at"])


# --- entry point ------------------------------------------------------------------------------------


def plan_report(spec: Spec, prices: PriceBook, now: dt.datetime | None = None) -> PlanReport:
    """Every figure of the plan report for ``spec``, priced from ``prices``; the budget guard's moment counted
    from ``now`` (the laptop's clock by default: ``plan`` is offline)."""
    priced = spec_cost(spec, prices)
    rules = backend_rules(spec.backend)
    queues = [replace(queue_figures(q, c), repair_note=rules.repair_note(q),
                      burn_in=burn_in_figures(q, prices.block_hours(q), rules.burn_in_gate_note(q)))
              for q, c in zip(spec.queues, priced.queues, strict=True)]
    storage = storage_figures(spec)
    work = workload_figures(spec, queues, storage)
    curve = checkpoint_curve(spec, queues, work)
    cost = cost_figures(priced)
    bottleneck, advice = verdict(spec, queues, work, curve, cost)
    total = priced.usd_per_hour
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
        budget=budget_figures(spec, total, now or dt.datetime.now(dt.timezone.utc)),
    )
