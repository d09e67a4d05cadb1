"""The order the API needs Kubernetes objects in, beyond what document references say: the edges the engine's graph
gets from :func:`wire` (after the cluster, the Namespace, the CRD; an upstream release's hooks by weight; objects
behind an admission webhook after the webhook's servers)."""

from __future__ import annotations

from collections.abc import Iterable

from fmcluster.backends.eks.kubernetes.client import KubeObject
from fmcluster.backends.eks.software import scheduler_install as install
from fmcluster.backends.eks.software.scheduler_install import COMPONENT_LABEL
from fmcluster.backends.eks.software.webhook_order import guard_edges


def wire(objects: Iterable[KubeObject], cluster_resource: str = "") -> None:
    """Set each object's ``extra_edges``: after ``cluster_resource`` (the EKS cluster's resource name,
    ``eks_cluster:<cluster>``; none when empty), after the Namespace it lives in and the CRD that defines its kind
    when fmcluster makes those too. No document reference says these, but the API refuses an object before them.

    Objects of an upstream release (:mod:`~fmcluster.backends.eks.software.scheduler_install`) are also ordered as the
    release needs: its ``pre-install`` hooks after its CRDs and after the hooks of a lower weight, the rest of the
    release after its hooks; a custom resource of the release's kinds (a queue object) after the Deployments that
    serve the release's webhooks are Available, and so are the objects of the components that must wait for the
    scheduler's webhooks (the MPI Operator). An object an admission webhook of the plan intercepts comes after the
    webhook's configuration, its Service and the Deployments serving it
    (:mod:`~fmcluster.backends.eks.software.webhook_order`), so that ``destroy``, walking back, deletes it while the
    webhook can still answer."""
    objects = list(objects)
    guarded = guard_edges(objects)
    namespaces = {o.object_name: o.name for o in objects if o.object_kind == "Namespace" and o.api_version == "v1"}
    crds: dict[tuple[str, str], KubeObject] = {}
    for o in objects:
        if o.object_kind == "CustomResourceDefinition":
            spec = o.manifest.get("spec") or {}
            crds[(spec.get("group", ""), (spec.get("names") or {}).get("kind", ""))] = o
    components: dict[str, list[KubeObject]] = {}
    for o in objects:
        component = ((o.manifest.get("metadata") or {}).get("labels") or {}).get(COMPONENT_LABEL)
        if component:
            components.setdefault(component, []).append(o)
    gates: dict[str, list[str]] = {}
    hooks_of: dict[str, dict[int, list[str]]] = {}
    for component, members in components.items():
        servers = {id(m) for m in install.webhook_servers([m.manifest for m in members])}
        deployments = [m for m in members if m.object_kind == "Deployment"]
        gates[component] = [m.name for m in deployments if id(m.manifest) in servers] or [m.name for m in deployments]
        weights: dict[int, list[str]] = {}
        for m in members:
            if install.is_hook(m.manifest):
                weights.setdefault(install.hook_weight(m.manifest), []).append(m.name)
        hooks_of[component] = dict(sorted(weights.items()))
    scheduler_gates = [name for component, names in gates.items() if component not in install.AFTER_SCHEDULER
                       for name in names]
    for o in objects:
        edges = [cluster_resource] if cluster_resource else []
        if o.namespace and o.namespace in namespaces:
            edges.append(namespaces[o.namespace])
        crd = crds.get((o.group, o.object_kind))
        if crd is not None:
            edges.append(crd.name)
        labels = (o.manifest.get("metadata") or {}).get("labels") or {}
        component = labels.get(COMPONENT_LABEL)
        holder = o.object_kind in ("CustomResourceDefinition", "Namespace")
        if component and not holder:
            weights = hooks_of.get(component) or {}
            if install.is_hook(o.manifest):
                mine = install.hook_weight(o.manifest)
                lower = [w for w in weights if w < mine]
                edges += weights[lower[-1]] if lower else []
                edges += [c.name for c in crds.values() if _component(c) == component]
            elif weights:
                edges += weights[list(weights)[-1]]
            if component in install.AFTER_SCHEDULER:
                edges += scheduler_gates
        if crd is not None and not install.is_hook(o.manifest):
            owner = _component(crd)
            edges += [gate for gate in gates.get(owner, []) if gate != o.name] if owner else []
        edges += guarded.get(o.name, [])
        edges += _claim_edges(o, objects)
        o.extra_edges = tuple(dict.fromkeys(edges))


def _claim_edges(o: KubeObject, objects: list[KubeObject]) -> list[str]:
    """A PersistentVolumeClaim after the StorageClass and the PersistentVolume it names: a larger request is
    admitted only once its StorageClass has ``allowVolumeExpansion``, and a statically provisioned volume grows by
    its PersistentVolume's capacity first, then the claim's request (Kubernetes, "Persistent Volumes", "Expanding
    Persistent Volumes Claims"). The PersistentVolume itself follows the file system it names, so neither changes
    before the file system has grown."""
    if o.object_kind != "PersistentVolumeClaim":
        return []
    spec = o.manifest.get("spec") or {}
    named = {("StorageClass", spec.get("storageClassName")), ("PersistentVolume", spec.get("volumeName"))}
    return [p.name for p in objects if (p.object_kind, p.object_name) in named]


def _component(o: KubeObject) -> str | None:
    return ((o.manifest.get("metadata") or {}).get("labels") or {}).get(COMPONENT_LABEL)
