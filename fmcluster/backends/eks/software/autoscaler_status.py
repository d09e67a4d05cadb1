"""What ``status`` says of the Cluster Autoscaler fmcluster installed for an elastic queue, as part of the cluster's
software beside the scheduler: its Deployment's available and desired replicas, read from the cluster's API, in the
form :mod:`fmcluster.backends.eks.software.scheduler_status` reports the scheduler's controllers."""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.kubernetes.access import KubeAccess, KubeApi
from fmcluster.backends.eks.software import autoscaler_install
from fmcluster.backends.eks.software.scheduler_status import _deployment
from fmcluster.spec.models import Spec


def read(access: KubeAccess, spec: Spec) -> dict[str, Any] | None:
    """``{"name", "version", "ready", "components": [{"kind", "namespace", "name", "ready", "desired"}]}``, or None
    when the spec has no elastic queue (no autoscaler is installed)."""
    release = autoscaler_install.wanted(spec)
    if release is None:
        return None
    api = KubeApi(access)
    try:
        components = [_deployment(api, access, obj) for obj in autoscaler_install.controllers(spec)]
    finally:
        api.close()
    return {"name": release.name, "version": release.version, "ready": all(c.pop("_ready") for c in components),
            "components": components}


def problems(report: dict[str, Any] | None) -> list[str]:
    """What keeps the autoscaler from being ready, one line per component, for ``status``'s problems."""
    if report is None:
        return []
    return [f"{report['name']} {report['version']}: {c['kind']} {c['name']} in namespace {c['namespace']} "
            + ("is missing (deleted outside fmcluster? `fmcluster create SPEC` makes it again)" if c.get("missing")
               else f"has {c['ready']}/{c['desired']} replicas available; elastic queues do not grow meanwhile")
            for c in report["components"] if c.get("missing") or c["ready"] < c["desired"]]
