"""The Cluster Autoscaler on an EKS cluster with an elastic queue (``nodes: {min, max}``, min below max): which pinned
render it gets, and what fmcluster changes of it at render time.

The render (:data:`fmcluster.backends.eks.software.releases.CLUSTER_AUTOSCALER`, one per Kubernetes minor) stays as the
reference made it. On fresh copies, fmcluster:

* names the cluster in the auto-discovery flag. The render was made with the placeholder ``my-cluster``:
  ``--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/my-cluster``
  (the autoscaler's AWS README, "Auto-Discovery Setup"; EKS tags a managed node group's Auto Scaling group for it,
  "Nodes launched as part of a managed node group are automatically tagged for auto-discovery by the Kubernetes
  Cluster Autoscaler", EKS guide "Simplify node lifecycle with managed node groups");
* sets ``AWS_REGION`` (placeholder ``us-west-2``) to the spec's Region;
* places the Deployment's pods on the ``system`` node group, as every release's controllers are placed
  (:func:`fmcluster.backends.eks.software.scheduler_install._place_on_system_nodes`: its nodeSelector and the
  toleration of its ``CriticalAddonsOnly`` taint; the render has ``tolerations: []`` and no nodeSelector);
* labels every object with the release's component label.

AWS credentials come from EKS Pod Identity (:mod:`fmcluster.backends.eks.software.autoscaler_iam`): no Secret, no
annotation.
"""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.software.releases import CLUSTER_AUTOSCALER, Release, objects
from fmcluster.backends.eks.software.scheduler_install import COMPONENT_LABEL, _place_on_system_nodes
from fmcluster.spec.models import Queue, Spec, max_nodes, min_nodes

# The reference's placeholders in every render (kubernetes-addons/README.md, "Values set, and why").
PLACEHOLDER_CLUSTER = "my-cluster"
PLACEHOLDER_REGION = "us-west-2"
DISCOVERY_FLAG = "--node-group-auto-discovery="
# The chart names everything "<release>-aws-cluster-autoscaler" (release cluster-autoscaler, namespace kube-system).
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler-aws-cluster-autoscaler"
DEPLOYMENT = SERVICE_ACCOUNT


def is_elastic(queue: Queue) -> bool:
    """A queue the autoscaler sizes: its node group may hold between ``min`` and ``max`` nodes."""
    return min_nodes(queue) < max_nodes(queue)


def elastic_queues(spec: Spec) -> list[Queue]:
    return [queue for queue in spec.queues if is_elastic(queue)]


def release_for(version: str) -> Release | None:
    """The render for a cluster of Kubernetes ``version`` (``1.35``), or None when fmcluster ships none for it."""
    return CLUSTER_AUTOSCALER.get(version)


def wanted(spec: Spec) -> Release | None:
    """The release the spec's cluster gets: one when some queue is elastic (the spec rules refuse a version without
    a render before this is asked)."""
    if spec.backend != "eks" or not elastic_queues(spec):
        return None
    return release_for(spec.kubernetes.version)


def manifests(spec: Spec) -> list[dict[str, Any]]:
    """The autoscaler's objects for ``spec`` in the render's (Helm install) order; none without an elastic queue."""
    release = wanted(spec)
    if release is None:
        return []
    found = objects(release)
    for obj in found:
        metadata = obj.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), COMPONENT_LABEL: release.name}
        if obj["kind"] == "Deployment":
            _configure(obj, spec)
            _place_on_system_nodes(obj)
    return found


def _configure(deployment: dict[str, Any], spec: Spec) -> None:
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        container["command"] = [_discovery(arg, spec.name) for arg in container.get("command") or []]
        for variable in container.get("env") or []:
            if variable.get("name") == "AWS_REGION" and variable.get("value") == PLACEHOLDER_REGION:
                variable["value"] = spec.region


def _discovery(arg: str, cluster: str) -> str:
    if not arg.startswith(DISCOVERY_FLAG):
        return arg
    tags = arg.removeprefix(DISCOVERY_FLAG).split(",")
    placeholder = f"k8s.io/cluster-autoscaler/{PLACEHOLDER_CLUSTER}"
    return DISCOVERY_FLAG + ",".join(f"k8s.io/cluster-autoscaler/{cluster}" if tag == placeholder else tag
                                     for tag in tags)


def controllers(spec: Spec) -> list[dict[str, Any]]:
    """The autoscaler's Deployment as fmcluster applies it (none without an elastic queue): what ``status`` reports."""
    return [obj for obj in manifests(spec) if obj["kind"] == "Deployment"]
