"""What ``status`` says of the scheduler fmcluster installed on an EKS cluster: each controller Deployment it applied
(the scheduler's and the MPI Operator's) with its available and desired replicas, read from the cluster's API.

KAI's operator makes the scheduler's own Deployments (admission, binder, scheduler, …) from its ``Config``; fmcluster
applies only the operator, so it reports the operator's Deployment, and the ``Config kai-config`` conditions where the
operator has written them (``Ready`` is True once every operand is available): ``operator.ready`` is that condition,
null while no operator has reported (a cluster whose operator never ran, or the sandbox, which runs no pods).
"""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.kubernetes import client as kube
from fmcluster.backends.eks.kubernetes.access import KubeAccess, KubeApi
from fmcluster.backends.eks.software.releases import SCHEDULERS
from fmcluster.backends.eks.software.scheduler_install import controllers


def read(access: KubeAccess, scheduler: str) -> dict[str, Any]:
    """``{"name", "version", "ready", "components": [{"kind", "namespace", "name", "ready", "desired"}]}`` (and for
    KAI ``operator``): ``ready`` when every component has all its desired replicas available."""
    release = SCHEDULERS[scheduler]
    api = KubeApi(access)
    try:
        components = [_deployment(api, access, obj) for obj in controllers(scheduler)]
        report: dict[str, Any] = {"name": release.name, "version": release.version,
                                  "ready": all(c.pop("_ready") for c in components), "components": components}
        if scheduler == "kai":
            report["operator"] = _kai_operator(api, access)
            report["ready"] = report["ready"] and report["operator"]["ready"] is not False
        return report
    finally:
        api.close()


def _deployment(api: KubeApi, access: KubeAccess, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    row: dict[str, Any] = {"kind": "Deployment", "namespace": meta.get("namespace"), "name": meta["name"],
                           "ready": 0, "desired": (obj.get("spec") or {}).get("replicas", 1), "_ready": False}
    rtype = api.resource_type("apps/v1", "Deployment")
    what = f"reading Deployment {meta['name']} in namespace {meta.get('namespace')} of EKS cluster {access.cluster}"
    try:
        live = api.call(what, lambda: dict(api.client.get(rtype, meta["name"], namespace=meta.get("namespace"))))
    except kube.KubeApiError as exc:
        if exc.code == 404:  # deleted out of band: drift, which `create` repairs
            row["missing"] = True
            return row
        raise
    row["ready"] = ((live.get("status") or {}).get("availableReplicas")) or 0
    row["desired"] = (live.get("spec") or {}).get("replicas", row["desired"])
    row["_ready"] = kube.deployment_state(live)[1] == "ready"
    return row


def _kai_operator(api: KubeApi, access: KubeAccess) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "Config", "name": "kai-config", "ready": None, "reason": "no status reported"}
    rtype = api.resource_type("kai.scheduler/v1", "Config")
    if rtype is None:
        out["reason"] = "the cluster serves no kai.scheduler/v1 Config"
        return out
    try:
        live = api.call(f"reading Config kai-config of EKS cluster {access.cluster}",
                        lambda: dict(api.client.get(rtype, "kai-config")))
    except kube.KubeApiError as exc:
        if exc.code == 404:
            out["reason"] = "Config kai-config is missing"
            return out
        raise
    condition = next((c for c in (live.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
                     None)
    if condition is not None:
        out["ready"] = condition.get("status") == "True"
        out["reason"] = condition.get("message") or condition.get("reason") or ""
    return out


def problems(report: dict[str, Any]) -> list[str]:
    """What keeps the scheduler from being ready, one line per component, for ``status``'s problems."""
    lines = [f"scheduler {report['name']}: {c['kind']} {c['name']} in namespace {c['namespace']} "
             + ("is missing (deleted outside fmcluster? `fmcluster create SPEC` makes it again)" if c.get("missing")
                else f"has {c['ready']}/{c['desired']} replicas available")
             for c in report["components"] if c.get("missing") or c["ready"] < c["desired"]]
    operator = report.get("operator")
    if operator is not None and operator["ready"] is False:
        lines.append(f"scheduler {report['name']}: its operator reports Config kai-config not Ready: "
                     f"{operator['reason']}")
    return lines
