"""The upstream releases fmcluster ships (fmcluster/backends/eks/software/releases/) are the reference's bytes, and the
engine applies them in the order each release needs: CRDs, the Namespace, pre-install hooks by weight, the rest; custom
resources (queue objects) and the MPI Operator only once the scheduler's webhook server is Available; on teardown,
webhooks first."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from fixtures.eks_specs import eks_spec

from fmcluster.backends.eks.kubernetes import client as kube
from fmcluster.backends.eks.nodes import system_nodes
from fmcluster.backends.eks.software import apply_order
from fmcluster.backends.eks.software.manifests import manifests
from fmcluster.backends.eks.software.releases import RELEASES, SCHEDULERS, manifest_bytes
from fmcluster.backends.eks.software.scheduler_install import COMPONENT_LABEL, controllers, install_objects
from fmcluster.engine.graph import by_rank, in_order
from fmcluster.engine.object_keys import object_key
from fmcluster.render.documents import Document

# Copied by hand from shared/reference/kubernetes-schedulers/rendered/summary.json ("charts"[].sha256 for the three
# rendered charts, "manifests"[].sha256 for the MPI Operator's deploy/v2beta1/mpi-operator.yaml), where render.py
# recorded them; `sha256sum` of the reference files gives the same.
SHA256 = {
    "kueue": "4b1ed2af1fd147104738f777c01f7b7743bf742db6ffaeaf85af37c97695d8d9",
    "volcano": "cad1673819f1d00fcccffa548462e12c6faed8f1762ecd947e7378c9b720538b",
    "kai": "69f87493d2259a7e08014fa3654d69b35d3f0684d947d45fb2085477eaba05bf",
    "mpi-operator": "b38def13a94abe60b2a4b3485239d77f64892b8fbd202e9e435a6031b7500a8f",
    # shared/reference/kubernetes-addons/rendered/summary.json, set "eks-computedomains" (sha256, bytes)
    "dra-driver-nvidia-gpu": "10cd7d662adf028398b21d6c53679e1d330bc90d670726802b8df24ee109c0d0",
}
# Sizes from the same summary ("bytes").
SIZES = {"kueue": 1_731_167, "volcano": 1_090_083, "kai": 769_331, "mpi-operator": 674_987,
         "dra-driver-nvidia-gpu": 29_380}


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: r.name)
def test_shipped_files_are_the_references_bytes(release) -> None:
    data = manifest_bytes(release)
    assert len(data) == SIZES[release.name]
    assert hashlib.sha256(data).hexdigest() == SHA256[release.name]


def _resources(scheduler: str) -> dict[str, kube.KubeObject]:
    objects = []
    for manifest in manifests(eks_spec(scheduler)):
        key = object_key(manifest)
        objects.append(kube.KubeObject(key, Document(f"{key}.yaml", "kube_object", key, "kubernetes", {}, "",
                                                     manifest), cluster="p5-train"))
    apply_order.wire(objects)
    names = {o.name for o in objects}
    for o in objects:  # the edges wire() sets (the Lustre references' providers are AWS resources, not here)
        assert set(o.extra_edges) <= names
        o.depends_on = o.extra_edges
    in_order(objects)  # refuses a cycle
    return {f"{o.object_kind}/{o.object_name}": o for o in objects}


def _before(objects: dict[str, kube.KubeObject], first: str, then: str) -> bool:
    """Whether ``then`` waits (directly or not) for ``first``."""
    by_name = {o.name: o for o in objects.values()}
    seen, frontier = set(), [objects[then].name]
    while frontier:
        for dependency in by_name[frontier.pop()].depends_on:
            if dependency not in seen:
                seen.add(dependency)
                frontier.append(dependency)
    return objects[first].name in seen


def test_kueue_order() -> None:
    objects = _resources("kueue")
    gate = "Deployment/kueue-controller-manager"
    # CRD before its custom resources; the Namespace fmcluster adds before what lives in it.
    assert _before(objects, "CustomResourceDefinition/clusterqueues.kueue.x-k8s.io", "ClusterQueue/gpu")
    assert _before(objects, "Namespace/kueue-system", gate)
    # Kueue's webhooks fail closed: queue objects, and the MPI Operator's Deployment (Kueue intercepts Deployments
    # outside kube-system and kueue-system), wait for the webhook server's Deployment.
    for then in ("ClusterQueue/gpu", "LocalQueue/gpu", "ResourceFlavor/p5.48xlarge", "Deployment/mpi-operator"):
        assert _before(objects, gate, then), then
    assert not _before(objects, gate, "DaemonSet/nvidia-device-plugin-daemonset")
    assert not _before(objects, "Deployment/mpi-operator", gate)


def test_volcano_hooks_run_first_and_queues_wait_for_admission() -> None:
    objects = _resources("volcano")
    # pre-install hooks: weight 0 (ServiceAccount, Role, RoleBinding) before weight 5 (the Job that makes the
    # webhook's certificate Secret), and the Job before the Deployments that mount it.
    for hook in ("ServiceAccount/volcano-admission-init", "Role/volcano-admission-init",
                 "RoleBinding/volcano-admission-init-role"):
        assert _before(objects, hook, "Job/volcano-admission-init")
    for deployment in ("volcano-admission", "volcano-controllers", "volcano-scheduler"):
        assert _before(objects, "Job/volcano-admission-init", f"Deployment/{deployment}")
    # The queue waits for the Deployment that serves the webhooks (Service volcano-admission-service), not others.
    assert _before(objects, "Deployment/volcano-admission", "Queue/gpu")
    assert not _before(objects, "Deployment/volcano-scheduler", "Queue/gpu")


def test_kai_hooks_in_weight_order_and_post_delete_left_out() -> None:
    objects = _resources("kai")
    # weights: -1 crd-manager RBAC, 1 topology-migration RBAC, 2 crd-upgrader Job, 3 kai-config and the script
    # ConfigMap, 4 topology-migration Job (the reference's summary, "hooks").
    chain = ["ClusterRoleBinding/kai-scheduler-crd-manager", "ClusterRoleBinding/kai-topology-migration",
             "Job/crd-upgrader", "Config/kai-config", "Job/topology-migration", "Deployment/kai-operator"]
    for first, then in zip(chain, chain[1:], strict=False):
        assert _before(objects, first, then), (first, then)
    assert _before(objects, "CustomResourceDefinition/configs.kai.scheduler", "Config/kai-config")
    assert "Job/post-delete-cleanup" not in objects and "ClusterRole/post-delete-cleanup" not in objects
    # No webhook in the release (the operator makes them): queue objects wait for the operator.
    assert _before(objects, "Deployment/kai-operator", "Queue/gpu")
    assert _before(objects, "Deployment/kai-operator", "Queue/default-queue")
    assert objects["RuntimeClass/nvidia"].manifest["handler"] == "nvidia"


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_controllers_land_on_the_system_nodes(scheduler: str) -> None:
    objects = manifests(eks_spec(scheduler))
    placed = [o for o in objects if o["kind"] in ("Deployment", "Job")]
    assert {o["metadata"]["name"] for o in placed if o["kind"] == "Deployment"} == {
        "kueue": {"kueue-controller-manager", "mpi-operator"},
        "volcano": {"volcano-admission", "volcano-controllers", "volcano-scheduler", "mpi-operator"},
        "kai": {"kai-operator", "mpi-operator"}}[scheduler]
    for obj in placed:
        pod = obj["spec"]["template"]["spec"]
        assert pod["nodeSelector"][system_nodes.LABEL_KEY] == system_nodes.LABEL_VALUE
        assert {"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true",
                "effect": "NoSchedule"} in pod["tolerations"]
    namespaces = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    assert {"kueue": "kueue-system", "volcano": "volcano-system", "kai": "kai-scheduler"}[scheduler] in namespaces
    assert "mpi-operator" in namespaces
    if scheduler == "kai":
        (config,) = [o for o in objects if o["kind"] == "Config"]
        assert config["spec"]["global"]["nodeSelector"] == {system_nodes.LABEL_KEY: system_nodes.LABEL_VALUE}


def test_the_files_stay_unchanged_in_memory_too() -> None:
    """Transforms work on copies: a second read of a release is the file's own objects."""
    first = install_objects(SCHEDULERS["kueue"])
    assert all(COMPONENT_LABEL in o["metadata"]["labels"] for o in first)
    (deployment,) = [o for o in install_objects(SCHEDULERS["kueue"]) if o["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["tolerations"].count(system_nodes.TOLERATION) == 1
    assert [o["metadata"]["name"] for o in controllers("kai")] == ["kai-operator", "mpi-operator"]


def test_teardown_deletes_webhooks_before_their_controllers() -> None:
    """destroy orders what discovery finds by rank: webhook configurations and APIServices go before the
    Deployments they call, custom resources before the controllers, Namespaces and CRDs last."""
    found = [kube.KubeObject(object_key(m), None, cluster="p5-train", manifest=m) for m in manifests(eks_spec("kueue"))]
    ordered = by_rank(found)
    names = {f"{o.object_kind}/{o.object_name}": o for o in ordered}
    # A teardown deletes a resource only once everything that depends on it is gone.
    controller = names["Deployment/kueue-controller-manager"]
    webhooks = ("ValidatingWebhookConfiguration/kueue-validating-webhook-configuration",
                "MutatingWebhookConfiguration/kueue-mutating-webhook-configuration",
                "APIService/v1beta1.visibility.kueue.x-k8s.io")
    for first in (*webhooks, "ClusterQueue/gpu"):
        assert controller.name in names[first].depends_on, first
    for first in webhooks:  # queue objects are deleted with no webhook left to call
        assert names["ClusterQueue/gpu"].name in names[first].depends_on, first
    assert names["Namespace/kueue-system"].name in controller.depends_on
    assert names["CustomResourceDefinition/clusterqueues.kueue.x-k8s.io"].name in names["ClusterQueue/gpu"].depends_on


def test_a_deployment_is_ready_only_when_available() -> None:
    """kubectl rollout status's rule ("Deployments", "Complete Deployment")."""
    def deployment(**status: Any) -> dict[str, Any]:
        return {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 1}, "status": status}

    available = {"type": "Available", "status": "True"}
    assert kube.deployment_state(deployment())[:2] == ("UNAVAILABLE", "pending")
    assert kube.deployment_state(deployment(observedGeneration=2, availableReplicas=1, updatedReplicas=1,
                                            conditions=[available]))[:2] == ("AVAILABLE", "ready")
    # an old generation's replicas are not the current spec's
    assert kube.deployment_state(deployment(observedGeneration=1, availableReplicas=1, updatedReplicas=1,
                                            conditions=[available]))[1] == "pending"
    assert kube.deployment_state(deployment(observedGeneration=2, availableReplicas=0, updatedReplicas=1, conditions=[
        {"type": "Available", "status": "False", "message": "Deployment does not have minimum availability."}])) == (
        "UNAVAILABLE", "pending", "0/1 replicas available: Deployment does not have minimum availability.")
    # the Deployment controller's verdict on a rollout that stopped making progress ("Failed Deployment")
    stalled = deployment(observedGeneration=2, availableReplicas=0, updatedReplicas=1, conditions=[
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
         "message": 'ReplicaSet "kueue-controller-manager-5d8" has timed out progressing.'}])
    assert kube.deployment_state(stalled)[:2] == ("STALLED", "failed")
