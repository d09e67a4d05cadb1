"""The plan report's numbers: a spec in, a :class:`PlanReport` out. Pure arithmetic on the catalog.

Nothing in ``fmcluster/cost_report`` that computes prints, calls AWS or reads files; prices come in through a
:class:`PriceBook` so that the same computation serves bundled and live prices. The parts: the assumptions
(``assumptions``), per-queue and storage figures (``hardware_figures``), the workload (``workload``), the cost
(:mod:`fmcluster.pricing.model`, the one ``create`` and ``status`` use too) and the verdict (``verdict``),
gathered into the report's shape (``report_model``) by :func:`plan_report`.
"""

from __future__ import annotations

from dataclasses import replace

from fmcluster.cost_report.hardware_figures import queue_figures, storage_figures
from fmcluster.cost_report.report_model import CostFigures, PlanReport, PricesInfo
from fmcluster.cost_report.verdict import verdict
from fmcluster.cost_report.workload import checkpoint_curve, workload_figures
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


# --- entry point ------------------------------------------------------------------------------------


def plan_report(spec: Spec, prices: PriceBook) -> PlanReport:
    """Every figure of the plan report for ``spec``, priced from ``prices``."""
    priced = spec_cost(spec, prices)
    rules = backend_rules(spec.backend)
    queues = [replace(queue_figures(q, c), repair_note=rules.repair_note(q))
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
    )
