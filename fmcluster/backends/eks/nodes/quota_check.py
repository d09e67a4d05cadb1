"""Preflight: the account's own EKS quotas (Service Quotas, service code ``eks``) against what the spec makes.

Offline, :mod:`fmcluster.backends.eks.nodes.limits` holds the spec to AWS's default values; here the applied values are
read, so a quota lowered for the account (or an organisation's cap) refuses the spec before anything is made. The
codes are AWS's: "Amazon EKS endpoints and quotas" (AWS General Reference, docs.aws.amazon.com/general/latest/gr/
eks.html) lists ``L-6D54EA21`` Managed node groups per cluster (default 30) and ``L-BD136A63`` Nodes per managed
node group (default 450); the EKS User Guide's "Amazon EKS service quotas" page gives the same defaults.
"""

from __future__ import annotations

from fmcluster.backends.eks.nodes import limits
from fmcluster.checks import CheckResult
from fmcluster.preflight.common import Context, aws_code, fix, guarded

NODE_GROUPS_PER_CLUSTER = "L-6D54EA21"
NODES_PER_NODE_GROUP = "L-BD136A63"
QUOTA_NAMES = {NODE_GROUPS_PER_CLUSTER: "Managed node groups per cluster",
               NODES_PER_NODE_GROUP: "Nodes per managed node group"}


def _applied(ctx: Context, code: str) -> tuple[str, float]:
    """(quota name, applied value); AWS's default where the account has no applied value of its own."""
    from botocore.exceptions import ClientError

    quotas = ctx.aws("service-quotas")
    try:
        quota = quotas.get_service_quota(ServiceCode="eks", QuotaCode=code)["Quota"]
    except ClientError as exc:
        if aws_code(exc) != "NoSuchResourceException":  # a quota the account never changed
            raise
        quota = quotas.get_aws_default_service_quota(ServiceCode="eks", QuotaCode=code)["Quota"]
    return quota.get("QuotaName") or QUOTA_NAMES[code], float(quota["Value"])


def _increase(ctx: Context, code: str, name: str, need: int) -> str:
    return fix(f"request {need} for {name} in the Service Quotas console (`aws service-quotas "
               f"request-service-quota-increase --service-code eks --quota-code {code} --desired-value {need} "
               f"--region {ctx.region}`), or make the spec smaller")


@guarded("eks quotas", "servicequotas:GetServiceQuota")
def check_quotas(ctx: Context) -> list[CheckResult]:
    spec = ctx.spec
    groups = len(spec.queues) + 1  # one managed node group per queue, and the system group
    group_name, group_quota = _applied(ctx, NODE_GROUPS_PER_CLUSTER)
    node_name, node_quota = _applied(ctx, NODES_PER_NODE_GROUP)
    failed: list[str] = []
    if groups > group_quota:
        failed += [f"{len(spec.queues)} queues make {groups} managed node groups (one per queue plus the system "
                   f"group); {group_name} ({NODE_GROUPS_PER_CLUSTER}) is {group_quota:g} in {ctx.region}",
                   _increase(ctx, NODE_GROUPS_PER_CLUSTER, group_name, groups)]
    for queue in spec.queues:
        most = limits.most_nodes(queue)
        if most > node_quota:
            failed += [f"queue {queue.name}: {most} nodes in one managed node group; {node_name} "
                       f"({NODES_PER_NODE_GROUP}) is {node_quota:g} in {ctx.region}",
                       _increase(ctx, NODES_PER_NODE_GROUP, node_name, most)]
    summary = f"{group_name}: {group_quota:g}, need {groups}; {node_name}: {node_quota:g}, need " \
              f"{max(limits.most_nodes(q) for q in spec.queues)}"
    return [CheckResult("eks quotas", "failed" if failed else "passed", summary, failed)]
