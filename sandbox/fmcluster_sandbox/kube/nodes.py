"""Node objects for a cluster's running instances, with what their kubelet and device plugins would report.

The EKS emulator supplies one dict per instance not terminated (``name``, ``instance_type``, ``instance_id``,
``nodegroup``, ``labels``, ``taints``; optionally ``zone``, and ``running``: False for a stopped instance); this
module turns it into a core/v1 Node:

* labels: the given ones plus the kubelet's well-known labels (``kubernetes.io/hostname``, ``kubernetes.io/os``,
  ``kubernetes.io/arch``; "Well-Known Labels, Annotations and Taints"); ``spec.taints`` as given; ``spec.providerID``
  ``aws:///<zone>/<instance id>``.
* ``status.capacity``: ``cpu`` (DefaultVCpus), ``memory`` (MemoryInfo.SizeInMiB, in Ki) and ``pods`` from the
  sandbox's DescribeInstanceTypes data. ``pods`` is EKS's max-pods formula without prefix delegation,
  ``MaximumNetworkInterfaces * (Ipv4AddressesPerInterface - 1) + 2`` ("Amazon EKS recommended maximum Pods for each
  Amazon EC2 instance type"), capped at 110 below 30 vCPUs and 250 from 30 vCPUs up (EKS guide "Choose an optimal
  Amazon EC2 node instance type": managed node groups enforce that maximum on maxPods).
* ``status.allocatable``: capacity less the EKS AMIs' kube-reserved (memory ``11 MiB * pods + 255 MiB``; CPU 6% of
  the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of the rest) and the 100Mi memory eviction threshold
  (amazon-eks-ami bootstrap / nodeadm defaults).
* extended resources appear only while a device plugin runs on the node, i.e. a DaemonSet exists whose pod
  template runs the plugin's image and could be placed on the node (:func:`.placement.fits`: nodeSelector,
  required node affinity, tolerations for the node's NoSchedule/NoExecute taints, requests within allocatable):
  ``nvidia.com/gpu`` (NVIDIA k8s-device-plugin image ``nvcr.io/nvidia/k8s-device-plugin``) = the instance type's
  NVIDIA GPU count; ``vpc.amazonaws.com/efa`` (the
  AWS EFA Kubernetes device plugin image ``…/eks/aws-efa-k8s-device-plugin``) = the EFA interfaces attached to the
  instance (moto's EC2 record; the node dict's ``efa_interfaces`` when given); ``aws.amazon.com/neuron`` and
  ``aws.amazon.com/neuroncore`` (Neuron device plugin image ``…/neuron-device-plugin``) = NeuronInfo device and
  core counts.

* ``hugepages-2Mi`` on a node with EFA interfaces attached: the EFA installer's ``efa-config`` (on EKS's accelerated
  AMIs, the only ones fmcluster gives EFA node groups) reserves 2 MiB pages at boot for libfabric's EFA provider:
  110 MB for each of the 2 libfabric endpoints Open MPI opens per core, ``110 × cores + 1`` pages (the script as
  quoted in bottlerocket-os/bottlerocket-core-kit#141, which does the same on Bottlerocket; ofiwg/libfabric#9739:
  "If you have EFA installer installed on your instance, you should be able to see there are huge page
  reserved"), cores being the vCPUs Linux counts. The kubelet reports pre-allocated pages as capacity and
  allocatable (Kubernetes "Manage HugePages") and takes them out of allocatable memory (kubelet
  ``nodestatus.MachineInfo``: "for every huge page reservation, we need to remove it from allocatable memory").

Not emulated: the kubelet's real memory figure (the instance's nominal memory is reported), ephemeral-storage,
hugepages other than EFA's, node conditions other than Ready, and daemon pods actually running (a matching DaemonSet
counts as running on every node it could be placed on; nothing checks its containers start).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from fmcluster_sandbox.kube import placement

DEVICE_PLUGINS = {
    "nvidia.com/gpu": re.compile(r"^nvcr\.io/nvidia/k8s-device-plugin(:|@|$)"),
    "vpc.amazonaws.com/efa": re.compile(
        r"^(\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?|public\.ecr\.aws)/eks/aws-efa-k8s-device-plugin(:|@|$)"),
    "aws.amazon.com/neuron": re.compile(
        r"^(\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?|public\.ecr\.aws)/neuron/neuron-device-plugin(:|@|$)"),
}
ARCH = {"x86_64": "amd64", "arm64": "arm64", "i386": "386"}
EFA_HUGEPAGES_PER_CORE = 110  # efa-config: 2 endpoints × 110 MB per core, in 2 MiB pages


def efa_hugepages_mib(vcpus: int) -> int:
    """MiB of 2 MiB huge pages the EFA installer reserves on a node with ``vcpus`` (module docstring)."""
    return (EFA_HUGEPAGES_PER_CORE * vcpus + 1) * 2


def max_pods(facts: dict[str, Any]) -> int:
    net = facts.get("NetworkInfo", {})
    pods = int(net.get("MaximumNetworkInterfaces", 1)) * (int(net.get("Ipv4AddressesPerInterface", 2)) - 1) + 2
    cap = 110 if int(facts.get("VCpuInfo", {}).get("DefaultVCpus", 0)) < 30 else 250
    return min(pods, cap)


def _reserved_millicores(vcpus: int) -> int:
    tiers = [(1, 60), (1, 10), (2, 5)]  # (cores, millicores reserved per core)
    total, left = 0.0, vcpus
    for cores, per in tiers:
        take = min(left, cores)
        total, left = total + take * per, left - take
    return int(total + left * 2.5)


def node_object(spec: dict[str, Any], daemonsets: Iterable[dict[str, Any]], kubelet_version: str,
                efa_interfaces: int | None = None) -> dict[str, Any]:
    from fmcluster_sandbox import instance_catalog

    facts = instance_catalog.instance_type(spec["instance_type"]) or {}
    arch = ARCH.get((instance_catalog.architectures(facts) or ["x86_64"])[0], "amd64")
    labels = {"kubernetes.io/hostname": spec["name"], "kubernetes.io/os": "linux", "kubernetes.io/arch": arch,
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": arch,
              "node.kubernetes.io/instance-type": spec["instance_type"],
              "beta.kubernetes.io/instance-type": spec["instance_type"]}
    labels.update(spec.get("labels") or {})
    taints = [dict(t) for t in spec.get("taints") or []]
    vcpus = int(facts.get("VCpuInfo", {}).get("DefaultVCpus", 0))
    mib = int(facts.get("MemoryInfo", {}).get("SizeInMiB", 0))
    pods = max_pods(facts) if facts else 110
    capacity = {"cpu": str(vcpus), "memory": f"{mib * 1024}Ki", "pods": str(pods)}
    hugepages = efa_hugepages_mib(vcpus) if efa_interfaces else 0
    allocatable = {"cpu": f"{max(vcpus * 1000 - _reserved_millicores(vcpus), 0)}m",
                   "memory": f"{max(mib - (11 * pods + 255) - 100 - hugepages, 0) * 1024}Ki", "pods": str(pods)}
    if hugepages:
        capacity["hugepages-2Mi"] = allocatable["hugepages-2Mi"] = f"{hugepages}Mi"
    node = {"name": spec["name"], "labels": labels, "taints": taints, "allocatable": allocatable}
    running = {resource for resource, image in DEVICE_PLUGINS.items()
               if any(_runs_image(ds, image) and schedulable(ds, node) for ds in daemonsets)}
    extended: dict[str, int] = {}
    if "nvidia.com/gpu" in running:
        extended["nvidia.com/gpu"] = sum(int(g.get("Count", 0)) for g in facts.get("GpuInfo", {}).get("Gpus", [])
                                         if g.get("Manufacturer") == "NVIDIA")
    if "vpc.amazonaws.com/efa" in running:
        extended["vpc.amazonaws.com/efa"] = int(efa_interfaces or 0)
    if "aws.amazon.com/neuron" in running:
        devices = facts.get("NeuronInfo", {}).get("NeuronDevices", [])
        extended["aws.amazon.com/neuron"] = sum(int(d.get("Count", 0)) for d in devices)
        extended["aws.amazon.com/neuroncore"] = sum(int(d.get("Count", 0)) * int(d.get("CoreInfo", {}).get("Count", 0))
                                                    for d in devices)
    for resource, count in extended.items():
        if count:  # a plugin that finds no devices advertises none
            capacity[resource] = allocatable[resource] = str(count)
    zone = spec.get("zone") or labels.get("topology.kubernetes.io/zone", "")
    uid = hashlib.sha1(f"{spec['name']}/{spec.get('instance_id', '')}".encode()).hexdigest()
    node_spec: dict[str, Any] = {"providerID": f"aws:///{zone}/{spec.get('instance_id', '')}"}
    if taints:
        node_spec["taints"] = taints
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": spec["name"], "labels": labels,
                     "uid": f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}"},
        "spec": node_spec,
        "status": {
            "capacity": capacity, "allocatable": allocatable,
            "conditions": [_ready(spec.get("running", True))],
            "addresses": [{"type": "InternalDNS", "address": spec["name"]},
                          {"type": "Hostname", "address": spec["name"]}],
            # Every NodeSystemInfo field is required; the image is the EKS-optimized Amazon Linux 2023 AMI.
            "nodeInfo": {"architecture": arch, "operatingSystem": "linux", "kubeletVersion": f"v{kubelet_version}",
                         "kubeProxyVersion": f"v{kubelet_version}", "containerRuntimeVersion": "containerd://1.7",
                         "osImage": "Amazon Linux 2023", "kernelVersion": "6.1", "bootID": uid[:32],
                         "machineID": uid[8:40], "systemUUID": f"ec2{uid[3:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-"
                                                               f"{uid[20:32]}"},
        },
    }


def _ready(running: bool) -> dict[str, str]:
    """The Ready condition: the kubelet's while its instance runs; once the instance stops, the node lifecycle
    controller's ("Nodes", "Node status": Ready is Unknown when the controller has not heard from the kubelet within
    node-monitor-grace-period), at once here rather than after that period."""
    if running:
        return {"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status"}
    return {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status."}


def _containers(ds: dict[str, Any]) -> list[dict[str, Any]]:
    pod = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    return list(pod.get("containers") or []) + list(pod.get("initContainers") or [])


def _runs_image(ds: dict[str, Any], image: re.Pattern[str]) -> bool:
    return any(image.match(str(c.get("image", ""))) for c in _containers(ds))


def schedulable(ds: dict[str, Any], node: dict[str, Any]) -> bool:
    """Whether the DaemonSet's pods could be placed on the node (:func:`.placement.fits`)."""
    pod = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    return placement.fits(pod, node, daemon=True)


def efa_interfaces(instance_id: str, account: str, region: str) -> int | None:
    """EFA interfaces (``efa`` and ``efa-only``) attached to the instance in moto's EC2, or None if unknown."""
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[account][region]
    for reservation in list(backend.reservations.values()):
        for instance in reservation.instances:
            if instance.id == instance_id:
                return sum(1 for eni in instance.nics.values()
                           if getattr(eni, "interface_type", "interface") in ("efa", "efa-only"))
    return None
