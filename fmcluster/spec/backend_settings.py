"""The spec's settings that belong to one kind of backend: ``slurm`` (ParallelCluster, PCS), ``pcs`` and
``kubernetes`` (EKS)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from fmcluster.catalog import eks_versions
from fmcluster.spec.field_types import KubernetesScheduler, PcsSize, SlurmVersion, Strict


class SlurmDatabase(Strict):
    uri: str = Field(description="host:port of the MySQL/MariaDB accounting database.")
    user: str = Field(description="Database user.")
    password_secret_arn: Annotated[str, StringConstraints(pattern=r"^arn:aws[a-z-]*:secretsmanager:.+")] = Field(
        description="Secrets Manager secret that holds the database password.")


class Slurm(Strict):
    version: SlurmVersion = Field(
        "26.05", description="PCS only: the newest version botocore's PCS model and the PCS user guide support. "
        "24.11 and 25.05 are past AWS's end of life.")
    accounting: bool = Field(False, description="Slurm accounting. PCS: accounting mode STANDARD (PCS keeps the "
                                                "database). ParallelCluster: needs slurm.database.")
    database: SlurmDatabase | None = Field(None, description="ParallelCluster only: needed when accounting is on.")
    scaledown_idle_minutes: int = Field(
        10, ge=1, le=1440, description="Minutes a dynamic node stays idle before it is stopped (ParallelCluster "
        "ScaledownIdletime; PCS scaleDownIdleTimeInSeconds).")
    custom_settings: dict[str, str | int | float] = Field(
        default_factory=dict, description="Extra slurm.conf settings for the cluster. ParallelCluster: "
        "SlurmSettings.CustomSlurmSettings (its deny-list applies). PCS: the cluster's slurmCustomSettings, limited to "
        "the parameters PCS allows (PCS user guide, 'Custom Slurm settings for AWS PCS clusters').")


class Pcs(Strict):
    size: PcsSize = Field(
        "auto", description="Controller size, fixed at creation: SMALL ≤32 nodes, MEDIUM ≤512, LARGE ≤2048."
    )


class Kubernetes(Strict):
    version: Annotated[str, StringConstraints(pattern=r"^1\.\d{1,3}$")] = Field(
        eks_versions.DEFAULT_VERSION, description="eks only: the cluster's Kubernetes version (default: the newest "
        f"on EKS standard support that fmcluster knows, {eks_versions.DEFAULT_VERSION}). A version on extended "
        "support costs $0.60 an hour for the control plane instead of $0.10.")
    scheduler: KubernetesScheduler = Field(
        "kueue", description="eks only: the batch scheduler whose queues fmcluster makes, one per spec queue: kueue "
        "(a ResourceFlavor, ClusterQueue and LocalQueue), volcano (a Queue) or kai (the NVIDIA KAI Scheduler: a "
        "Queue, and the nvidia RuntimeClass).")
    # strict: a quoted '2' or a bare true is a mistake, not a node count.
    system_nodes: Annotated[int, Field(strict=True, ge=1, le=100)] = Field(
        2, description="eks only: nodes of the cluster's `system` managed node group, where cluster software runs "
        "(the scheduler's controllers and webhooks, CoreDNS, the FSx CSI controller, the MPI Operator) so that it "
        "outlives any Capacity Block's end or Spot reclaim of the queues. They are On-Demand, labelled "
        "fmcluster.io/node-role=system and tainted CriticalAddonsOnly=true:NoSchedule, so training pods never land "
        "there. Two (the default) keep two replicas of each controller apart, so one node's loss stops nothing; at "
        "least 1. `fmcluster scale NAME system=N` changes it.")
    system_instance_type: str = Field(
        "m7i.xlarge", description="eks only: the instance type of the `system` node group: a non-accelerated type "
        "sold On-Demand (x86_64 or Graviton arm64; each boots the EKS-optimized AL2023 standard image of its "
        "architecture). The default m7i.xlarge (4 vCPUs, 16 GiB, current-generation Intel) holds what runs there "
        "with room to spare: the Kueue, Volcano or KAI controllers and webhooks ask for about 1-2 vCPUs and 1-2 GiB "
        "in all, CoreDNS, the FSx CSI controller and the MPI Operator a few hundred millicores and MiB each, and "
        "the node's own DaemonSets (VPC CNI, kube-proxy, Pod Identity agent, FSx CSI node) the rest; a 2-vCPU/8-GiB "
        "type would leave little headroom once the kubelet's reservations are taken.")
