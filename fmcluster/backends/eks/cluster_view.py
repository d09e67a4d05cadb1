"""What ``status`` reads from an EKS cluster's own Kubernetes API: per queue, its nodes that are Ready with the GPUs,
EFA and Neuron devices they offer allocatable (what the device plugins advertise), and the quota its scheduler
queue holds."""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.burn_in.verdicts import node_verdict
from fmcluster.backends.eks.kubernetes.access import KubeAccess, KubeApi
from fmcluster.backends.eks.nodes import quotas, system_nodes
from fmcluster.backends.eks.software.device_plugins import QUEUE_LABEL

# Where each scheduler keeps a spec queue's quota: the queue object's kind, and how to read its quota.
QUEUE_KINDS = {
    "kueue": ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    "volcano": ("scheduling.volcano.sh/v1beta1", "Queue"),
    "kai": ("scheduling.run.ai/v2", "Queue"),
}
DEVICES = {"gpus": quotas.NVIDIA_GPU, "efa": quotas.EFA, "neuron": quotas.NEURON}


def _quota(scheduler: str, obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    if scheduler == "kueue":
        return {r["name"]: r["nominalQuota"] for group in spec.get("resourceGroups") or []
                for flavor in group.get("flavors") or [] for r in flavor.get("resources") or []}
    if scheduler == "volcano":
        return dict(spec.get("capability") or {})
    return {name: value.get("quota") for name, value in (spec.get("resources") or {}).items()}


# The NodeConditions the EKS node monitoring agent sets (EKS User Guide, "Detect node health issues with the EKS node
# monitoring agent"); False is a fault that node auto repair acts on after the condition's wait. EKS's
# DescribeNodegroup reports no per-node repair state (its health.issues are the group's own), so this is where a
# node that is, or is about to be, repaired shows.
AGENT_CONDITIONS = ("AcceleratedHardwareReady", "ContainerRuntimeReady", "KernelReady", "NetworkingReady",
                    "StorageReady")


def unhealthy(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent's conditions that are False on ``node``: {node, condition, reason, since}."""
    name = (node.get("metadata") or {}).get("name", "")
    return [{"node": name, "condition": c["type"], "reason": c.get("reason") or "",
             "since": c.get("lastTransitionTime")}
            for c in (node.get("status") or {}).get("conditions") or []
            if c.get("type") in AGENT_CONDITIONS and c.get("status") == "False"]


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _group_of(node: dict[str, Any]) -> str:
    """The node group row a node counts in: its queue's (fmcluster's queue label), or the ``system`` group's (whose
    nodes carry the system role label instead)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if labels.get(system_nodes.LABEL_KEY) == system_nodes.LABEL_VALUE:
        return system_nodes.NODEGROUP_NAME
    return labels.get(QUEUE_LABEL, "")


def read(access: KubeAccess, scheduler: str, queues: list[str]) -> dict[str, dict[str, Any]]:
    """Node group name → {nodes_ready, gpus, efa, neuron (allocatable on its Ready nodes), quota (its scheduler
    queue's, None when the object is missing), unhealthy_nodes (:func:`unhealthy` of its nodes), burn_in_nodes (the
    burn-in gate's verdict of each node it holds or has judged, :func:`.burn_in.verdicts.node_verdict`)}. The ``system``
    group's nodes are counted too; it is no scheduler queue, so its row says ``scheduler_queue: false`` and has no
    quota."""
    api = KubeApi(access)
    try:
        view = {name: {"nodes_ready": 0, **dict.fromkeys(DEVICES, 0), "quota": None, "unhealthy_nodes": [],
                       "burn_in_nodes": []} for name in queues}
        if system_nodes.NODEGROUP_NAME in view:
            view[system_nodes.NODEGROUP_NAME]["scheduler_queue"] = False
        node_type = api.resource_type("v1", "Node")
        nodes = api.call(f"listing the nodes of EKS cluster {access.cluster}", lambda: [
            dict(n) for n in api.client.list(node_type)]) if node_type else []
        for node in nodes:
            row = view.get(_group_of(node))
            if row is not None:
                row["unhealthy_nodes"] += unhealthy(node)
                verdict = node_verdict(node)
                row["burn_in_nodes"] += [verdict] if verdict else []
            if row is None or not _ready(node):
                continue
            row["nodes_ready"] += 1
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            for field, resource in DEVICES.items():
                row[field] += int(allocatable.get(resource, 0) or 0)
        api_version, kind = QUEUE_KINDS[scheduler]
        queue_type = api.resource_type(api_version, kind)
        objects = api.call(f"listing the {kind} objects of EKS cluster {access.cluster}", lambda: [
            dict(o) for o in api.client.list(queue_type)]) if queue_type else []
        for obj in objects:
            row = view.get((obj.get("metadata") or {}).get("name", ""))
            if row is not None and row.get("scheduler_queue") is not False:
                row["quota"] = _quota(scheduler, obj)
        return view
    finally:
        api.close()
