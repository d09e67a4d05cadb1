"""fmcluster's own EKS token and Kubernetes objects (fmcluster.backends.eks.kubernetes.client) against the sandbox's EKS
emulator and its per-cluster Kubernetes API, over HTTPS: objects made, read back without drift, changed, refused when
someone else's, deleted, found by label; the API's refusals as fmcluster errors; and a walk of the engine."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import socket
import threading
import time
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fixtures.eks_kube import CLUSTER_ID, REGION, add_system_nodes, context_for, kube_object

from fmcluster.backends.eks.kubernetes.client import (
    CLUSTER_ID_LABEL,
    CLUSTER_LABEL,
    KubeAccess,
    KubeApiError,
    KubeObject,
    manifest_of_key,
    object_key,
    owned_objects,
)
from fmcluster.backends.eks.kubernetes.token import eks_token
from fmcluster.backends.eks.software.apply_order import wire
from fmcluster.backends.eks.software.releases import SCHEDULERS, crds
from fmcluster.connection import aws
from fmcluster.engine import Context, Engine, ForeignResource, graph
from fmcluster.render.documents import Document
from fmcluster.state.store import StateStore

pytest.importorskip("fmcluster_sandbox.eks")

ADMIN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
VIEW = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"


def _manifests(namespace: str) -> list[dict[str, Any]]:
    """A Namespace, a ConfigMap in it, Kueue's ResourceFlavor CRD and a ResourceFlavor."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": namespace},
         "data": {"queue": "train"}},
        next(crd for crd in crds(SCHEDULERS["kueue"]) if crd["metadata"]["name"] == "resourceflavors.kueue.x-k8s.io"),
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f"p5-{namespace}"},
         "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}},
    ]


def _ready(ctx: Context, objects: list[KubeObject]) -> None:
    for obj in objects:
        made = obj.create(ctx, "token")
        assert made.id and made.phase == "ready", (obj.name, made)
        ctx.publish(made.outputs)


def test_the_token_is_accepted_and_describes_the_cluster_it_is_for(ctx, cluster):
    token = eks_token(cluster, REGION)
    assert token.startswith("k8s-aws-v1.") and not token.endswith("=")
    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = parse_qs(urlsplit(url).query)
    assert query["Action"] == ["GetCallerIdentity"] and query["X-Amz-Expires"] == ["60"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")

    access = KubeAccess.of(ctx, cluster)
    assert access is not None and access.cluster == cluster and access.endpoint.startswith("https://")
    assert KubeAccess.of(ctx, cluster) is access  # once per command
    assert KubeAccess.of(ctx, "no-such-cluster") is None
    from lightkube.resources.core_v1 import Namespace

    with access.client() as client:  # verifies TLS with the cluster's CA, and the API accepts the token
        assert client.get(Namespace, "default").metadata.name == "default"


def _cutting_proxy(upstream: tuple[str, int], cut: int) -> tuple[int, list[int], socket.socket]:
    """A TCP listener in front of the sandbox that closes its first ``cut`` connections at once (an endpoint too
    busy to finish a TLS handshake), then passes bytes through: (its port, [connections seen], the listener)."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen = [0]

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                seen[0] += 1
                if seen[0] <= cut:
                    conn.close()
                    continue
                far = socket.create_connection(upstream)
                for a, b in ((conn, far), (far, conn)):
                    threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], seen, listener


def test_a_connection_cut_before_the_request_goes_out_is_tried_again(ctx, cluster):
    from lightkube.resources.core_v1 import Namespace

    access = KubeAccess.of(ctx, cluster)
    assert access is not None
    where = urlsplit(access.endpoint)
    port, seen, listener = _cutting_proxy((where.hostname, where.port), cut=2)
    cut_off = dataclasses.replace(access, endpoint=f"https://127.0.0.1:{port}{where.path}")
    try:
        with cut_off.client() as client:
            assert client.get(Namespace, "default").metadata.name == "default"
    finally:
        listener.close()
    assert seen[0] == 3  # two cut, the third answered


def test_one_token_serves_calls_until_it_nears_its_end(ctx, cluster, monkeypatch):
    from lightkube.resources.core_v1 import Namespace

    from fmcluster.backends.eks.kubernetes import access as kube_access

    made: list[str] = []

    def counted(name: str, region: str) -> str:
        made.append(name)
        return eks_token(name, region)

    monkeypatch.setattr(kube_access, "eks_token", counted)
    access = KubeAccess.of(ctx, cluster)
    with access.client() as client:
        for _ in range(3):
            assert client.get(Namespace, "default").metadata.name == "default"
    assert made == [cluster]  # one token for the calls within its lifetime
    monkeypatch.setattr(kube_access, "REFRESH_AFTER_SECONDS", -1)  # as if each call came 50 s after the last
    with access.client() as client:
        for _ in range(2):
            assert client.get(Namespace, "default").metadata.name == "default"
    assert made == [cluster] * 3  # a new token for each


def test_objects_are_made_read_back_without_drift_changed_and_deleted(ctx, cluster):
    namespace = f"team-{uuid.uuid4().hex[:6]}"
    objects = [kube_object(cluster, m) for m in _manifests(namespace)]
    ns, config, crd, flavor = objects
    wire(objects, f"eks_cluster:{cluster}")
    assert config.extra_edges == (f"eks_cluster:{cluster}", ns.name)
    assert flavor.extra_edges == (f"eks_cluster:{cluster}", crd.name)
    assert manifest_of_key(crd.key) == {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                                        "metadata": {"name": "resourceflavors.kueue.x-k8s.io"}}
    assert "." not in crd.key and manifest_of_key(config.key)["metadata"] == {"name": "settings",
                                                                               "namespace": namespace}

    assert all(o.read(ctx, None) is None for o in objects)  # nothing yet; the flavor's CRD is not even served
    _ready(ctx, objects)
    for obj in objects:
        observed = obj.read(ctx, None)
        assert observed is not None and observed.phase == "ready"
        assert obj.changes(ctx, observed) == [], obj.name  # server defaults (uid, status, …) are not drift
        assert observed.attributes[f"metadata.labels.{CLUSTER_LABEL}"] == cluster
        assert observed.attributes[f"metadata.labels.{CLUSTER_ID_LABEL}"] == CLUSTER_ID
    assert obj.create(ctx, "again").id == observed.id  # applying again (a re-run after kill -9) changes nothing

    edited = _manifests(namespace)[1]
    edited["data"] = {"queue": "eval", "priority": "high"}
    config2 = kube_object(cluster, edited)
    observed = config2.read(ctx, None)
    changes = config2.changes(ctx, observed)
    assert {(c.path, c.old, c.new) for c in changes} == {("data.queue", "train", "eval"),
                                                         ("data.priority", None, "high")}
    config2.update(ctx, observed, changes, "token")
    observed = config2.read(ctx, None)
    assert config2.changes(ctx, observed) == [] and observed.attributes["data.queue"] == "eval"

    config2.delete(ctx, observed)
    assert config2.read(ctx, None) is None
    config2.delete(ctx, observed)  # already gone: fine
    crd.delete(ctx, crd.read(ctx, None))
    assert flavor.read(ctx, None) is None  # its CRD is gone, and its objects with it
    flavor.delete(ctx, observed)  # nothing serves the kind any more: nothing to do
    ns.delete(ctx, ns.read(ctx, None))
    assert ns.read(ctx, None) is None


def test_an_object_fmcluster_did_not_label_is_foreign(ctx, cluster):
    from lightkube.resources.core_v1 import ConfigMap

    name = f"theirs-{uuid.uuid4().hex[:6]}"
    access = KubeAccess.of(ctx, cluster)
    with access.client() as client:
        client.create(ConfigMap.from_dict({"metadata": {"name": name, "namespace": "default"}, "data": {"a": "b"}}))
        other = {"metadata": {"name": f"{name}-x", "namespace": "default",
                              "labels": {CLUSTER_LABEL: "another", CLUSTER_ID_LABEL: "ffff"}}}
        client.create(ConfigMap.from_dict(other))
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    with pytest.raises(ForeignResource, match=f"ConfigMap {name} in namespace default .*no {CLUSTER_LABEL} label"):
        kube_object(cluster, manifest).read(ctx, None)
    manifest["metadata"]["name"] = f"{name}-x"
    with pytest.raises(ForeignResource, match="belongs to fmcluster cluster another"):
        kube_object(cluster, manifest).read(ctx, None)
    # Without a document (destroy from a record) the same check holds: nothing foreign is ever deleted.
    with pytest.raises(ForeignResource):
        KubeObject(object_key(manifest), None, cluster).read(ctx, None)


def test_owned_objects_finds_exactly_the_labelled_ones(ctx, cluster):
    from lightkube.resources.core_v1 import ConfigMap

    namespace = f"own-{uuid.uuid4().hex[:6]}"
    ns, config, crd, flavor = objects = [kube_object(cluster, m) for m in _manifests(namespace)]
    _ready(ctx, objects)
    access = KubeAccess.of(ctx, cluster)
    with access.client() as client:
        client.create(ConfigMap.from_dict({"metadata": {"name": "unlabelled", "namespace": namespace}}))
    found = owned_objects(access, [("v1", "Namespace"), ("v1", "ConfigMap"),
                                   ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"), ("example.com/v1", "Widget")])
    mine = {(f["kind"], f["metadata"]["name"], f["metadata"].get("namespace")) for f in found
            if f["metadata"]["labels"].get(CLUSTER_ID_LABEL) == CLUSTER_ID}
    assert {(f["kind"], f["metadata"]["name"]) for f in found if f["kind"] != "ResourceFlavor"} >= {
        ("Namespace", namespace), ("ConfigMap", "settings")}
    assert ("ConfigMap", "unlabelled", namespace) not in {(f["kind"], f["metadata"]["name"],
                                                           f["metadata"].get("namespace")) for f in found}
    assert {("Namespace", namespace, None), ("ConfigMap", "settings", namespace),
            ("ResourceFlavor", flavor.object_name, None)} <= mine
    assert all(f["metadata"]["labels"][CLUSTER_LABEL] == cluster for f in found)
    # What discovery found is enough to delete it without the spec.
    for manifest in found:
        if manifest["metadata"].get("namespace") == namespace or manifest["metadata"]["name"] in (
                namespace, flavor.object_name):
            gone = KubeObject(object_key(manifest), None, cluster, manifest)
            gone.delete(ctx, gone.read(ctx, None))
            assert gone.read(ctx, None) is None
    crd.delete(ctx, crd.read(ctx, None))
    assert owned_objects(access, [("kueue.x-k8s.io/v1beta2", "ResourceFlavor")]) == []  # the CRD is gone


def test_the_api_refusing_a_manifest_is_an_error_naming_the_object(ctx, cluster):
    unknown_field = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "typo", "namespace": "default"},
                     "dataa": {"a": "b"}}
    # fmcluster applies server-side: the API server converts the applied configuration to the typed schema before
    # field validation, and an unknown field fails that with a 500 (apiserver handlers/patch.go applyPatcher;
    # kubernetes/kubernetes #122480, #139253)
    with pytest.raises(KubeApiError, match=r"ConfigMap typo in namespace default .*: the Kubernetes API said 500 "
                                           r".*failed to create typed patch object .*\.dataa: field not declared in "
                                           r"schema") as refused:
        kube_object(cluster, unknown_field).create(ctx, "token")
    assert refused.value.exit_code == 1
    bad_name = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not-A-Name", "namespace": "default"}}
    with pytest.raises(KubeApiError, match="said 422 Invalid"):
        KubeObject("bad-name", Document("x", "kube_object", "bad-name", "kubernetes", {}, "", bad_name),
                   cluster).create(ctx, "token")


def test_a_principal_without_an_access_entry_gets_a_clear_error(sandbox, ctx, cluster, monkeypatch):
    iam, eks = sandbox.client("iam", REGION), sandbox.client("eks", REGION)
    user = iam.create_user(UserName=f"outsider-{uuid.uuid4().hex[:6]}")["User"]
    key = iam.create_access_key(UserName=user["UserName"])["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    aws.configure(None, REGION, sandbox.endpoint_url)  # new sessions, with the outsider's keys
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nope", "namespace": "default"}}
    refusal = r"reading ConfigMap nope .*said 401 Unauthorized[\s\S]*needs an access entry"
    with pytest.raises(KubeApiError, match=refusal) as refused:
        kube_object(cluster, manifest).read(context_for(cluster), None)
    assert user["Arn"] in str(refused.value)

    eks.create_access_entry(clusterName=cluster, principalArn=user["Arn"])
    eks.associate_access_policy(clusterName=cluster, principalArn=user["Arn"], policyArn=VIEW,
                                accessScope={"type": "cluster"})
    viewer = context_for(cluster)
    assert kube_object(cluster, manifest).read(viewer, None) is None  # it may look
    with pytest.raises(KubeApiError, match=r"creating ConfigMap nope .*said 403 Forbidden[\s\S]*access policy"):
        kube_object(cluster, manifest).create(viewer, "token")  # but not write


def test_the_engine_applies_plans_and_destroys_kube_objects(ctx, cluster, tmp_path):
    namespace = f"walk-{uuid.uuid4().hex[:6]}"
    objects = [kube_object(cluster, m) for m in _manifests(namespace)]
    wire(objects)  # no EKS cluster resource in this plan: the cluster is made above
    ordered = graph.wire(objects)
    store = StateStore(tmp_path / "state.db")
    engine = Engine(ctx, store)
    engine.apply(ordered)
    assert {c.action for c in Engine(context_for(cluster), store).plan(ordered)} == {"no-op"}

    # destroy from the state records alone: each key says which object it is
    records = [KubeObject(o.key, None, cluster) for o in objects]
    Engine(context_for(cluster), store).destroy(graph.by_rank(records))
    assert all(o.read(context_for(cluster), None) is None for o in objects)


@pytest.mark.parametrize("scheduler", ["kueue", "volcano", "kai"])
def test_every_rendered_object_applies_and_reads_back_without_drift(sandbox, ctx, cluster, tmp_path, scheduler):
    """What fmcluster renders for a spec (the scheduler's and the MPI Operator's releases, device plugins, Lustre
    volume, the scheduler's queues) through the engine: made in graph order, then a plan of no-ops (server defaults
    inside Deployments, DaemonSets and CRDs are not drift), then destroyed."""
    from fixtures.eks_specs import eks_spec

    from fmcluster.backends.eks.software.manifests import manifests
    from fmcluster.validate.requests import with_stand_ins

    add_system_nodes(sandbox, cluster)  # where the releases' controllers may run
    objects = [kube_object(cluster, m) for m in with_stand_ins(manifests(eks_spec(scheduler)))]
    wire(objects)
    ordered = graph.wire(objects)
    store = StateStore(tmp_path / "state.db")
    Engine(ctx, store).apply(ordered, timeout=240)  # the controllers Available, the hook Jobs complete
    drift = [c.as_json() for c in Engine(context_for(cluster), store).plan(ordered) if c.action != "no-op"]
    assert drift == []
    Engine(context_for(cluster), store).destroy(ordered)
    assert [o.name for o in objects if o.read(context_for(cluster), None) is not None] == []


def test_create_waits_for_a_deployment_to_be_available_and_a_timeout_names_it(ctx, cluster, tmp_path):
    """A controller Deployment with no node its pods could run on never becomes Available: the walk waits for it
    (not for ever: the command's --timeout) and then names it and what it last reported. The Deployment's own
    dependents are not applied meanwhile; its delete does not wait for it to become ready first."""
    from fmcluster.engine import TimedOut

    namespace = f"wait-{uuid.uuid4().hex[:6]}"
    pod = {"nodeSelector": {"fmcluster.io/node-role": "system"},
           "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "controller", "namespace": namespace},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "controller"}},
                           "template": {"metadata": {"labels": {"app": "controller"}}, "spec": pod}}}
    after = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after", "namespace": namespace}}
    objects = [kube_object(cluster, m) for m in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, deployment, after)]
    wire(objects)
    objects[2].extra_edges += (objects[1].name,)
    ordered = graph.wire(objects)
    store = StateStore(tmp_path / "state.db")
    with pytest.raises(TimedOut, match=rf"gave up waiting after 0 min for Deployment controller in namespace "
                                       rf"{namespace} \(EKS cluster {cluster}\) \(UNAVAILABLE 0/1 replicas available"):
        Engine(ctx, store).apply(ordered, timeout=3)
    assert objects[2].read(context_for(cluster), None) is None  # its dependent waited
    Engine(context_for(cluster), store).destroy(graph.by_rank([KubeObject(o.key, None, cluster) for o in objects]))
    assert all(o.read(context_for(cluster), None) is None for o in objects)


def test_a_queue_object_waits_while_the_schedulers_webhook_cannot_answer(ctx, cluster):
    """Kueue's fail-closed webhooks with no ready endpoint behind their Service: the API server refuses the
    ClusterQueue (500 "failed calling webhook"), and fmcluster's apply keeps trying until the command stops,
    instead of failing the create."""
    from fmcluster.backends.eks.software.scheduler_install import install_objects
    from fmcluster.engine.waiting import Stop, Stopped

    release = [o for o in install_objects(SCHEDULERS["kueue"]) if o["kind"] in (
        "CustomResourceDefinition", "Namespace", "Service", "ValidatingWebhookConfiguration")
        and o["metadata"]["name"] != "kube-system"]
    made = [kube_object(cluster, m) for m in release]
    for obj in made:  # the webhook configuration and its Service, but no controller behind it
        obj.create(ctx, "token")
    queue = kube_object(cluster, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                  "metadata": {"name": f"waits-{uuid.uuid4().hex[:6]}"}, "spec": {}})
    waiting = context_for(cluster)
    waiting.stop = Stop(time.monotonic() + 3)
    try:
        with pytest.raises(Stopped):  # the command's deadline ended the wait; no error for the resource
            queue.create(waiting, "token")
        assert queue.read(context_for(cluster), None) is None
    finally:
        for obj in reversed(made):
            if obj.object_kind == "ValidatingWebhookConfiguration":
                obj.delete(context_for(cluster), obj.read(context_for(cluster), None))
        for obj in reversed(made):
            observed = obj.read(context_for(cluster), None)
            if observed is not None:
                obj.delete(context_for(cluster), observed)
