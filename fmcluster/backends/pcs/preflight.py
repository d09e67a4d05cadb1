"""Preflight checks only PCS needs: the controller size against every node group at its maximum, the
clusters-per-Region quota, and one cluster CREATING at a time. Its nodes can also register through PCS's
interface endpoint when their subnet has no NAT route."""

from __future__ import annotations

import re

from fmcluster.backends.pcs.decisions import PCS_SIZE_LIMITS, pcs_nodes, pcs_size
from fmcluster.checks import CheckResult
from fmcluster.preflight.common import BackendChecks, Context, aws_code, aws_errors, fix, guarded


@guarded("pcs", "pcs:ListClusters")
def check_pcs(ctx: Context) -> list[CheckResult]:
    """The controller size holds every node group at its maximum (login included); other clusters, and one
    CREATING at a time."""
    spec = ctx.spec
    total = pcs_nodes(spec)
    size = pcs_size(spec)
    limit = PCS_SIZE_LIMITS.get(size, 0)
    results = []
    reach = f"the queues at their maximum and the login node reach {total}"
    if total > limit:
        bigger = next((s for s, cap in PCS_SIZE_LIMITS.items() if cap >= total), None)
        results.append(CheckResult("pcs size", "failed", f"{size} holds {limit} nodes; {reach}",
                                   [fix(f"set pcs.size: {bigger}" if bigger else
                                        f"lower the queues' max nodes to {max(PCS_SIZE_LIMITS.values()) - 1} "
                                        "in total")]))
    else:
        results.append(CheckResult("pcs size", "passed", f"{size} holds {limit} nodes; {reach}"))

    pcs = ctx.aws("pcs")
    clusters = [c for page in pcs.get_paginator("list_clusters").paginate() for c in page.get("clusters", [])]
    details = [f"{c['name']}: {c['status']}" for c in clusters]
    if any(c["name"] == spec.name for c in clusters):
        details.append(f"a PCS cluster named {spec.name} exists already: create resumes it when fmcluster made it")
    quota_details, quota_failed = _pcs_cluster_quota(ctx, len(clusters), spec.name in {c["name"] for c in clusters})
    details += quota_details
    creating = [c["name"] for c in clusters if c.get("status") == "CREATING" and c["name"] != spec.name]
    summary = f"{len(clusters)} PCS cluster(s) in {ctx.region}"
    if quota_failed:
        results.append(CheckResult("pcs clusters", "failed", summary, details))
    elif creating:
        details.append(f"PCS creates one cluster per region at a time: {', '.join(creating)} is CREATING, so "
                       "create will wait for it")
        results.append(CheckResult("pcs clusters", "warning", summary + f", {len(creating)} CREATING", details))
    else:
        results.append(CheckResult("pcs clusters", "passed", summary, details))
    return results


def _pcs_cluster_quota(ctx: Context, count: int, exists: bool) -> tuple[list[str], bool]:
    """Compare with the PCS clusters-per-Region quota when Service Quotas lists one (optional extra)."""
    try:
        quotas = ctx.aws("service-quotas").list_service_quotas(ServiceCode="pcs").get("Quotas", [])
    except aws_errors() as exc:
        return [f"PCS quotas not read from Service Quotas ({aws_code(exc)})"], False
    for quota in quotas:
        quota_name = quota.get("QuotaName", "")
        if re.search(r"\bclusters?\b", quota_name, re.I) and "node" not in quota_name.lower():
            value = int(quota.get("Value", 0))
            needed = count + (0 if exists else 1)
            line = f"quota {quota_name} ({quota.get('QuotaCode')}): {value}, needed {needed}"
            if needed > value:
                return [line, fix(f"delete an unused PCS cluster, or request an increase of {quota_name} to "
                                  f"{needed} in the Service Quotas console")], True
            return [line], False
    return [], False




def _checks(ctx: Context, aws_answered: bool) -> list[CheckResult]:
    return check_pcs(ctx) if aws_answered else []


CHECKS = BackendChecks(run=_checks, display="PCS", registration_service="pcs", unreachable_nodes="failed")
