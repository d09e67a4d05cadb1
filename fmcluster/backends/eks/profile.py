"""Amazon EKS, as generic code sees it."""

from __future__ import annotations

from fmcluster.backends.profile import BackendProfile

PROFILE = BackendProfile(
    name="eks",
    display="EKS",
    login_role="Kubernetes API",
    login_where="Kubernetes API (`fmcluster kubeconfig NAME` writes its kubeconfig)",
    anchor_kind="eks_cluster",
    extra="kubernetes",
    # Amazon EKS pricing: the control plane bills per cluster per hour while it exists.
    billing_kinds=frozenset({"eks_cluster"}),
    stand_ins={("eks_cluster", "name"): "example", ("eks_cluster", "security_group"): "sg-0123456789abcdef1"},
    # EKS's cluster, node group and add-on statuses (EKS API DescribeCluster, DescribeNodegroup, DescribeAddon) in
    # the one vocabulary of `status`: a DEGRADED node group or add-on is broken although it runs.
    status={"CREATING": "CREATING", "ACTIVE": "ACTIVE", "UPDATING": "UPDATING", "DELETING": "DELETING",
            "FAILED": "FAILED", "PENDING": "CREATING", "CREATE_FAILED": "FAILED", "DELETE_FAILED": "FAILED",
            "UPDATE_FAILED": "FAILED", "DEGRADED": "FAILED"},
)
