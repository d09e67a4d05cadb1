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
    kubernetes_api=True,
    # EKS's cluster statuses (EKS API DescribeCluster) in the one vocabulary of `status`.
    status={"CREATING": "CREATING", "ACTIVE": "ACTIVE", "UPDATING": "UPDATING", "DELETING": "DELETING",
            "FAILED": "FAILED", "PENDING": "CREATING"},
)
