"""What fmcluster applies of the pinned upstream releases (:mod:`fmcluster.backends.eks.software.releases`), and in what
order.

The release files stay as upstream published them; the few changes a cluster needs are made here, in Python, on
fresh copies at render time:

* the release's Namespace, where the set does not make its own (a rendered chart holds none: Helm's
  ``--create-namespace`` makes it);
* the controllers' pods (Deployments, hook Jobs, and for KAI the operands its operator makes, through its
  ``Config``) go to the ``system`` node group: its nodeSelector and the toleration of its taint
  (:mod:`fmcluster.backends.eks.nodes.system_nodes`);
* ``metadata.namespace`` dropped from cluster-scoped objects (as the API server drops it);
* a component label saying which release an object came from (ownership labels are added for every object);
* Helm hooks become ordered steps: ``pre-install`` objects in their ``helm.sh/hook-weight`` order before the rest
  (:func:`fmcluster.backends.eks.software.apply_order.wire` reads the annotations); ``post-delete`` hooks are left out,
  since they clean up after ``helm uninstall`` and fmcluster's ``destroy`` deletes what it applied itself. Hook objects
  stay in the cluster once made (Helm's ``hook-delete-policy`` is not followed): a re-run then finds them and
  does not run the Job again.

Everything is applied server-side (the CRDs of Kueue, KAI and the MPI Operator are over the 256 KiB that
client-side apply's annotation allows), each object one engine resource.
"""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.nodes import system_nodes
from fmcluster.backends.eks.software.releases import MPI_OPERATOR, SCHEDULERS, Release, objects

COMPONENT_LABEL = "fmcluster.io/component"
HOOK = "helm.sh/hook"
HOOK_WEIGHT = "helm.sh/hook-weight"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
# Built-in kinds that are cluster-scoped (Kubernetes API reference); a custom kind's scope is its CRD's.
CLUSTER_SCOPED = frozenset({"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                            "PriorityClass", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                            "APIService", "RuntimeClass", "StorageClass", "PersistentVolume", "CSIDriver",
                            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "DeviceClass"})
# Components whose objects wait until the scheduler's webhooks answer: Kueue's fail-closed webhooks intercept
# Deployments in every namespace but kube-system and kueue-system (reference README, "Kueue v0.19.2"), the MPI
# Operator's among them.
AFTER_SCHEDULER = (MPI_OPERATOR.name,)


def releases_of(scheduler: str) -> list[Release]:
    """The releases an EKS cluster with ``scheduler`` gets: the scheduler's and the MPI Operator (``smoke`` and
    users' MPI jobs need it)."""
    return [SCHEDULERS[scheduler], MPI_OPERATOR]


def is_hook(obj: dict[str, Any]) -> bool:
    return HOOK in ((obj.get("metadata") or {}).get("annotations") or {})


def hook_weight(obj: dict[str, Any]) -> int:
    """Helm's order of a hook object: its weight (default 0)."""
    return int(((obj.get("metadata") or {}).get("annotations") or {}).get(HOOK_WEIGHT, "0"))


def _installs(obj: dict[str, Any]) -> bool:
    """Whether ``helm install`` would apply the object: every object but hooks of other events than install."""
    if not is_hook(obj):
        return True
    events = obj["metadata"]["annotations"][HOOK].split(",")
    return "pre-install" in [event.strip() for event in events]


def install_objects(release: Release) -> list[dict[str, Any]]:
    """The release's objects as fmcluster applies them, in apply order: CRDs, the Namespace, the pre-install hooks
    by weight, then the rest in the release's own (Helm install) order."""
    found = [obj for obj in objects(release) if _installs(obj)]
    crds = [obj for obj in found if obj["kind"] == "CustomResourceDefinition"]
    hooks = sorted((obj for obj in found if is_hook(obj)), key=hook_weight)  # stable: file order within a weight
    rest = [obj for obj in found if obj["kind"] != "CustomResourceDefinition" and not is_hook(obj)]
    namespace = [] if release.creates_namespace else [{"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": release.namespace}}]
    ordered = crds + namespace + hooks + rest
    cluster_kinds = CLUSTER_SCOPED | {crd["spec"]["names"]["kind"] for crd in crds if crd["spec"]["scope"] == "Cluster"}
    for obj in ordered:
        metadata = obj.setdefault("metadata", {})
        if obj["kind"] in cluster_kinds:
            # Kueue's webhook configurations and KAI's Config name a namespace; the API server drops it from a
            # cluster-scoped object, so fmcluster does too (else the object's key and its live form would differ).
            metadata.pop("namespace", None)
        metadata["labels"] = {**(metadata.get("labels") or {}), COMPONENT_LABEL: release.name}
        if not (release.node_agents and obj["kind"] == "DaemonSet"):  # a node agent stays on the nodes it serves
            _place_on_system_nodes(obj)
    return ordered


def _place_on_system_nodes(obj: dict[str, Any]) -> None:
    """Controllers run on the ``system`` node group: it outlives a Capacity Block's end or a Spot reclaim, and
    training nodes stay free for training."""
    if obj["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        _place(obj["spec"]["template"].setdefault("spec", {}))
    elif obj["kind"] == "Config" and obj["apiVersion"].startswith("kai.scheduler/"):
        # KAI's operator makes the scheduler's own Deployments from this object; its `global` placement applies
        # to all of them ("NodeSelector defines node selector for KAI operators & services", Config CRD).
        _place(obj.setdefault("spec", {}).setdefault("global", {}))


def _place(pod_spec: dict[str, Any]) -> None:
    pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **system_nodes.NODE_SELECTOR}
    tolerations = list(pod_spec.get("tolerations") or [])
    if system_nodes.TOLERATION not in tolerations:
        tolerations.append(dict(system_nodes.TOLERATION))
    pod_spec["tolerations"] = tolerations


def manifests(scheduler: str) -> list[dict[str, Any]]:
    """Every object of the scheduler's release and of the MPI Operator, CRDs of both first."""
    sets = [install_objects(release) for release in releases_of(scheduler)]
    crds = [obj for objs in sets for obj in objs if obj["kind"] == "CustomResourceDefinition"]
    return crds + [obj for objs in sets for obj in objs if obj["kind"] != "CustomResourceDefinition"]


def controllers(scheduler: str) -> list[dict[str, Any]]:
    """The Deployments fmcluster applies for ``scheduler`` (the MPI Operator's last): what ``create`` waits to be
    Available and ``status`` reports as the scheduler's components."""
    return [obj for obj in manifests(scheduler) if obj["kind"] == "Deployment"]


def webhook_servers(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Deployments that serve the webhooks (admission, CRD conversion, aggregated API) of ``objs``, found the
    way the API server reaches them: the webhook's Service, then the pods its selector picks. None when ``objs``
    declare no webhook (KAI's operator makes its own, later)."""
    services: set[tuple[str, str]] = set()
    for obj in objs:
        refs: list[dict[str, Any]] = []
        if obj["kind"] in WEBHOOK_KINDS:
            refs = [(hook.get("clientConfig") or {}).get("service") or {} for hook in obj.get("webhooks") or []]
        elif obj["kind"] == "CustomResourceDefinition":
            refs = [((((obj.get("spec") or {}).get("conversion") or {}).get("webhook") or {})
                     .get("clientConfig") or {}).get("service") or {}]
        elif obj["kind"] == "APIService":
            refs = [(obj.get("spec") or {}).get("service") or {}]
        services |= {(ref["namespace"], ref["name"]) for ref in refs if ref.get("name")}
    selectors = [((obj["metadata"].get("namespace")), (obj.get("spec") or {}).get("selector") or {})
                 for obj in objs if obj["kind"] == "Service"
                 and (obj["metadata"].get("namespace"), obj["metadata"]["name"]) in services]
    servers = []
    for obj in objs:
        if obj["kind"] != "Deployment":
            continue
        labels = ((obj["spec"]["template"].get("metadata") or {}).get("labels")) or {}
        namespace = obj["metadata"].get("namespace")
        if any(ns == namespace and selector and selector.items() <= labels.items() for ns, selector in selectors):
            servers.append(obj)
    return servers
