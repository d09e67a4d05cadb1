"""What the cluster's controllers would have written by now, read into the objects the API serves: the status of
Deployments, StatefulSets, DaemonSets and Jobs for the cluster's current Nodes (:mod:`.workloads`), MPIJobs as the
MPI Operator leaves them while its Deployment runs (:mod:`.mpi_operator`), and APIServices' ``Available``
condition (kube-aggregator's availability controller). Mixed into :class:`.verbs.Request`, whose store, Nodes and
keys it reads."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from fmcluster_sandbox.kube import discovery, mpi_operator, workloads
from fmcluster_sandbox.kube.resources import ResourceType

# Workloads whose Pods could serve a Service ("Service": a Service's selector picks the Pods behind it).
SERVING_WORKLOADS = (("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets"))


def timestamp() -> str:
    """Now, as the API server writes times (RFC 3339, seconds, UTC)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ControllerStatus:
    """Read-time status of the kinds whose controllers the sandbox stands in for."""

    def _refresh(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """A workload as its controller would have left it by now (:mod:`.workloads`); the new status is stored
        when it changed, so condition transition times hold."""
        if rtype.crd is not None and (rtype.group, rtype.plural) == (mpi_operator.GROUP, mpi_operator.PLURAL):
            return self._operate(rtype, obj)
        if rtype.crd is not None or rtype.kind not in (*workloads.KINDS, "APIService"):
            return obj
        if rtype.kind == "APIService":
            status = self._apiservice_status(obj)
        else:
            if self._ready_nodes is None:
                self._ready_nodes = [v for v in map(workloads.node_view, self._node_objects()) if v is not None]
            status = workloads.status(obj, self._ready_nodes, timestamp(), self.version)
        if status == obj.get("status"):
            return obj
        obj["status"] = status
        meta = obj["metadata"]
        return self.store.put(self._key(rtype, meta.get("namespace"), meta["name"]), obj, new=False)

    def _operate(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """An MPIJob as the MPI Operator leaves it, while the operator's Deployment has a ready pod."""
        found = self.store.get(("apps", "deployments", *mpi_operator.OPERATOR))
        deployments = discovery.types(self.store, "apps", "v1")["deployments"]
        if found is None or not workloads.has_ready_pods(self._refresh(deployments, found)):
            return obj
        status = mpi_operator.Controller(self.store, self._node_objects(), self.faults, timestamp()).reconcile(obj)
        if status == obj.get("status"):
            return obj
        obj["status"] = status
        meta = obj["metadata"]
        return self.store.put(self._key(rtype, meta.get("namespace"), meta["name"]), obj, new=False)

    def _apiservice_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The aggregator's ``Available`` condition (kube-aggregator's availability controller): a local APIService
        is always available; one backed by a Service is available while the Service has a ready endpoint. The
        sandbox proxies nothing to it (docs/sandbox-fidelity.md)."""
        service = (obj.get("spec") or {}).get("service")
        if not service:
            wanted = ("True", "Local", "Local APIServices are always available")
        else:
            name, namespace = service.get("name", ""), service.get("namespace", "")
            found = self.store.get(("", "services", namespace, name))
            selector = ((found or {}).get("spec") or {}).get("selector") or {}
            if found is None:
                wanted = ("False", "ServiceNotFound", f'service/{name} in "{namespace}" is not present')
            elif selector and self._has_ready_endpoint(namespace, selector):
                wanted = ("True", "Passed", "all checks passed")
            else:
                wanted = ("False", "MissingEndpoints", f'endpoints for service/{name} in "{namespace}" have no '
                          "addresses")
        previous = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}.get("Available", {})
        when = previous.get("lastTransitionTime") if previous.get("status") == wanted[0] else None
        return {"conditions": [{"type": "Available", "status": wanted[0], "lastTransitionTime": when or timestamp(),
                                "reason": wanted[1], "message": wanted[2]}]}

    def _has_ready_endpoint(self, namespace: str, selector: dict[str, str]) -> bool:
        """Whether a Ready pod would back a Service with ``selector`` in ``namespace``: a workload whose pod template
        carries the selector's labels and which has ready replicas."""
        for group, plural in SERVING_WORKLOADS:
            rtype = discovery.types(self.store, group, "v1")[plural]
            for obj in self.store.items(group, plural, namespace):
                labels = ((obj.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
                if all(labels.get(k) == v for k, v in selector.items()) and \
                        workloads.has_ready_pods(self._refresh(rtype, obj)):
                    return True
        return False
