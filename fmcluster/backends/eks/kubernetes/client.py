"""Kubernetes objects fmcluster owns inside an EKS cluster, as engine resources.

A :class:`KubeObject` is reconciled like any AWS resource: ``read`` gets it by name (None when it, its kind or
the cluster is gone), ``create`` and ``update`` are one server-side apply (field manager ``fmcluster``, forced),
``delete`` is a DELETE. Ownership is two labels, the Kubernetes form of fmcluster's tags: an object of the name
fmcluster would use without them is someone else's (:class:`~fmcluster.engine.ForeignResource`).

Keys are :mod:`fmcluster.engine.object_keys`: kind, name, group, version and namespace, so an object is
known from its key alone (``destroy`` from a state record).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from fmcluster.backends.eks.kubernetes.access import KubeAccess, KubeApi, KubeApiError
from fmcluster.engine import UNKNOWN, AttributeChange, Context, ForeignResource, Observed, Resource, flatten
from fmcluster.engine.object_keys import manifest_of_key, object_key
from fmcluster.engine.waiting import growing, pause
from fmcluster.render.documents import Document

__all__ = ["CLUSTER_ID_LABEL", "CLUSTER_LABEL", "KubeAccess", "KubeApiError", "KubeObject", "describe",
           "manifest_of_key", "object_key", "owned_objects"]

CLUSTER_LABEL = "fmcluster.io/cluster"
CLUSTER_ID_LABEL = "fmcluster.io/cluster-id"
TEARDOWN_FIRST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService")
# API groups Kubernetes serves itself: an object of another group is a custom resource.
BUILTIN_GROUPS = frozenset({"", "apps", "batch", "policy", "rbac.authorization.k8s.io", "storage.k8s.io",
                            "node.k8s.io", "scheduling.k8s.io", "apiextensions.k8s.io", "admissionregistration.k8s.io",
                            "apiregistration.k8s.io", "networking.k8s.io", "coordination.k8s.io",
                            "discovery.k8s.io", "autoscaling"})


class KubeObject(Resource):
    """One Kubernetes object fmcluster owns in EKS cluster ``cluster``. With a document, its body is the manifest
    (it may hold ``${…}`` references); without one, ``manifest`` (or the key) says which object it is, and it can
    only be read and deleted."""

    kind = "kube_object"
    # Kubernetes deletes an object in any state: a Deployment that never became Available need not first.
    settles_before_delete = False
    # In-cluster objects go first on teardown, before the node groups, add-ons and cluster (ranks 20+).
    teardown_rank: ClassVar[int] = 10

    def __init__(self, key: str, document: Document | None, cluster: str, manifest: dict[str, Any] | None = None):
        self.key = key
        self.document = document
        self.cluster = cluster
        self.manifest = document.body if document is not None else (manifest or manifest_of_key(key))
        meta = self.manifest.get("metadata") or {}
        self.api_version: str = self.manifest["apiVersion"]
        self.object_kind: str = self.manifest["kind"]
        self.object_name: str = meta["name"]
        self.namespace: str | None = meta.get("namespace")
        if self.object_kind in ("Deployment", "Job"):
            # Pods that never start (no node to run on, an image that never pulls) leave these not ready for ever:
            # give up after the Deployment controller's own progress deadline (progressDeadlineSeconds, 600 s by
            # default), naming the object, even when the command has no --timeout.
            self.wait_limit_s = 600.0  # type: ignore[misc]
        # ``destroy`` orders in-cluster objects by rank alone (it works from what discovery finds): webhooks and
        # aggregated APIs first, so that no later delete waits on a controller that is already gone; then custom
        # resources (queue objects), while the controllers they belong to still run; what holds other objects last.
        if self.object_kind in TEARDOWN_FIRST:
            self.teardown_rank = 6  # type: ignore[misc]
        elif self.group not in BUILTIN_GROUPS:
            self.teardown_rank = 8  # type: ignore[misc]
        elif self.object_kind in ("Namespace", "CustomResourceDefinition"):
            self.teardown_rank = 11  # type: ignore[misc]

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def label(self) -> str:
        return f"{describe(self.manifest)} (EKS cluster {self.cluster})"

    # -- what fmcluster sends ------------------------------------------------------------------------
    def body(self, ctx: Context, partial: bool = False) -> dict[str, Any]:
        """The manifest with its references filled and fmcluster's ownership labels."""
        body = ctx.resolve(self.document.body, partial=partial)
        metadata = dict(body.get("metadata") or {})
        labels = dict(metadata.get("labels") or {})
        labels[CLUSTER_LABEL] = ctx.cluster
        if ctx.cluster_id:
            labels[CLUSTER_ID_LABEL] = ctx.cluster_id
        metadata["labels"] = labels
        return {**body, "metadata": metadata}

    def request(self, ctx: Context) -> Any:
        return self.body(ctx, partial=True) if self.document is not None else None

    def desired(self, ctx: Context) -> dict[str, Any]:
        return flatten(self.body(ctx, partial=True)) if self.document is not None else {}

    # -- engine verbs --------------------------------------------------------------------------------
    def _target(self, ctx: Context, verb: str = "reading") -> tuple[KubeApi, type] | None:
        """The cluster's API and this object's resource class; None when either is gone."""
        api = KubeApi.of(ctx, self.cluster)
        if api is None:
            return None
        rtype = api.resource_type(self.api_version, self.object_kind, f"{verb} {self.label}")
        return None if rtype is None else (api, rtype)

    def _namespace(self, rtype: type) -> str | None:
        from lightkube.core.resource import NamespacedResource

        return (self.namespace or "default") if issubclass(rtype, NamespacedResource) else None

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        target = self._target(ctx)
        if target is None:
            return None
        api, rtype = target
        try:
            live = api.call(f"reading {self.label}", lambda: dict(api.client.get(
                rtype, self.object_name, namespace=self._namespace(rtype))))
        except KubeApiError as exc:
            if exc.code == 404:
                return None
            raise
        meta = live.get("metadata") or {}
        require_ours(self.label, meta.get("labels") or {}, ctx)
        attributes = flatten(_project(live, self.body(ctx, partial=True))) if self.document is not None else {}
        status, phase, detail = _state(live)
        return Observed(meta.get("uid"), status, phase, {f"{self.kind}.{self.key}.uid": meta.get("uid")},
                        detail=detail, attributes=attributes)

    def _apply(self, ctx: Context, verb: str) -> Observed:
        target = self._target(ctx, verb)
        if target is None:
            raise KubeApiError(f"{verb} {self.label}", 404, "NotFound",
                               f"the cluster's API serves no {self.object_kind} in {self.api_version}"
                               if KubeApi.of(ctx, self.cluster) else "the EKS cluster has no Kubernetes API yet")
        api, rtype = target
        obj = rtype(self.body(ctx))
        started = time.monotonic()
        while True:
            try:
                live = api.call(f"{verb} {self.label}", lambda: dict(api.client.apply(
                    obj, namespace=self._namespace(rtype), field_manager="fmcluster", force=True)))
                break
            except KubeApiError as exc:
                if not webhook_unavailable(exc):
                    raise
                # A fail-closed webhook whose server does not answer yet (its pods are starting, its endpoints
                # not published): the API server refuses until it does. Wait for it, as long as the command may.
                pause(growing()(time.monotonic() - started), ctx.stop)
        meta = live.get("metadata") or {}
        status, phase, detail = _state(live)
        return Observed(meta.get("uid"), status, phase, {f"{self.kind}.{self.key}.uid": meta.get("uid")},
                        detail=detail)

    def create(self, ctx: Context, token: str) -> Observed:
        # Server-side apply creates or updates: a re-run after a crash between the call and its record converges.
        return self._apply(ctx, "creating")

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        return self._apply(ctx, "updating")

    def delete(self, ctx: Context, observed: Observed) -> None:
        target = self._target(ctx, "deleting")
        if target is None:
            return  # the cluster, or the CRD that served this kind (and its objects with it), is gone
        api, rtype = target
        try:
            api.call(f"deleting {self.label}", lambda: api.client.delete(
                rtype, self.object_name, namespace=self._namespace(rtype)))
        except KubeApiError as exc:
            if exc.code != 404:
                raise


def webhook_unavailable(exc: KubeApiError) -> bool:
    """Whether the API server refused a request because an admission webhook could not be called (the
    apiserver's "failed calling webhook" InternalError, HTTP 500; a webhook's own denial is a 4xx)."""
    return exc.code == 500 and "failed calling webhook" in str(exc)


def _condition(live: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (live.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _state(live: dict[str, Any]) -> tuple[str, str, str]:
    """(status, phase, detail) of a live object: being deleted is pending until it is gone; a CRD is ready once
    established (its kind is served only then); a Deployment once Available with every replica updated and
    available (``kubectl rollout status``'s rule); a Job once Complete (Helm waits for a hook Job so)."""
    if (live.get("metadata") or {}).get("deletionTimestamp"):
        return "DELETING", "pending", ""
    kind = live.get("kind")
    status = live.get("status") or {}
    if kind == "CustomResourceDefinition":
        established = _condition(live, "Established")
        if not established or established.get("status") != "True":
            return "ESTABLISHING", "pending", ""
    elif kind == "Deployment":
        return deployment_state(live)
    elif kind == "Job":
        for condition, outcome in (("Complete", ("COMPLETE", "ready")), ("Failed", ("FAILED", "failed"))):
            found = _condition(live, condition)
            if found and found.get("status") == "True":
                return outcome[0], outcome[1], found.get("message") or found.get("reason") or ""
        return "RUNNING", "pending", (f"{status.get('active', 0)} active, {status.get('failed', 0)} failed; waiting "
                                      "for it to complete")
    return "present", "ready", ""


def deployment_state(live: dict[str, Any]) -> tuple[str, str, str]:
    """(status, phase, detail) of a Deployment: AVAILABLE when its controller has seen the current spec, every
    wanted replica runs it, and all are available ("Deployments", "Complete Deployment"; what ``kubectl rollout
    status`` waits for)."""
    meta = live.get("metadata") or {}
    status = live.get("status") or {}
    wanted = (live.get("spec") or {}).get("replicas", 1)
    available = status.get("availableReplicas", 0) or 0
    seen = (status.get("observedGeneration") or 0) >= (meta.get("generation") or 0)
    condition = _condition(live, "Available")
    ready = (seen and available >= wanted and (status.get("updatedReplicas", 0) or 0) >= wanted
             and (wanted == 0 or (condition is not None and condition.get("status") == "True")))
    detail = f"{available}/{wanted} replicas available"
    if ready:
        return "AVAILABLE", "ready", detail
    progressing = _condition(live, "Progressing")
    if progressing and progressing.get("status") == "False" and progressing.get("reason") == "ProgressDeadlineExceeded":
        return "STALLED", "failed", f"{detail}: {progressing.get('message') or 'ProgressDeadlineExceeded'}"
    if condition is not None and condition.get("message"):
        detail += f": {condition['message']}"
    return "UNAVAILABLE", "pending", detail


def _project(live: Any, wanted: Any) -> Any:
    """``live`` cut to the shape of ``wanted``: the values at the paths the manifest sets, so what the API server
    defaults (a uid, a status, a field fmcluster leaves alone) never shows as a difference."""
    if wanted is UNKNOWN:
        return live
    if isinstance(wanted, dict) and isinstance(live, dict):
        if not wanted:
            return {}
        return {k: _project(live[k], v) for k, v in wanted.items() if k in live}
    if isinstance(wanted, list) and isinstance(live, list) and len(wanted) == len(live):
        return [_project(item, want) for item, want in zip(live, wanted, strict=True)]
    return live


def require_ours(what: str, labels: dict[str, str], ctx: Context) -> None:
    """Refuse an object found by name that does not carry this cluster's ownership labels."""
    owner = labels.get(CLUSTER_LABEL)
    if owner == ctx.cluster and (not ctx.cluster_id or labels.get(CLUSTER_ID_LABEL) == ctx.cluster_id):
        return
    if owner is None:
        why = f"fmcluster did not create it (it has no {CLUSTER_LABEL} label)"
    elif owner != ctx.cluster:
        why = f"it belongs to fmcluster cluster {owner}"
    else:
        why = (f"it was made for an earlier cluster named {owner} (cluster id {labels.get(CLUSTER_ID_LABEL, 'none')}, "
               f"this one is {ctx.cluster_id})")
    raise ForeignResource(f"{what} already exists and is not this cluster's: {why}. fmcluster will neither adopt "
                          "nor delete it; delete or rename it, or give the cluster another name")


def describe(manifest: dict[str, Any]) -> str:
    """``ConfigMap settings in namespace team``: an object as messages name it."""
    meta = manifest.get("metadata") or {}
    where = f" in namespace {meta['namespace']}" if meta.get("namespace") else ""
    return f"{manifest.get('kind')} {meta.get('name')}{where}"


def owned_objects(access: KubeAccess, kinds: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Every object of the given ``(apiVersion, kind)`` pairs labelled for ``access.cluster``, as a manifest with
    apiVersion, kind and metadata (name, namespace, labels): what discovery and destroy find when state lost it. A
    kind the cluster does not serve (its CRD is absent) yields nothing."""
    from lightkube.core.resource import NamespacedResource

    api = KubeApi(access)
    found: list[dict[str, Any]] = []
    try:
        for api_version, kind in kinds:
            rtype = api.resource_type(api_version, kind)
            if rtype is None:
                continue
            namespaced = issubclass(rtype, NamespacedResource)
            items = api.call(f"listing {kind} objects of EKS cluster {access.cluster}",
                             lambda rtype=rtype, namespaced=namespaced: [dict(item) for item in api.client.list(
                                 rtype, namespace="*" if namespaced else None, labels={CLUSTER_LABEL: access.cluster})])
            for item in items:
                meta = item.get("metadata") or {}
                found.append({"apiVersion": api_version, "kind": kind, "metadata": {
                    "name": meta.get("name"), **({"namespace": meta["namespace"]} if namespaced else {}),
                    "labels": dict(meta.get("labels") or {})}})
    finally:
        api.close()
    return found

