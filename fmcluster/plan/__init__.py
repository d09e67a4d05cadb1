"""`fmcluster plan`: the offline bottleneck and cost report (figures, prices, report, chart, command)."""

from fmcluster.plan.figures import PlanReport, plan_report
from fmcluster.plan.prices import LivePriceBook, PriceBook, PriceError

__all__ = ["LivePriceBook", "PlanReport", "PriceBook", "PriceError", "plan_report"]
