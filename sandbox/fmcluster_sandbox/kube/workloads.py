"""The status the workload controllers would write, from whether the pod template could run on a Ready node.

The sandbox runs no pods for these kinds (the MPI Operator's jobs are the exception: :mod:`.mpi_operator`). In
their place, a workload's pods count as running and ready exactly when a Ready Node
exists where its pod template fits (:func:`.placement.fits`: nodeSelector, required node affinity, tolerations of
NoSchedule/NoExecute taints, requests within allocatable); otherwise they are Pending. From that the status is
written as each controller writes it (apps/v1 and batch/v1 API reference, "Deployments", "StatefulSets",
"DaemonSet", "Jobs"):

* Deployment: ``observedGeneration``, ``replicas``, ``updatedReplicas``, ``readyReplicas``,
  ``availableReplicas``, ``unavailableReplicas`` (zero counts omitted, as the API omits them), conditions
  ``Available`` (True ``MinimumReplicasAvailable`` when available replicas >= replicas - maxUnavailable, else False
  ``MinimumReplicasUnavailable``; maxUnavailable of a RollingUpdate strategy, percentages rounded down; 0 for
  Recreate) and ``Progressing`` (True: ``NewReplicaSetAvailable`` once every replica is available, else
  ``ReplicaSetUpdated``).
* StatefulSet: ``observedGeneration``, ``replicas``, ``readyReplicas``, ``availableReplicas``, ``currentReplicas``,
  ``updatedReplicas``; with ``podManagementPolicy: OrderedReady`` (the default) pod N+1 is created only once pod N
  is ready, so an unplaceable StatefulSet has one (Pending) replica.
* DaemonSet: ``desiredNumberScheduled`` = Ready nodes the pod may be placed on (nodeSelector, affinity, taints);
  ``currentNumberScheduled``/``updatedNumberScheduled`` the same; ``numberReady``/``numberAvailable`` those where
  its requests also fit; ``numberUnavailable`` the rest; ``numberMisscheduled`` 0.
* Job: not suspended and placeable → taken to succeed (the sandbox runs no containers): ``succeeded`` =
  ``completions`` (else ``parallelism``), ``startTime``, ``completionTime``, conditions ``SuccessCriteriaMet``
  (from Kubernetes 1.31) and ``Complete`` (reason ``CompletionsReached``); a completed Job stays completed.
  Not placeable → ``active`` = its parallelism (capped by completions), ``ready`` 0, no condition. Suspended →
  ``active`` 0 and condition ``Suspended``.

Condition ``lastTransitionTime`` moves only when the condition's status changes (the previous status is kept in the
store, so a status changes as nodes come and go). Not emulated: ``minReadySeconds`` (ready counts as available at
once), the progress deadline (``ProgressDeadlineExceeded``), rollouts between revisions (every replica is of the
current template), Job failures and ``backoffLimit``, ``collisionCount``, revision hashes.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from packaging.version import Version

from fmcluster_sandbox.kube import placement

KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")


def _pod(obj: dict[str, Any]) -> dict[str, Any]:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def placeable(obj: dict[str, Any], nodes: list[dict[str, Any]]) -> bool:
    """Whether a Ready node exists where the workload's pod template fits."""
    return any(placement.fits(_pod(obj), n, daemon=obj.get("kind") == "DaemonSet") for n in nodes)


def node_view(node: dict[str, Any]) -> dict[str, Any] | None:
    """``placement.fits``'s view of a Node object, or None when the node is not Ready."""
    status = node.get("status") or {}
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []):
        return None
    return {"name": node["metadata"]["name"], "labels": node["metadata"].get("labels") or {},
            "taints": (node.get("spec") or {}).get("taints") or [], "allocatable": status.get("allocatable") or {}}


def _compact(status: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in status.items() if v not in (0, None)}


def _conditions(previous: dict[str, Any], wanted: list[tuple[str, str, str, str]], now: str,
                update_time: bool = False) -> list[dict[str, Any]]:
    before = {c.get("type"): c for c in previous.get("conditions") or []}
    out = []
    for type_, status, reason, message in wanted:
        old = before.get(type_) or {}
        same = old.get("status") == status
        condition = {"type": type_, "status": status}
        if update_time:
            condition["lastUpdateTime"] = old.get("lastUpdateTime", now) if same and old.get("reason") == reason \
                else now
        condition["lastTransitionTime"] = old.get("lastTransitionTime", now) if same else now
        condition.update({"reason": reason, "message": message})
        out.append(condition)
    return out


def _max_unavailable(spec: dict[str, Any], replicas: int) -> int:
    strategy = spec.get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate" or replicas == 0:
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    if isinstance(value, str) and value.endswith("%"):
        return math.floor(int(value[:-1]) * replicas / 100)
    return int(value)


def deployment(obj: dict[str, Any], nodes: list[dict[str, Any]], now: str) -> dict[str, Any]:
    spec, previous = obj.get("spec") or {}, obj.get("status") or {}
    replicas = int(spec.get("replicas", 1))
    ready = replicas if placeable(obj, nodes) else 0
    name = obj["metadata"]["name"]
    available = ready >= replicas - _max_unavailable(spec, replicas)
    wanted = [("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
              if available else
              ("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
              ("Progressing", "True", "NewReplicaSetAvailable", f'ReplicaSet "{name}" has successfully progressed.')
              if ready == replicas else
              ("Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.')]
    status = _compact({"observedGeneration": obj["metadata"].get("generation", 1), "replicas": replicas,
                       "updatedReplicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
                       "unavailableReplicas": replicas - ready})
    status["conditions"] = _conditions(previous, wanted, now, update_time=True)
    return status


def statefulset(obj: dict[str, Any], nodes: list[dict[str, Any]], now: str) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    if placeable(obj, nodes):
        created = ready = replicas
    else:
        ready = 0
        created = min(replicas, 1) if spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady" else replicas
    return {"observedGeneration": obj["metadata"].get("generation", 1), "replicas": created,
            **_compact({"readyReplicas": ready, "currentReplicas": created, "updatedReplicas": created}),
            "availableReplicas": ready}


def daemonset(obj: dict[str, Any], nodes: list[dict[str, Any]], now: str) -> dict[str, Any]:
    pod = _pod(obj)
    eligible = [n for n in nodes if placement.fits(pod, {**n, "allocatable": None}, daemon=True)]
    ready = sum(1 for n in eligible if placement.fits(pod, n, daemon=True))
    return {"currentNumberScheduled": len(eligible), "desiredNumberScheduled": len(eligible),
            "numberMisscheduled": 0, "numberReady": ready, "observedGeneration": obj["metadata"].get("generation", 1),
            **_compact({"updatedNumberScheduled": len(eligible), "numberAvailable": ready,
                        "numberUnavailable": len(eligible) - ready})}


def job(obj: dict[str, Any], nodes: list[dict[str, Any]], now: str, kubernetes_version: str) -> dict[str, Any]:
    spec, previous = obj.get("spec") or {}, obj.get("status") or {}
    if previous.get("completionTime"):
        return previous  # finished: a Job never runs again
    completions = spec.get("completions")
    parallelism = int(spec.get("parallelism", 1))
    if spec.get("suspend"):
        status = {k: v for k, v in previous.items() if k in ("startTime",)}
        status["conditions"] = _conditions(previous, [("Suspended", "True", "JobSuspended", "Job suspended")], now)
        return status
    status: dict[str, Any] = {"startTime": previous.get("startTime", now), "terminating": 0,
                              "uncountedTerminatedPods": {}}
    if placeable(obj, nodes):
        status.update({"succeeded": int(completions if completions is not None else parallelism), "ready": 0,
                       "completionTime": now})
        message = "Reached expected number of succeeded pods"
        wanted = [("Complete", "True", "CompletionsReached", message)]
        if Version(kubernetes_version) >= Version("1.31"):
            wanted.insert(0, ("SuccessCriteriaMet", "True", "CompletionsReached", message))
        status["conditions"] = _conditions({}, wanted, now)
        if spec.get("completionMode") == "Indexed" and completions:
            status["completedIndexes"] = "0" if completions == 1 else f"0-{int(completions) - 1}"
    else:
        status.update({"active": min(parallelism, int(completions)) if completions is not None else parallelism,
                       "ready": 0})
    return status


def status(obj: dict[str, Any], nodes: list[dict[str, Any]], now: str, kubernetes_version: str) -> dict[str, Any]:
    """The status the workload's controller would have written by now (``nodes``: :func:`node_view` of each
    Ready node)."""
    obj = copy.deepcopy(obj)
    kind = obj.get("kind")
    if kind == "Deployment":
        return deployment(obj, nodes, now)
    if kind == "StatefulSet":
        return statefulset(obj, nodes, now)
    if kind == "DaemonSet":
        return daemonset(obj, nodes, now)
    return job(obj, nodes, now, kubernetes_version)


def has_ready_pods(obj: dict[str, Any]) -> bool:
    """Whether a workload's (refreshed) status shows at least one ready pod."""
    status = obj.get("status") or {}
    if obj.get("kind") == "DaemonSet":
        return int(status.get("numberReady", 0)) > 0
    if obj.get("kind") == "Job":
        return int(status.get("ready", 0)) > 0
    return int(status.get("readyReplicas", 0)) > 0
