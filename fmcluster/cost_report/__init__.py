"""`fmcluster plan`: the offline bottleneck and cost report (figures, prices, report, chart, command)."""

from fmcluster.cost_report.figures import plan_report
from fmcluster.cost_report.report_model import PlanReport
from fmcluster.pricing.rates import LivePriceBook, PriceBook, PriceError

__all__ = ["LivePriceBook", "PlanReport", "PriceBook", "PriceError", "plan_report"]
