"""The upstream releases fmcluster installs on an EKS cluster: the batch scheduler a spec names, the MPI Operator,
and (for UltraServer queues) NVIDIA's DRA driver, each pinned to one release whose manifests ship next to this
module, unchanged (gzip-compressed; see README.md).

Nothing here edits an object: :mod:`fmcluster.backends.eks.software.scheduler_install` makes what fmcluster applies of
them.
"""

from __future__ import annotations

import copy
import functools
import gzip
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: Kueue's set is 1.7 MB of YAML


@dataclass(frozen=True)
class Release:
    """One upstream project at the release fmcluster pins: its manifest file, in the folder named for the version."""

    name: str
    version: str
    folder: str
    file: str
    display: str
    # The namespace its namespaced objects live in, and whether the manifest itself makes that Namespace (Helm's
    # `--create-namespace` does it for a chart; a rendered chart holds none).
    namespace: str
    creates_namespace: bool
    # Whether its DaemonSets run on the nodes they serve (a node agent such as the DRA driver's kubelet plugin),
    # instead of on the `system` node group with its controllers.
    node_agents: bool = False

    @property
    def path(self) -> str:
        return f"{self.folder}/{self.file}"


SCHEDULERS: dict[str, Release] = {
    "kueue": Release("kueue", "v0.19.2", "kueue-v0.19.2", "kueue-v0.19.2.yaml.gz", "Kueue", "kueue-system", False),
    "volcano": Release("volcano", "v1.15.1", "volcano-v1.15.1", "volcano-v1.15.1.yaml.gz", "Volcano",
                       "volcano-system", False),
    "kai": Release("kai", "v0.13.0", "kai-scheduler-v0.13.0", "kai-scheduler-v0.13.0.yaml.gz",
                   "the NVIDIA KAI Scheduler", "kai-scheduler", False),
}
MPI_OPERATOR = Release("mpi-operator", "v0.8.0", "mpi-operator-v0.8.0", "mpi-operator.yaml.gz", "the MPI Operator",
                       "mpi-operator", True)
# The Cluster Autoscaler (chart 9.59.0), one render per Kubernetes minor: each carries the newest autoscaler release of
# that minor, as its README asks ("use the latest Cluster Autoscaler release that corresponds to the minor version of
# Kubernetes that their cluster is running"). Its namespace, kube-system, exists on every cluster: fmcluster makes
# (and deletes) no Namespace for it. :mod:`fmcluster.backends.eks.software.autoscaler_install` applies it.
CLUSTER_AUTOSCALER: dict[str, Release] = {
    minor: Release("cluster-autoscaler", tag, "cluster-autoscaler-chart-9.59.0",
                   f"cluster-autoscaler-chart-9.59.0-eks-{minor}.yaml.gz", "the Cluster Autoscaler", "kube-system",
                   True)
    for minor, tag in (("1.34", "v1.34.5"), ("1.35", "v1.35.2"), ("1.36", "v1.36.1"))}
# NVIDIA's DRA driver for GPUs, rendered with the values of AWS's P6e-GB200 procedure (ComputeDomains on, DRA GPUs
# off: the device plugin keeps serving nvidia.com/gpu). Installed on clusters with an UltraServer queue only.
DRA_DRIVER = Release("dra-driver-nvidia-gpu", "v0.4.1", "dra-driver-nvidia-gpu-v0.4.1",
                     "dra-driver-nvidia-gpu-v0.4.1-eks-computedomains.yaml.gz", "NVIDIA's DRA driver for GPUs",
                     "dra-driver-nvidia-gpu", False, node_agents=True)
RELEASES: tuple[Release, ...] = (*SCHEDULERS.values(), MPI_OPERATOR, DRA_DRIVER)


def manifest_bytes(release: Release) -> bytes:
    """The release's manifest file as upstream (or the reference's renderer) wrote it: the bytes its sha256 names."""
    return gzip.decompress(resources.files(__name__).joinpath(release.folder, release.file).read_bytes())


@functools.cache
def _parsed(release: Release) -> tuple[dict[str, Any], ...]:
    return tuple(doc for doc in yaml.load_all(manifest_bytes(release), Loader=_LOADER) if doc)


def objects(release: Release) -> list[dict[str, Any]]:
    """Every object of the release's manifest, in file order (fresh copies: callers place and label them)."""
    return copy.deepcopy(list(_parsed(release)))


def crds(release: Release) -> list[dict[str, Any]]:
    """The release's CustomResourceDefinitions, as published."""
    return [copy.deepcopy(o) for o in _parsed(release) if o.get("kind") == "CustomResourceDefinition"]


def all_crds() -> list[dict[str, Any]]:
    """Every shipped CRD, of every release (what offline validation knows custom resources by)."""
    return [crd for release in RELEASES for crd in crds(release)]


def kinds() -> list[tuple[str, str]]:
    """Every ``(apiVersion, kind)`` the shipped releases hold, in first-seen order."""
    seen: dict[tuple[str, str], None] = {}
    for release in (*RELEASES, *CLUSTER_AUTOSCALER.values()):
        for obj in _parsed(release):
            seen.setdefault((obj["apiVersion"], obj["kind"]), None)
    return list(seen)
