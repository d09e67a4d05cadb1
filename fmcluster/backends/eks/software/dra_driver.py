"""NVIDIA's DRA driver for GPUs on an EKS cluster with P6e-GB200 UltraServer queues: what fmcluster applies of the
pinned release (:data:`fmcluster.backends.eks.software.releases.DRA_DRIVER`), which nodes it serves, and what ``status``
says of it.

AWS's "Use P6e-GB200 UltraServers with Amazon EKS" page: the GPUs of an UltraServer reach each other's memory over
NVLink only through IMEX channels, which on Kubernetes come from the DRA driver's ComputeDomains; the NVIDIA device
plugin keeps serving ``nvidia.com/gpu`` (the release is rendered with ``resources.gpus.enabled=false``). The release
is applied as published, with two changes made here at apply time, on fresh copies:

* the kubelet plugin's DaemonSet stays on the nodes its affinity selects (``nvidia.com/gpu.present=true``, which
  fmcluster puts on the UltraServer queue's node group: ``nodeadm`` adds it only from kubelet 1.35, and fmcluster
  installs no GPU Operator to add it); the controller's Deployment goes to the ``system`` node group like every
  other controller;
* the chart's ValidatingAdmissionPolicy names the service account ``dra-driver-nvidia-gpu-service-account``, but
  the kubelet plugin runs as ``…-service-account-kubeletplugin`` (reference README, "upstream bug"), so as
  published it never applies to the writes it is there to check; fmcluster names the plugin's account, so a
  plugin may write only its own node's ResourceSlices (the node name comes from the service account token,
  ServiceAccountTokenPodNodeInfo, GA in Kubernetes 1.32).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from fmcluster.backends.eks.software.releases import DRA_DRIVER
from fmcluster.backends.eks.software.scheduler_install import install_objects
from fmcluster.render.documents import Document
from fmcluster.render.templates import render_text
from fmcluster.spec.decisions import needs_imex
from fmcluster.spec.models import Queue, Spec

if TYPE_CHECKING:  # the Kubernetes client is the kubernetes extra's; spec rules, plan and render import this module
    from fmcluster.backends.eks.kubernetes.access import KubeAccess, KubeApi

# The kubelet plugin's required node affinity in AWS's values (reference README, "Values set, and why").
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
PLUGIN_SERVICE_ACCOUNT = "dra-driver-nvidia-gpu-service-account-kubeletplugin"
POLICY_KIND = "ValidatingAdmissionPolicy"
# The DeviceClass a pod's IMEX channel claim names (the controller's generated ResourceClaimTemplate uses it).
CHANNEL_DEVICE_CLASS = "compute-domain-default-channel.nvidia.com"
# The first Kubernetes minor whose API serves resource.k8s.io/v1, the version the shipped DeviceClasses are
# rendered at (Kubernetes 1.34 release: DRA GA); the driver's docs/prerequisites.md asks for v1.34.2 or later.
FIRST_MINOR = (1, 34)
# "Use P6e-GB200 UltraServers with Amazon EKS": the AL2023 ARM NVIDIA AMI release v20251103 or later (NVIDIA
# driver 580 with CDMM).
FIRST_AMI_RELEASE = "20251103"


def needed(spec: Spec) -> bool:
    return any(serves(queue) for queue in spec.queues)


def serves(queue: Queue) -> bool:
    """Whether the queue's nodes need IMEX channels: NVIDIA GPUs whose NVLink domain spans an UltraServer
    (p6e-gb200)."""
    return needs_imex(queue)


def manifests() -> list[dict[str, Any]]:
    """The release's objects in apply order, placed and with the admission policy naming the plugin's account."""
    objects = install_objects(DRA_DRIVER)
    for obj in objects:
        if obj["kind"] == POLICY_KIND:
            for condition in obj["spec"].get("matchConditions") or []:
                if "request.userInfo.username" in condition["expression"]:
                    condition["expression"] = (f'request.userInfo.username == "system:serviceaccount:'
                                               f'{DRA_DRIVER.namespace}:{PLUGIN_SERVICE_ACCOUNT}"')
    return objects


def components() -> list[dict[str, Any]]:
    """The controller Deployment and the kubelet plugin DaemonSet: what ``status`` reads."""
    return [obj for obj in manifests() if obj["kind"] in ("Deployment", "DaemonSet")]


def read(access: KubeAccess) -> dict[str, Any]:
    """``{"name", "version", "ready", "components": [{"kind", "namespace", "name", "ready", "desired"}]}``: ready
    when the controller has its replicas available and the kubelet plugin runs on every node it selects (at least
    one: a plugin on no node serves no channel)."""
    from fmcluster.backends.eks.kubernetes.access import KubeApi

    api = KubeApi(access)
    try:
        rows = [_workload(api, access, obj) for obj in components()]
    finally:
        api.close()
    ready = all(row.pop("_ready") for row in rows)
    return {"name": DRA_DRIVER.name, "version": DRA_DRIVER.version, "ready": ready, "components": rows}


def _workload(api: KubeApi, access: KubeAccess, obj: dict[str, Any]) -> dict[str, Any]:
    from fmcluster.backends.eks.kubernetes import client as kube

    meta, kind = obj["metadata"], obj["kind"]
    row: dict[str, Any] = {"kind": kind, "namespace": meta.get("namespace"), "name": meta["name"], "ready": 0,
                           "desired": (obj.get("spec") or {}).get("replicas", 1) if kind == "Deployment" else 0,
                           "_ready": False}
    rtype = api.resource_type("apps/v1", kind)
    what = f"reading {kind} {meta['name']} in namespace {meta.get('namespace')} of EKS cluster {access.cluster}"
    try:
        live = api.call(what, lambda: dict(api.client.get(rtype, meta["name"], namespace=meta.get("namespace"))))
    except kube.KubeApiError as exc:
        if exc.code == 404:
            row["missing"] = True
            return row
        raise
    status = live.get("status") or {}
    if kind == "Deployment":
        row["ready"] = status.get("availableReplicas") or 0
        row["desired"] = (live.get("spec") or {}).get("replicas", row["desired"])
        row["_ready"] = kube.deployment_state(live)[1] == "ready"
    else:
        row["ready"] = status.get("numberReady") or 0
        row["desired"] = status.get("desiredNumberScheduled") or 0
        row["_ready"] = row["desired"] > 0 and row["ready"] == row["desired"]
    return row


def problems(report: dict[str, Any]) -> list[str]:
    """What keeps the driver from being ready, one line per component, for ``status``'s problems."""
    lines = []
    for c in report["components"]:
        if c.get("missing"):
            lines.append(f"{report['name']}: {c['kind']} {c['name']} is missing (`fmcluster create SPEC` makes it "
                         "again)")
        elif c["kind"] == "DaemonSet" and c["desired"] == 0:
            lines.append(f"{report['name']}: {c['kind']} {c['name']} runs on no node: no node is labelled "
                         f"{GPU_PRESENT_LABEL}=true, so no IMEX channel can be claimed")
        elif c["ready"] < c["desired"]:
            lines.append(f"{report['name']}: {c['kind']} {c['name']} has {c['ready']}/{c['desired']} ready")
    return lines


# The image of AWS's validation job on the P6e-GB200 page (nvbandwidth across the ComputeDomain).
EXAMPLE_IMAGE = "ghcr.io/nvidia/k8s-samples:nvbandwidth-v0.7-8d103163"


def example(queue: Queue, namespace: str) -> Document:
    """A ready-to-copy ComputeDomain and a pod that claims its IMEX channel on ``queue``'s nodes (never applied)."""
    from fmcluster.backends.eks.software import device_plugins
    from fmcluster.catalog.hardware import hardware

    name = f"{queue.name}-imex"
    text = render_text("eks/imex-job-example.yaml.j2", queue=queue.name, instance_type=queue.instance_type,
                       ultraserver=queue.capacity.ultraserver or "UltraServer",
                       driver=f"{DRA_DRIVER.name} {DRA_DRIVER.version}", name=name, namespace=namespace,
                       claim_template=f"{name}-channel", node_selector={device_plugins.QUEUE_LABEL: queue.name},
                       image=EXAMPLE_IMAGE, gpus=hardware(queue.instance_type).accelerators or 0)
    return Document(f"example-{name}.yaml", "example", name, "kubernetes", {}, text,
                    [doc for doc in yaml.safe_load_all(text) if doc])
