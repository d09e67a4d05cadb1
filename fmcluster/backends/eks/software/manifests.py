"""Every Kubernetes object fmcluster makes for an eks spec, in the order they are applied.

Decisions here (which plugins, which quotas, what the Lustre volume refers to); layout in ``templates/eks/``. Every
object carries fmcluster's ownership labels, so ``destroy`` finds (and deletes) its own and nothing else. Values AWS
issues at create time (the Lustre file system's id, DNS name, mount name) are references, ``${kind.key.attr}``,
filled by the engine as for every other rendered document.
"""

from __future__ import annotations

import functools
from typing import Any

from fmcluster.backends.eks.nodes import burn_in_hold, quotas
from fmcluster.backends.eks.software import (
    autoscaler_install,
    device_plugins,
    dra_driver,
    network_topology,
    releases,
    scheduler_install,
)
from fmcluster.catalog.hardware import hardware
from fmcluster.render.templates import render_yaml
from fmcluster.spec import decisions
from fmcluster.spec.models import Queue, Spec, instance_types_of, max_nodes

CLUSTER_LABEL = "fmcluster.io/cluster"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "fmcluster"
# Where the claim and the scheduler's namespaced queues live: the namespace a job lands in unless it names one.
WORKLOAD_NAMESPACE = "default"
LUSTRE_NAME = "fsx-lustre"
KAI_PARENT_QUEUE = "fmcluster"
MEGABYTES_PER_GIB = 1024**3 / 10**6
# The node label naming a node's UltraServer (NVLink domain), the topology level under the network layers for a
# p6e-gb200 queue: fmcluster's own, which `create` writes on every node of an UltraServer queue
# (fmcluster.backends.eks.nodes.ultraserver_labels); None would leave the level out.
ULTRASERVER_NODE_LABEL: str | None = network_topology.ULTRASERVER_LABEL


# The kinds of object :func:`manifests` makes itself, for any scheduler (the releases' own are added by
# :func:`managed_kinds`).
_OWN_KINDS: list[tuple[str, str]] = [
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"), ("apps/v1", "DaemonSet"), ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("storage.k8s.io/v1", "StorageClass"), ("v1", "PersistentVolume"), ("v1", "PersistentVolumeClaim"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"), ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"), ("scheduling.volcano.sh/v1beta1", "Queue"),
    ("scheduling.run.ai/v2", "Queue"), ("node.k8s.io/v1", "RuntimeClass"), ("v1", "Namespace"),
    ("kueue.x-k8s.io/v1beta2", "Topology"), ("kai.scheduler/v1alpha1", "Topology"),
]


@functools.cache
def managed_kinds() -> list[tuple[str, str]]:
    """Every kind of object :func:`manifests` makes, for any scheduler: what ``discover`` lists by label to find what
    a lost state file no longer names (tests/backends/eks/test_eks_manifests.py holds it to what is rendered). A
    function, not a constant: the releases' kinds come from parsing their manifests (half a second), which only a
    command that lists a cluster's objects needs."""
    return _OWN_KINDS + [kind for kind in releases.kinds() if kind not in _OWN_KINDS]


def ownership_labels(spec: Spec) -> dict[str, str]:
    """The labels on every object fmcluster makes for ``spec``."""
    return {CLUSTER_LABEL: spec.name, MANAGED_BY_LABEL: MANAGED_BY}


def node_labels(queue: Queue) -> dict[str, str]:
    """The labels a queue's node group puts on its nodes: its queue, and one per device plugin its nodes need."""
    labels = {device_plugins.QUEUE_LABEL: queue.name}
    if hardware(queue.instance_type).has_gpus:
        labels[device_plugins.NVIDIA_LABEL] = "true"
    if decisions.needs_neuron(queue):
        labels[device_plugins.NEURON_LABEL] = "true"
    if quotas.efa_interfaces(queue):
        labels[device_plugins.EFA_LABEL] = "true"
    if dra_driver.serves(queue):  # where the DRA driver's kubelet plugin runs (its node affinity)
        labels[dra_driver.GPU_PRESENT_LABEL] = "true"
    return labels


def manifests(spec: Spec) -> list[dict[str, Any]]:
    """The Kubernetes objects for ``spec``, in apply order: the scheduler's and the MPI Operator's releases (CRDs
    first: their kinds must exist before their objects), then device plugins, storage, and the scheduler's queues.
    The engine orders them by :func:`fmcluster.backends.eks.software.apply_order.wire`; this order is the one a reader
    follows."""
    objects: list[dict[str, Any]] = scheduler_install.manifests(spec.kubernetes.scheduler)
    objects += autoscaler_install.manifests(spec)  # the Cluster Autoscaler, when a queue is elastic
    objects += _device_plugins(spec)
    if dra_driver.needed(spec):
        objects += dra_driver.manifests()
    if spec.storage.lustre is not None:
        objects += _lustre(spec)
    objects += _scheduler_queues(spec)
    labels = ownership_labels(spec)
    for obj in objects:
        metadata = obj.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    return objects


def _device_plugins(spec: Spec) -> list[dict[str, Any]]:
    """Only the plugins some queue's nodes need: a DaemonSet with no node to run on is noise in ``status``."""
    wanted = {label for queue in spec.queues for label in node_labels(queue)}
    # A gated queue's nodes are held by the burn-in taint until they pass, and the check needs their devices: the
    # plugins tolerate exactly that taint.
    gate = burn_in_hold.TOLERATION
    objects: list[dict[str, Any]] = []
    if device_plugins.NVIDIA_LABEL in wanted:
        objects.append(render_yaml("eks/nvidia_device_plugin.yaml.j2", image=device_plugins.NVIDIA_IMAGE,
                                   node_label=device_plugins.NVIDIA_LABEL, gate=gate)[1])
    if device_plugins.NEURON_LABEL in wanted:
        objects += render_yaml("eks/neuron_device_plugin.yaml.j2", image=device_plugins.NEURON_IMAGE,
                               node_label=device_plugins.NEURON_LABEL, gate=gate)[1]
    if device_plugins.EFA_LABEL in wanted:
        objects.append(render_yaml("eks/efa_device_plugin.yaml.j2", image=device_plugins.efa_image(spec.region),
                                   node_label=device_plugins.EFA_LABEL, gate=gate)[1])
    return objects


def _lustre(spec: Spec) -> list[dict[str, Any]]:
    lustre = spec.storage.lustre
    assert lustre is not None
    if lustre.existing_id is not None:  # read from FSx at create time (fmcluster/aws/existing_storage.py)
        file_system_id = lustre.existing_id
        dns_name, mount_name = "${existing_fsx_lustre.lustre.dns_name}", "${existing_fsx_lustre.lustre.mount_name}"
    else:  # the file system fmcluster creates (fmcluster/aws/fsx.py)
        file_system_id = "${fsx_lustre.lustre.id}"
        dns_name, mount_name = "${fsx_lustre.lustre.dns_name}", "${fsx_lustre.lustre.mount_name}"
    return render_yaml("eks/lustre.yaml.j2", storage_class=LUSTRE_NAME, volume=LUSTRE_NAME, claim=LUSTRE_NAME,
                       namespace=WORKLOAD_NAMESPACE, capacity=f"{lustre.capacity_gib}Gi",
                       file_system_id=file_system_id, dns_name=dns_name, mount_name=mount_name)[1]


def _scheduler_queues(spec: Spec) -> list[dict[str, Any]]:
    scheduler = spec.kubernetes.scheduler
    if scheduler == "kueue":
        return _kueue(spec)
    if scheduler == "volcano":
        queues = [{"name": queue.name, "quota": quotas.queue_quota(queue)} for queue in spec.queues]
        return render_yaml("eks/volcano.yaml.j2", queues=queues)[1]
    topologies = _topologies(spec)
    # KAI's admission webhook sets `runtimeClassName: nvidia` on every GPU pod (its Config's
    # admission.gpuPodRuntimeClassName, default "nvidia"), and Kubernetes refuses a pod whose RuntimeClass does not
    # exist. EKS's NVIDIA AMIs (AL2023 nodeadm) configure a containerd runtime named `nvidia` (as the default
    # runtime) but make no RuntimeClass object, so fmcluster makes RuntimeClass `nvidia` with handler `nvidia`:
    # the injected name then resolves to the runtime the node already has, and KAI's release stays as published
    # (the alternative, gpuPodRuntimeClassName "", would edit its Config and differ from every KAI install guide).
    return render_yaml("eks/kai.yaml.j2", parent=KAI_PARENT_QUEUE, topologies=topologies,
                       queues=[{"name": queue.name, "quota": _kai_quota(queue)} for queue in spec.queues])[1]


def _kueue(spec: Spec) -> list[dict[str, Any]]:
    # One flavor per instance type, shared by the queues that launch it; a queue of several types lists each
    # type's flavor, each with that type's quota at the queue's most nodes (its node group may be all of any one
    # type, and a g6.xlarge flavor must not admit what only p5 nodes could hold).
    # A type EC2 topology describes: its flavor names the Topology of its levels (Kueue's Topology-Aware
    # Scheduling; the ResourceFlavor CRD wants nodeLabels beside topologyName, which the instance-type label is).
    topologies = _topologies(spec)
    flavors = {name: {"name": name, "instance_type": name, "topology": _topology_of(name)} for queue in spec.queues
               for name in instance_types_of(queue)}
    queues = [{"name": queue.name, "covered": quotas.covered_resources(queue), "flavors": quotas.flavor_quotas(queue)}
              for queue in spec.queues]
    return render_yaml("eks/kueue.yaml.j2", topologies=topologies, flavors=list(flavors.values()), queues=queues,
                       namespace=WORKLOAD_NAMESPACE)[1]


def _instance_types(spec: Spec) -> list[str]:
    return [name for queue in spec.queues for name in instance_types_of(queue)]


def _topologies(spec: Spec) -> dict[str, list[str]]:
    return network_topology.topologies(_instance_types(spec), ULTRASERVER_NODE_LABEL)


def _topology_of(instance_type: str) -> str | None:
    levels = network_topology.levels(instance_type, ULTRASERVER_NODE_LABEL)
    return network_topology.name(levels) if levels else None


def _kai_quota(queue: Queue) -> dict[str, int]:
    """The queue's quota in KAI's units: millicpus, GPUs, megabytes. Neuron devices and EFA have no KAI field."""
    node = quotas.largest_node(queue)
    nodes = max_nodes(queue)
    return {"cpu": node.cpu * 1000 * nodes, "gpu": node.nvidia_gpus * nodes,
            "memory": int(node.memory_gib * MEGABYTES_PER_GIB) * nodes}

