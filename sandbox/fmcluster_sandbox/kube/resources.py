"""The resource types the emulated API server serves: built-in ones and those installed CRDs add.

Built-in types are the ones fmcluster creates (names, scopes, short names and verbs as ``kubectl api-resources``
lists them for Kubernetes 1.33; "Kubernetes API reference" pages per kind). Custom resources come from a
CustomResourceDefinition's ``spec`` (apiextensions.k8s.io/v1, "Extend the Kubernetes API with
CustomResourceDefinitions").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
READ_ONLY = ["get", "list"]


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = tuple(VERBS)
    crd: str | None = None  # the CRD's name for custom resources
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)  # CRD openAPIV3Schema

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    def discovery(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.plural, "singularName": self.singular or self.kind.lower(),
                               "namespaced": self.namespaced, "kind": self.kind, "verbs": list(self.verbs)}
        if self.short_names:
            out["shortNames"] = list(self.short_names)
        return out


def _t(group: str, version: str, plural: str, kind: str, namespaced: bool, *short: str,
       verbs: list[str] = VERBS) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, kind.lower(), tuple(short), tuple(verbs))


BUILTIN: list[ResourceType] = [
    _t("", "v1", "namespaces", "Namespace", False, "ns"),
    _t("", "v1", "serviceaccounts", "ServiceAccount", True, "sa"),
    _t("", "v1", "configmaps", "ConfigMap", True, "cm"),
    _t("", "v1", "secrets", "Secret", True),
    _t("", "v1", "services", "Service", True, "svc"),
    _t("", "v1", "persistentvolumes", "PersistentVolume", False, "pv"),
    _t("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, "pvc"),
    # Nodes are registered by kubelets; here they come from the cluster's instances and cannot be written.
    # patch: labels, annotations and taints only (node_writes.py)
    _t("", "v1", "nodes", "Node", False, "no", verbs=[*READ_ONLY, "patch"]),
    # Only the MPI Operator's pods exist (kube/mpi_operator.py); GET pods/<name>/log serves their output.
    _t("", "v1", "pods", "Pod", True, "po", verbs=READ_ONLY),
    _t("apps", "v1", "daemonsets", "DaemonSet", True, "ds"),
    _t("apps", "v1", "deployments", "Deployment", True, "deploy"),
    _t("apps", "v1", "statefulsets", "StatefulSet", True, "sts"),
    _t("batch", "v1", "jobs", "Job", True),
    # The Cluster Autoscaler's chart makes one ("PodDisruptionBudget", policy/v1: stored; no eviction happens here).
    _t("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, "pdb"),
    _t("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, "sc"),
    _t("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    _t("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    _t("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _t("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _t("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    _t("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    _t("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, "pc"),
    _t("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
    _t("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
       False),
    # Stored and reported; the sandbox aggregates no API servers (docs/sandbox-fidelity.md).
    _t("apiregistration.k8s.io", "v1", "apiservices", "APIService", False),
    _t("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, "crd", "crds"),
    # GA in Kubernetes 1.30 ("Validating Admission Policy"): stored, never evaluated (docs/sandbox-fidelity.md).
    _t("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False),
    _t("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding",
       False),
]

# Dynamic Resource Allocation's kinds ("Dynamic Resource Allocation" concept page; Kubernetes 1.32, 1.33 and 1.34
# release notes): resource.k8s.io/v1beta1 from 1.32, v1beta2 from 1.33, v1 (GA) from 1.34. Upstream turns the beta
# APIs off by default; EKS turns DRA on from 1.33 ("Use P6e-GB200 UltraServers with Amazon EKS": "supports P6e-GB200
# UltraServers for Kubernetes versions 1.33 and above", DRA "enabled by default in EKS"), so 1.32 serves none.
DRA_KINDS = (("deviceclasses", "DeviceClass", False), ("resourceclaims", "ResourceClaim", True),
             ("resourceclaimtemplates", "ResourceClaimTemplate", True), ("resourceslices", "ResourceSlice", False))
DRA_VERSIONS = {(1, 33): ("v1beta1", "v1beta2"), (1, 34): ("v1", "v1beta1", "v1beta2")}


def dra_types(kubernetes_version: str) -> list[ResourceType]:
    """The resource.k8s.io types a cluster of ``kubernetes_version`` ("1.34") serves."""
    try:
        minor = tuple(int(part) for part in kubernetes_version.split(".")[:2])
    except ValueError:
        return []
    versions: tuple[str, ...] = ()
    for first, served in sorted(DRA_VERSIONS.items()):
        if minor >= first:
            versions = served
    return [_t("resource.k8s.io", version, plural, kind, namespaced) for version in versions
            for plural, kind, namespaced in DRA_KINDS]

# Namespaces every EKS cluster has from the start ("Namespaces" concept page: default, kube-node-lease,
# kube-public, kube-system).
INITIAL_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")


def from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """One ResourceType per served version of an (established) CRD."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for version in spec.get("versions", []):
        if not version.get("served", False):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        out.append(ResourceType(group=spec["group"], version=version["name"], plural=names["plural"],
                                kind=names["kind"], namespaced=spec["scope"] == "Namespaced",
                                singular=names.get("singular") or names["kind"].lower(),
                                short_names=tuple(names.get("shortNames") or ()), crd=crd["metadata"]["name"],
                                schema=schema))
    return out
