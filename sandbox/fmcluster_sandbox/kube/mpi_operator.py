"""The MPI Operator's controller (kubeflow/mpi-operator v0.8.0, ``pkg/controller/mpi_job_controller.go``) for the
sandbox's MPIJobs (kubeflow.org/v2beta1), run whenever an MPIJob or a Pod is read.

It acts only while the operator runs in the cluster: a Deployment ``mpi-operator/mpi-operator`` with a ready pod
(what fmcluster installs; :mod:`.workloads` decides readiness). A cluster with the CRD alone has no controller, and
its jobs get no status, as on EKS. Otherwise, for a job not finished:

* condition ``Created`` (``MPIJobCreated``, "MPIJob <ns>/<name> is created."), ``startTime``;
* ``runPolicy.suspend``: condition ``Running`` False (``MPIJobSuspended``, "MPIJob <ns>/<name> is suspended."), no
  pods. Kueue's webhook is not emulated (the sandbox calls no webhook code: :mod:`.admission`), so a job under
  Kueue arrives unsuspended and runs as one Kueue admitted at once; its ClusterQueue's quota is not checked, only
  whether its pods fit the nodes;
* worker pods ``<job>-worker-<i>`` (the worker template, labels ``training.kubeflow.org/job-name``, ``job-role:
  worker``, ``operator-name``, ``replica-index``; ``hostname`` the pod's name, ``subdomain`` the job's), each bound
  to a Ready node where it fits (:func:`.placement.fits`, against what the pods already bound there request),
  nodes taken in name order; a pod that fits nowhere stays Pending (``PodScheduled`` False ``Unschedulable``);
* once every worker runs (``launcherCreationPolicy: WaitForWorkersReady``), the launcher pod
  ``<job>-launcher-<5 chars>`` (job-role ``launcher``), whose container command runs on the emulated nodes
  (:mod:`.launcher_run`); condition ``Running`` (``MPIJobRunning``, "MPIJob <ns>/<name> is running.");
* the launcher's exit: 0 → pod Succeeded, condition ``Succeeded`` (``MPIJobSucceeded``, "MPIJob <ns>/<name>
  successfully completed."); otherwise pod Failed and ``Failed`` as the operator copies it from its launcher Job
  with backoffLimit 0 (reason ``BackoffLimitExceeded/``, message "Job has reached the specified backoff limit: ");
  past ``runPolicy.activeDeadlineSeconds`` the run is killed, ``Failed`` ``DeadlineExceeded``, "Job was active
  longer than specified deadline". Then ``completionTime``, and ``cleanPodPolicy`` Running/All deletes the workers
  still running (they run sshd until stopped).

The launcher's log is served by ``GET …/pods/<launcher>/log``. Deleting the job deletes its pods and kills its run
(the garbage collector's work). Not emulated: the launcher's batch/v1 Job, the job's Service, ConfigMap and ssh
Secret (not stored), Volcano/KAI gang scheduling, restarts (``backoffLimit`` is taken as 0), worker failures.
"""

from __future__ import annotations

import copy
import random
import string
import threading
from fractions import Fraction
from typing import Any

from fmcluster_sandbox.kube import launcher_run, node_health, placement, workloads
from fmcluster_sandbox.kube.store import ClusterStore

GROUP, PLURAL = "kubeflow.org", "mpijobs"
JOB_NAME, JOB_ROLE = "training.kubeflow.org/job-name", "training.kubeflow.org/job-role"
OPERATOR_NAME, REPLICA_INDEX = "training.kubeflow.org/operator-name", "training.kubeflow.org/replica-index"
OPERATOR = ("mpi-operator", "mpi-operator")  # the Deployment fmcluster installs: (namespace, name)
RUNS: dict[str, launcher_run.Run] = {}  # job uid -> its launcher's run
_LOCK = threading.Lock()


def _conditions(status: dict[str, Any], type_: str, state: str, reason: str, message: str, now: str) -> None:
    conditions = status.setdefault("conditions", [])
    for condition in conditions:
        if condition["type"] == type_:
            if condition["status"] != state:
                condition["lastTransitionTime"] = now
            condition.update({"status": state, "reason": reason, "message": message, "lastUpdateTime": now})
            return
    conditions.append({"type": type_, "status": state, "reason": reason, "message": message,
                       "lastUpdateTime": now, "lastTransitionTime": now})


def finished(job: dict[str, Any]) -> bool:
    return any(c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _pod_key(namespace: str, name: str) -> tuple[str, str, str, str]:
    return ("", "pods", namespace, name)


def owned_pods(store: ClusterStore, job: dict[str, Any], role: str) -> list[dict[str, Any]]:
    meta = job["metadata"]
    return [p for p in store.items("", "pods", meta["namespace"])
            if p["metadata"].get("labels", {}).get(JOB_NAME) == meta["name"]
            and p["metadata"].get("labels", {}).get(JOB_ROLE) == role]


def _free(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each Ready node's placement view, its allocatable less what the pods bound to it request."""
    views = {}
    for node in nodes:
        view = workloads.node_view(node)
        if view is None:
            continue
        left = {k: placement.quantity(v) for k, v in view["allocatable"].items()}
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") == view["name"] and \
                    (pod.get("status") or {}).get("phase") in ("Pending", "Running"):
                for resource, amount in placement.pod_requests(pod["spec"]).items():
                    left[resource] = left.get(resource, Fraction(0)) - amount
        views[view["name"]] = {**view, "allocatable": {k: str(v) for k, v in left.items()}}
    return dict(sorted(views.items()))


def _bind(pod: dict[str, Any], views: dict[str, dict[str, Any]], now: str) -> None:
    for name, view in views.items():
        if placement.fits(pod["spec"], view):
            pod["spec"]["nodeName"] = name
            for resource, amount in placement.pod_requests(pod["spec"]).items():
                left = placement.quantity(view["allocatable"].get(resource, "0")) - amount
                view["allocatable"][resource] = str(left)
            pod["status"] = {"phase": "Running", "startTime": now, "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]}
            return
    pod["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": now,
         "message": f"0/{len(views)} nodes are available: no node has room for the pod's requests and selector."}]}


def _new_pod(job: dict[str, Any], role: str, name: str, extra: dict[str, str]) -> dict[str, Any]:
    meta = job["metadata"]
    replica = "Launcher" if role == "launcher" else "Worker"
    template = copy.deepcopy(job["spec"]["mpiReplicaSpecs"][replica]["template"])
    labels = {**(template.get("metadata") or {}).get("labels", {}), JOB_NAME: meta["name"], JOB_ROLE: role,
              OPERATOR_NAME: "mpi-operator", **extra}
    pod_meta: dict[str, Any] = {"name": name, "namespace": meta["namespace"], "labels": labels,
                                "ownerReferences": [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                                                     "name": meta["name"], "uid": meta["uid"], "controller": True,
                                                     "blockOwnerDeletion": True}]}
    if (template.get("metadata") or {}).get("annotations"):
        pod_meta["annotations"] = template["metadata"]["annotations"]
    spec = template.get("spec") or {}
    if role == "worker":
        spec.update({"hostname": name, "subdomain": meta["name"]})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


class Controller:
    """The operator acting on one request's view of a cluster: its store, its Nodes, the sandbox's faults."""

    def __init__(self, store: ClusterStore, nodes: list[dict[str, Any]], faults: Any, now: str):
        self.store, self.nodes, self.faults, self.now = store, nodes, faults, now

    def reconcile(self, job: dict[str, Any]) -> dict[str, Any]:
        """The job's status as the operator leaves it now (its pods and run made or updated on the way)."""
        status = copy.deepcopy(job.get("status") or {})
        if finished(job):
            return status
        meta, spec = job["metadata"], job.get("spec") or {}
        what = f"MPIJob {meta['namespace']}/{meta['name']}"
        if not any(c["type"] == "Created" for c in status.get("conditions") or []):
            _conditions(status, "Created", "True", "MPIJobCreated", f"{what} is created.", self.now)
        run_policy = spec.get("runPolicy") or {}
        if run_policy.get("suspend"):
            _conditions(status, "Running", "False", "MPIJobSuspended", f"{what} is suspended.", self.now)
            return status
        status.setdefault("startTime", self.now)
        workers = self._workers(job)
        running = sum(1 for w in workers if w["status"]["phase"] == "Running")
        launchers = owned_pods(self.store, job, "launcher")
        if not launchers and running == len(workers):
            launchers = [self._launch(job, workers)]
        launcher = launchers[0] if launchers else None
        if launcher is not None and launcher["status"]["phase"] == "Running":
            launcher = self._poll(job, launcher, run_policy.get("activeDeadlineSeconds"), status)
        replicas: dict[str, Any] = {"Worker": {"active": running} if running else {}}
        if launcher is not None:
            phase = launcher["status"]["phase"]
            replicas["Launcher"] = {"Running": {"active": 1}, "Succeeded": {"succeeded": 1},
                                    "Failed": {"failed": 1}}.get(phase, {})
            if phase == "Running" and running == len(workers):
                _conditions(status, "Running", "True", "MPIJobRunning", f"{what} is running.", self.now)
            elif phase in ("Succeeded", "Failed"):
                self._finish(job, status, launcher, what)
        status["replicaStatuses"] = replicas
        return status

    def _workers(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        count = int(job["spec"]["mpiReplicaSpecs"]["Worker"].get("replicas", 1))
        existing = {p["metadata"]["name"]: p for p in owned_pods(self.store, job, "worker")}
        views = _free(self.nodes, self.store.items("", "pods", None))
        out = []
        for index in range(count):
            name = f"{job['metadata']['name']}-worker-{index}"
            pod = existing.get(name)
            if pod is None or pod["status"]["phase"] == "Pending":
                new = pod is None
                pod = pod or _new_pod(job, "worker", name, {REPLICA_INDEX: str(index)})
                _bind(pod, views, self.now)
                pod = self.store.put(_pod_key(job["metadata"]["namespace"], name), pod, new=new)
            out.append(pod)
        return out

    def _launch(self, job: dict[str, Any], workers: list[dict[str, Any]]) -> dict[str, Any]:
        meta = job["metadata"]
        suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        name = f"{meta['name']}-launcher-{suffix}"
        pod = _new_pod(job, "launcher", name, {"batch.kubernetes.io/job-name": f"{meta['name']}-launcher",
                                               "job-name": f"{meta['name']}-launcher"})
        _bind(pod, _free(self.nodes, self.store.items("", "pods", None)), self.now)
        if pod["status"]["phase"] == "Running":
            hosts = [w["metadata"]["name"] for w in workers]
            bound = {n["metadata"]["name"]: n for n in self.nodes}
            placed = [bound[w["spec"]["nodeName"]] for w in workers]
            facts = {h: node_health.node_facts(node, self.faults) for h, node in zip(hosts, placed, strict=True)}
            container = pod["spec"]["containers"][0]
            command = [*(container.get("command") or []), *(container.get("args") or [])]
            deadline = (job["spec"].get("runPolicy") or {}).get("activeDeadlineSeconds") or 24 * 3600
            run = launcher_run.start(command, name, hosts, int(job["spec"].get("slotsPerWorker", 1)),
                                     meta["namespace"], meta["name"], facts,
                                     node_health.bandwidth(placed, list(facts.values()), self.faults), deadline)
            if isinstance(run, str):
                pod["status"].update({"phase": "Failed", "reason": "SandboxCannotRun", "message": run})
            else:
                with _LOCK:
                    RUNS[meta["uid"]] = run
        return self.store.put(_pod_key(meta["namespace"], name), pod, new=True)

    def _poll(self, job: dict[str, Any], launcher: dict[str, Any], deadline_s: Any,
              status: dict[str, Any]) -> dict[str, Any]:
        run = RUNS.get(job["metadata"]["uid"])
        code = run.proc.poll() if run is not None else 1
        if code != 0 and deadline_s is not None and _elapsed(status["startTime"], self.now) >= int(deadline_s):
            if run is not None:
                launcher_run.kill(run)
            launcher["status"].update({"phase": "Failed", "reason": "DeadlineExceeded",
                                       "message": "Job was active longer than specified deadline"})
        elif code is not None:
            launcher["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
        else:
            return launcher
        return self.store.put(_pod_key(job["metadata"]["namespace"], launcher["metadata"]["name"]), launcher,
                              new=False)

    def _finish(self, job: dict[str, Any], status: dict[str, Any], launcher: dict[str, Any], what: str) -> None:
        if launcher["status"]["phase"] == "Succeeded":
            _conditions(status, "Succeeded", "True", "MPIJobSucceeded", f"{what} successfully completed.", self.now)
        elif launcher["status"].get("reason") == "DeadlineExceeded":
            _conditions(status, "Failed", "True", "DeadlineExceeded", launcher["status"]["message"], self.now)
        else:
            pod_reason, pod_message = launcher["status"].get("reason", ""), launcher["status"].get("message", "")
            _conditions(status, "Failed", "True", f"BackoffLimitExceeded/{pod_reason}",
                        f"Job has reached the specified backoff limit: {pod_message}", self.now)
        for condition in status["conditions"]:  # filterOutCondition: a finished job's Running turns False, as it was
            if condition["type"] == "Running":
                condition["status"] = "False"
        status["completionTime"] = self.now
        policy = ((job["spec"].get("runPolicy") or {}).get("cleanPodPolicy")) or "None"
        if policy in ("Running", "All"):
            for pod in owned_pods(self.store, job, "worker"):
                if policy == "All" or pod["status"]["phase"] in ("Running", "Pending"):
                    self.store.delete(_pod_key(pod["metadata"]["namespace"], pod["metadata"]["name"]))


def _elapsed(start: str, now: str) -> float:
    import datetime as dt

    parse = lambda text: dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    return (parse(now) - parse(start)).total_seconds()


def log(store: ClusterStore, namespace: str, name: str) -> str | None:
    """The log of a pod this controller made (its launcher's output so far), or None for no such pod."""
    pod = store.get(_pod_key(namespace, name))
    if pod is None:
        return None
    owner = next((o for o in pod["metadata"].get("ownerReferences") or [] if o.get("kind") == "MPIJob"), None)
    run = RUNS.get(owner["uid"]) if owner else None
    if pod["metadata"]["labels"].get(JOB_ROLE) != "launcher":
        return ""
    return run.log if run is not None else pod["status"].get("message", "")


def deleted(store: ClusterStore, job: dict[str, Any]) -> None:
    """The job is gone: its pods go (the garbage collector) and its run is killed."""
    for role in ("worker", "launcher"):
        for pod in owned_pods(store, job, role):
            store.delete(_pod_key(pod["metadata"]["namespace"], pod["metadata"]["name"]))
    with _LOCK:
        run = RUNS.pop(job["metadata"].get("uid", ""), None)
    if run is not None:
        launcher_run.stop(run)


def stop_all() -> None:
    with _LOCK:
        runs = list(RUNS.values())
        RUNS.clear()
    for run in runs:
        launcher_run.stop(run)
