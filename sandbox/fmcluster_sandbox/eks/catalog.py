"""What EKS offers, seeded only from the EKS User Guide (each table names its page).

Kubernetes versions: 1.34, 1.35 and 1.36 from "Review release notes for Kubernetes versions on standard support"
(``kubernetes-versions-standard``), 1.29 to 1.34 with their dates from the release calendar of "Understand the
Kubernetes version lifecycle on EKS" (``kubernetes-versions``): "You can create new Amazon EKS clusters on any
version offered in standard or extended support", and "On the end of extended support date, you can no longer create
new Amazon EKS clusters with the unsupported version". So what CreateCluster takes, and the ``status``
DescribeClusterVersions answers, follow the sandbox's clock (:func:`support_on`): on 2026-12-06, 1.29 to 1.31 are
past their end of extended support, 1.32 to 1.34 are on extended support (1.34's standard support ended on December
2, 2026) and 1.35 and 1.36 on standard support (the stored calendar gives no dates for them). The guide does not
publish the default for a request without ``version``; the sandbox uses the newest.

Add-on versions: the "latest version of the Amazon EKS add-on type for each Kubernetes version" tables of
"Manage kube-proxy in Amazon EKS clusters" (1.35: v1.35.3-eksbuild.2, 1.34: v1.34.6-eksbuild.2, 1.33:
v1.33.10-eksbuild.2, 1.32: v1.32.13-eksbuild.5), "Manage CoreDNS for DNS in Amazon EKS clusters" (1.34 and 1.33:
v1.12.4-eksbuild.1, 1.32: v1.11.4-eksbuild.24) and "Assign IPs to Pods with the
Amazon VPC CNI" (1.27 to 1.33: v1.20.1-eksbuild.3); "Set up the Amazon EKS Pod Identity Agent" gives
``v1.0.0-eksbuild.1`` in its ``create-addon`` example. Those tables lag the Kubernetes versions: for a
Kubernetes version newer than a table's newest row the sandbox offers that row's version (AWS publishes
newer builds the sandbox does not know). The FSx for Lustre CSI driver's pages publish no add-on version:
``v1.0.0-eksbuild.1`` is the sandbox's own label for it.

The ``eks-node-monitoring-agent`` add-on: the guide ("Detect node health issues with the EKS node monitoring
agent") publishes no version table and sends readers to ``describe-addon-versions``. AWS's own chart for it
(aws/eks-node-monitoring-agent, tag v1.7.0, ``charts/eks-node-monitoring-agent/values.yaml``) pins the agent image
AWS builds at ``v1.7.0-eksbuild.1``, the add-on's version naming; the sandbox offers that version for every
Kubernetes version it offers (the agent's Go module page lists v1.7.0 as its latest, published Aug 4, 2026). Its
DescribeAddonVersions ``type``, ``observability``, is the sandbox's own label: no stored AWS page names it.
"""

from __future__ import annotations

import datetime as dt

# version -> (end of standard support, end of extended support), midnight UTC ("The dates in the following table use
# the UTC+0 timezone"); None where the calendar gives no date yet.
RELEASE_CALENDAR: dict[str, tuple[dt.date | None, dt.date | None]] = {
    "1.29": (dt.date(2025, 3, 23), dt.date(2026, 3, 23)),
    "1.30": (dt.date(2025, 7, 23), dt.date(2026, 7, 23)),
    "1.31": (dt.date(2025, 11, 26), dt.date(2026, 11, 26)),
    "1.32": (dt.date(2026, 3, 23), dt.date(2027, 3, 23)),
    "1.33": (dt.date(2026, 7, 29), dt.date(2027, 7, 29)),
    "1.34": (dt.date(2026, 12, 2), dt.date(2027, 12, 2)),
    "1.35": (None, None),
    "1.36": (None, None),
}
# The versions the sandbox holds node images and add-on versions for: the ones EKS can still create clusters at on
# the sandbox's date (1.29 to 1.31 are in the calendar only, so that their end of extended support refuses them).
KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34", "1.35", "1.36")
DEFAULT_KUBERNETES_VERSION = KUBERNETES_VERSIONS[-1]


def support_on(version: str, today: dt.date | None = None) -> str | None:
    """``STANDARD_SUPPORT``, ``EXTENDED_SUPPORT``, or None when EKS no longer creates (or never offered) the version
    on ``today`` (the sandbox's clock when None)."""
    if version not in RELEASE_CALENDAR:
        return None
    today = today or dt.datetime.now(dt.timezone.utc).date()
    end_standard, end_extended = RELEASE_CALENDAR[version]
    if end_extended is not None and today >= end_extended:
        return None
    if end_standard is not None and today >= end_standard:
        return "EXTENDED_SUPPORT"
    return "STANDARD_SUPPORT"


def creatable(today: dt.date | None = None) -> tuple[str, ...]:
    """The versions CreateCluster takes on ``today``."""
    return tuple(v for v in KUBERNETES_VERSIONS if support_on(v, today) is not None)
PLATFORM_VERSION = "eks.1"  # the first platform version of each Kubernetes version ("platform versions" page)

# add-on -> {Kubernetes version: the add-on version the guide lists for it}; None = any Kubernetes version.
DOCUMENTED: dict[str, dict[str | None, str]] = {
    "vpc-cni": {"1.32": "v1.20.1-eksbuild.3", "1.33": "v1.20.1-eksbuild.3"},
    "kube-proxy": {"1.32": "v1.32.13-eksbuild.5", "1.33": "v1.33.10-eksbuild.2", "1.34": "v1.34.6-eksbuild.2",
                   "1.35": "v1.35.3-eksbuild.2"},
    "coredns": {"1.32": "v1.11.4-eksbuild.24", "1.33": "v1.12.4-eksbuild.1", "1.34": "v1.12.4-eksbuild.1"},
    "eks-pod-identity-agent": {None: "v1.0.0-eksbuild.1"},
    "aws-fsx-csi-driver": {None: "v1.0.0-eksbuild.1"},
    "eks-node-monitoring-agent": {None: "v1.7.0-eksbuild.1"},
}


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _version_for(addon: str, kube: str) -> str | None:
    rows = DOCUMENTED.get(addon, {})
    if None in rows:
        return rows[None]
    if kube in rows:
        return rows[kube]
    newest = max(rows, key=_minor, default=None)
    return rows[newest] if newest is not None and _minor(kube) > _minor(newest) else None


ADDON_VERSIONS: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
for _addon in DOCUMENTED:
    _by_version: dict[str, list[str]] = {}
    for _kube in KUBERNETES_VERSIONS:
        _found = _version_for(_addon, _kube)
        if _found:
            _by_version.setdefault(_found, []).append(_kube)
    # newest add-on version first, as DescribeAddonVersions lists them
    ADDON_VERSIONS[_addon] = sorted(((v, tuple(k)) for v, k in _by_version.items()), reverse=True,
                                    key=lambda item: _minor(item[0][1:].split("-", 1)[0]))
ADDON_TYPE = {"vpc-cni": "networking", "kube-proxy": "networking", "coredns": "networking",
              "eks-pod-identity-agent": "security", "aws-fsx-csi-driver": "storage",
              "eks-node-monitoring-agent": "observability"}

# "Review access policy permissions" (EKS User Guide, access-policy-permissions): the access policies EKS offers.
ACCESS_POLICY_PREFIX = "arn:aws:eks::aws:cluster-access-policy/"
ACCESS_POLICIES = ("AmazonEKSAdminPolicy", "AmazonEKSClusterAdminPolicy", "AmazonEKSAdminViewPolicy",
                   "AmazonEKSEditPolicy", "AmazonEKSViewPolicy")
CLUSTER_ADMIN_POLICY = ACCESS_POLICY_PREFIX + "AmazonEKSClusterAdminPolicy"


def addon_versions(addon: str, kubernetes_version: str | None = None) -> list[str]:
    """The add-on's versions for a Kubernetes version (every seeded version when None), newest first."""
    return [v for v, kube in ADDON_VERSIONS.get(addon, []) if kubernetes_version is None or kubernetes_version in kube]
