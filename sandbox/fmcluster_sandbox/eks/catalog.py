"""What EKS offers, seeded only from the EKS User Guide (each table names its page).

Kubernetes versions: the versions on standard support, from "Review release notes for Kubernetes versions on
standard support" (``kubernetes-versions-standard``), which lists 1.36, 1.35 and 1.34. The guide's default
for a request without ``version`` is not published; the sandbox uses the newest.

Add-on versions: the "latest version of the Amazon EKS add-on type for each Kubernetes version" tables of
the add-on pages (Manage kube-proxy, Manage CoreDNS, Assign IPs to Pods with the Amazon VPC CNI), the
Pod Identity agent page and the FSx for Lustre CSI driver page. A (Kubernetes version, add-on) pair the
guide does not list is not offered: DescribeAddonVersions answers without it and CreateAddon refuses it.
"""

from __future__ import annotations

KUBERNETES_VERSIONS = ("1.34", "1.35", "1.36")
DEFAULT_KUBERNETES_VERSION = KUBERNETES_VERSIONS[-1]
PLATFORM_VERSION = "eks.1"  # the first platform version of each Kubernetes version ("platform versions" page)

# add-on -> [(add-on version, Kubernetes versions it is the documented version for)], newest first.
ADDON_VERSIONS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "vpc-cni": [("v1.21.1-eksbuild.1", ("1.34", "1.35", "1.36"))],
    "kube-proxy": [("v1.36.0-eksbuild.2", ("1.36",)), ("v1.35.3-eksbuild.2", ("1.35",)),
                   ("v1.34.6-eksbuild.2", ("1.34",))],
    "coredns": [("v1.13.2-eksbuild.1", ("1.35", "1.36")), ("v1.12.4-eksbuild.1", ("1.34",))],
    "eks-pod-identity-agent": [("v1.3.10-eksbuild.1", ("1.34", "1.35", "1.36"))],
    "aws-fsx-csi-driver": [("v1.7.0-eksbuild.1", ("1.34", "1.35", "1.36"))],
}
ADDON_TYPE = {"vpc-cni": "networking", "kube-proxy": "networking", "coredns": "networking",
              "eks-pod-identity-agent": "security", "aws-fsx-csi-driver": "storage"}

# "Review access policy permissions" (EKS User Guide, access-policy-permissions): the access policies EKS offers.
ACCESS_POLICY_PREFIX = "arn:aws:eks::aws:cluster-access-policy/"
ACCESS_POLICIES = ("AmazonEKSAdminPolicy", "AmazonEKSClusterAdminPolicy", "AmazonEKSAdminViewPolicy",
                   "AmazonEKSEditPolicy", "AmazonEKSViewPolicy")
CLUSTER_ADMIN_POLICY = ACCESS_POLICY_PREFIX + "AmazonEKSClusterAdminPolicy"


def addon_versions(addon: str, kubernetes_version: str | None = None) -> list[str]:
    """The add-on's versions for a Kubernetes version (every seeded version when None), newest first."""
    return [v for v, kube in ADDON_VERSIONS.get(addon, []) if kubernetes_version is None or kubernetes_version in kube]
