"""What the graph orders after an admission webhook (fmcluster/backends/eks/software/webhook_order.py,
apply_order.wire), and the engine's drawn walk order that tests/backends/eks/test_eks_webhook_teardown_order.py relies
on. Offline: no sandbox.

The facts are hand-typed from the releases and the reference's notes on them
(/work/shared/reference/kubernetes-schedulers/README.md): Volcano's seven webhooks all call Service
``volcano-system/volcano-admission-service`` (Deployment ``volcano-admission``), and ``validatequeue.volcano.sh``
intercepts a Queue's CREATE, UPDATE and DELETE; Kueue's 43 webhooks all call ``kueue-system/kueue-webhook-service``
(Deployment ``kueue-controller-manager``) and intercept Deployments in every namespace but ``kube-system`` and
``kueue-system``; KAI's operator makes its webhooks at run time from ``Config kai-config``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from fixtures.eks_specs import eks_spec

from fmcluster.backends.eks.kubernetes.client import KubeObject
from fmcluster.backends.eks.software.apply_order import wire
from fmcluster.backends.eks.software.webhook_order import guard_edges, plural
from fmcluster.engine import Context, Engine, Observed, Resource, graph
from fmcluster.engine.object_keys import object_key
from fmcluster.render.documents import Document
from fmcluster.state.store import StateStore


def _objects(manifests: list[dict[str, Any]]) -> list[KubeObject]:
    objects = []
    for manifest in manifests:
        key = object_key(manifest)
        objects.append(KubeObject(key, Document(key, "kube_object", key, "kubernetes", {}, "", manifest), "c"))
    return objects


def _planned(scheduler: str, **queue: Any) -> dict[tuple[str, str], KubeObject]:
    from fmcluster.backends.eks.software.manifests import manifests
    from fmcluster.validate.requests import with_stand_ins

    objects = _objects(with_stand_ins(manifests(eks_spec(scheduler, **queue))))
    wire(objects, "eks_cluster:c")
    by_name = {o.name: o for o in objects}
    for o in objects:
        o.depends_on = tuple(d for d in o.extra_edges if d in by_name)
    graph.in_order(objects)  # no cycle
    return {(o.object_kind, o.object_name): o for o in objects}


def _after(obj: KubeObject, plan: dict[tuple[str, str], KubeObject]) -> set[tuple[str, str]]:
    """Everything ``obj`` comes after on create (and before on destroy), as (kind, name)."""
    by_name = {o.name: o for o in plan.values()}
    seen: set[str] = set()
    frontier = list(obj.depends_on)
    while frontier:
        name = frontier.pop()
        if name not in seen and name in by_name:
            seen.add(name)
            frontier += by_name[name].depends_on
    return {(by_name[n].object_kind, by_name[n].object_name) for n in seen}


def test_volcanos_queue_comes_after_the_webhook_that_guards_its_delete_and_what_serves_it():
    plan = _planned("volcano")
    assert {("ValidatingWebhookConfiguration", "volcano-admission-service-queues-validate"),
            ("MutatingWebhookConfiguration", "volcano-admission-service-queues-mutate"),
            ("Service", "volcano-admission-service"), ("Deployment", "volcano-admission")} <= set(
        _after(plan["Queue", "gpu"], plan))
    # the server is not ordered after its own webhook
    assert ("ValidatingWebhookConfiguration", "volcano-admission-service-queues-validate") not in _after(
        plan["Deployment", "volcano-admission"], plan)


def test_kueues_objects_come_after_its_webhooks_in_the_namespaces_they_select():
    plan = _planned("kueue", nodes={"min": 0, "max": 2})  # elastic: the Cluster Autoscaler is installed too
    served = {("ValidatingWebhookConfiguration", "kueue-validating-webhook-configuration"),
              ("MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration"),
              ("Service", "kueue-webhook-service"), ("Deployment", "kueue-controller-manager")}
    for guarded in (("ClusterQueue", "gpu"), ("ResourceFlavor", "p5.48xlarge"), ("Deployment", "mpi-operator")):
        assert served <= _after(plan[guarded], plan), guarded
    autoscaler = next(o for (kind, _), o in plan.items() if kind == "Deployment" and o.namespace == "kube-system")
    assert not served & _after(autoscaler, plan)  # kube-system is outside Kueue's namespaceSelector


def test_kais_queues_come_after_the_operator_and_the_config_it_makes_its_webhooks_from():
    plan = _planned("kai")
    for name in ("gpu", "fmcluster", "default-queue"):
        assert {("Config", "kai-config"), ("Deployment", "kai-operator")} <= _after(plan["Queue", name], plan), name


def _webhook(**fields: Any) -> dict[str, Any]:
    hook = {"name": "check.example.com", "clientConfig": {"service": {"name": "hooks", "namespace": "hooks"}},
            "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["DELETE"],
                       "resources": ["widgets"]}]}
    return {**hook, **fields}


def _example(webhook: dict[str, Any]) -> tuple[list[KubeObject], dict[str, list[str]]]:
    pod = {"metadata": {"labels": {"app": "hooks"}}}
    objects = _objects([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"tier": "a"}}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "hooks"}, "webhooks": [webhook]},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks", "namespace": "hooks"},
         "spec": {"selector": {"app": "hooks"}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hooks", "namespace": "hooks"},
         "spec": {"selector": {"matchLabels": {"app": "hooks"}}, "template": pod}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "other", "namespace": "hooks"},
         "spec": {"selector": {"matchLabels": {"app": "other"}}, "template": {"metadata": {"labels": {"app": "o"}}}}},
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "team",
                                                                        "labels": {"size": "big"}}},
        {"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "w2", "namespace": "default"}},
    ])
    return objects, guard_edges(objects)


def _guarded(edges: dict[str, list[str]]) -> set[str]:
    return {name.split("__")[1] for name in edges}


@pytest.mark.parametrize(("fields", "guarded"), [
    ({}, {"w", "w2"}),  # any operation; matchPolicy Equivalent (the default) takes v2 of the same resource too
    ({"matchPolicy": "Exact"}, {"w"}),
    ({"namespaceSelector": {"matchLabels": {"tier": "a"}}}, {"w"}),  # the Namespace's own labels
    ({"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                  "values": ["team"]}]}}, {"w2"}),  # a label the API server adds
    ({"objectSelector": {"matchExpressions": [{"key": "size", "operator": "Exists"}]}}, {"w"}),
    ({"rules": [{"apiGroups": ["example.com"], "apiVersions": ["*"], "operations": ["*"], "resources": ["widgets"],
                 "scope": "Cluster"}]}, set()),  # the widgets are namespaced
    ({"rules": [{"apiGroups": ["example.com"], "apiVersions": ["*"], "operations": ["*"],
                 "resources": ["widgets/status"]}]}, set()),  # a subresource only
    ({"clientConfig": {"url": "https://hooks.example.com/check"}}, set()),  # nothing of the plan serves it
])
def test_which_objects_a_webhook_orders_follows_its_rules_and_selectors(fields, guarded):
    objects, edges = _example(_webhook(**fields))
    assert _guarded(edges) == guarded
    for name in edges:  # the configuration, the Service and the Deployment behind it; not the other Deployment
        assert sorted(e.split("__")[:2] for e in edges[name]) == [
            ["kube_object:Deployment", "hooks"], ["kube_object:Service", "hooks"],
            ["kube_object:ValidatingWebhookConfiguration", "hooks"]]


def test_a_kinds_resource_name_is_derived_as_kubernetes_derives_it():
    # hand-typed from the Kubernetes API reference's resource paths
    assert [plural(k) for k in ("Deployment", "StatefulSet", "Ingress", "NetworkPolicy", "PriorityClass")] == [
        "deployments", "statefulsets", "ingresses", "networkpolicies", "priorityclasses"]


class Step(Resource):
    kind = "step"

    def __init__(self, key: str, after: tuple[str, ...] = ()):
        self.key, self.depends_on, self.exists = key, tuple(f"step:{a}" for a in after), False

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        return Observed(self.key, "ACTIVE", "ready") if self.exists else None

    def create(self, ctx: Context, token: str) -> Observed:
        self.exists = True
        return Observed(self.key, "ACTIVE", "ready")

    def delete(self, ctx: Context, observed: Observed) -> None:
        self.exists = False


def _walk(tmp_path, seed: int, action: str, steps: list[Step]) -> list[str]:
    done: list[str] = []
    ctx = Context(cluster="order", region="us-east-1", client=lambda service: None)
    engine = Engine(ctx, StateStore(tmp_path / f"{seed}-{action}.db"), order=random.Random(seed),
                    emit=lambda e: done.append(e.resource) if e.kind == "done" else None)
    engine.poll_interval = lambda waited: 0.001  # a step is gone as soon as it is deleted
    if action == "destroy":
        for step in steps:
            step.exists = True
    getattr(engine, action)(steps)
    return done


@pytest.mark.parametrize("action", ["apply", "destroy"])
def test_a_seeded_walk_draws_one_order_of_independent_steps_and_keeps_every_dependency(tmp_path, action):
    steps = [Step("root"), *(Step(f"leaf{i}", ("root",)) for i in range(6)), Step("last", ("leaf0", "leaf5"))]
    orders = {seed: _walk(tmp_path, seed, action, steps) for seed in range(6)}
    for order in orders.values():
        assert sorted(order) == sorted(s.name for s in steps)
        position = order.index if action == "apply" else (lambda name, order=order: -order.index(name))
        assert position("step:root") < min(position(f"step:leaf{i}") for i in range(6))
        assert position("step:last") > max(position("step:leaf0"), position("step:leaf5"))
    assert len({tuple(order) for order in orders.values()}) > 1  # the seeds draw different orders
    assert _walk(tmp_path / "again", 3, action, steps) == orders[3]  # and a seed draws the same one again
