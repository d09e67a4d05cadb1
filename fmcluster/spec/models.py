"""The spec: one short YAML file describing a training cluster.

These models hold shape, types and defaults. Rules that need several fields at once, or that mirror
what AWS would refuse, live in :mod:`fmcluster.spec.rules` so that each can point at its own field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PlainSerializer, StringConstraints

from fmcluster import catalog
from fmcluster.spec.backend_settings import Kubernetes, Pcs, Slurm
from fmcluster.spec.budget import Budget
from fmcluster.spec.burn_in_field import BurnIn, BurnInLevel
from fmcluster.spec.field_types import (
    AmiId,
    Backend,
    CapacityType,
    Cidr,
    MountPath,
    OperatingSystem,
    PolicyArn,
    RegionName,
    ReservationId,
    SecurityGroupId,
    Strict,
    SubnetId,
)
from fmcluster.spec.storage import Storage


class InstanceTypes(str):
    """A queue's instance type: one name, or several the backend may launch interchangeably.

    It *is* the name every single-type reading of the spec uses (catalog facts, EFA layout, plan and cost):
    the most expensive of the list by the catalog's On-Demand price (else the first), so a plan never
    understates. ``.all`` holds every type in the spec's order; renderers send all of them."""

    all: tuple[str, ...]

    @classmethod
    def of(cls, value: str | list[str]) -> InstanceTypes:
        names = (value,) if isinstance(value, str) else tuple(value)
        if not names:
            raise ValueError("name at least one instance type")

        def price(name: str) -> float:
            return catalog.on_demand_usd_per_hour(name) or 0.0

        primary = max(names, key=lambda name: (price(name), -names.index(name)))
        made = cls(primary)
        made.all = names
        return made


def _serialize_types(value: str) -> str | list[str]:
    names = getattr(value, "all", (value,))
    return names[0] if len(names) == 1 else list(names)


QueueInstanceType = Annotated[
    str | list[Annotated[str, StringConstraints(min_length=1)]],
    AfterValidator(InstanceTypes.of),
    PlainSerializer(_serialize_types),
]


def instance_types_of(queue: Queue) -> tuple[str, ...]:
    """Every instance type of a queue, in the spec's order."""
    return getattr(queue.instance_type, "all", (queue.instance_type,))


class SshAccess(Strict):
    key_name: str | None = Field(None, description="EC2 key pair for the head/login node.")
    allowed_cidr: Cidr | None = Field(
        None,
        description="Network allowed to reach SSH: an IPv4 CIDR, or on the pcs backend an IPv6 one. Never "
        "defaults to 0.0.0.0/0: write it to get it (a warning names anything wider than a /16). Without it, SSH "
        "is closed to the outside and SSM Session Manager is the way in.",
    )


class Network(Strict):
    subnet_id: SubnetId | None = Field(
        None,
        description="Compute subnet, in the Availability Zone that has the capacity. Omitted: the default "
        "VPC's subnet in an AZ that offers the instance type, found at create time.",
    )
    head_subnet_id: SubnetId | None = Field(None, description="Subnet for the head/login node (default: subnet_id).")
    create_vpc: bool | None = Field(
        None,
        description="Create the cluster's own network: a VPC, a public subnet for the head/login node, a private "
        "subnet for compute (in the AZ that offers the types or holds the reservation) behind a NAT gateway, an "
        "internet gateway and an S3 gateway endpoint, all removed by destroy. Default: on when subnet_id is "
        "absent. false without subnet_id: the default VPC's public subnet, which only single-interface nodes "
        "can use (a multi-interface EFA node gets no public IP there).",
    )
    vpc_cidr: Cidr = Field(
        "10.0.0.0/16",
        description="IPv4 block of the VPC fmcluster creates (a /16 to a /20): the private compute subnet takes "
        "its first half, the public subnet a sixteenth after it. Only with a created network.",
    )
    ssh: SshAccess = Field(default_factory=SshAccess, description="SSH access to the head node (ParallelCluster) or "
                           "login node (PCS).")
    additional_security_groups: list[SecurityGroupId] = Field(
        default_factory=list, max_length=4,
        description="Existing security groups put on every node (head/login and compute) besides fmcluster's own "
        "cluster group, e.g. to reach a database or a license server. They must be in the subnet's VPC, so they "
        "need network.subnet_id. fmcluster never changes or deletes them.")
    security_groups: list[SecurityGroupId] = Field(
        default_factory=list, max_length=5,
        description="ParallelCluster only: existing security groups used instead of the ones ParallelCluster "
        "creates for the head node and the queues (HeadNode/SlurmQueues Networking.SecurityGroups); they must "
        "allow all traffic among the nodes. Refused on pcs, whose controller and nodes share fmcluster's group.")


class HeadNode(Strict):
    instance_type: str = Field("m7i.2xlarge", description="The ParallelCluster head node, or the instance type of "
                                                          "the PCS login node group (one node).")
    root_volume_gib: int = Field(200, ge=35, le=16384, description="Root volume of the head/login node, GiB.")


ImageFamily = Literal["pcs-sample", "dlami", "neuron"]


class Image(Strict):
    ami: AmiId | None = Field(
        None, description="Custom AMI for all nodes: on ParallelCluster one built by `pcluster build-image` (its "
        "Build.ParentImage may be a DLAMI); on PCS one with the PCS agent and Slurm installed. Give ami or family.")
    family: ImageFamily | None = Field(
        None, description="An image AWS publishes, by purpose. pcs-sample: AWS's PCS sample AMIs (pcs backend; "
        "the default there). dlami and neuron (the Deep Learning AMI and the Neuron DLAMI, found by their SSM "
        "public parameters) carry neither ParallelCluster's cookbook nor the PCS agent, so neither backend can "
        "boot them as they are: build an image from them and set ami. Give ami or family.")


class NodeRange(Strict):
    min: int = Field(ge=0, le=2048, description="Nodes that stay up (ParallelCluster MinCount; PCS "
                                                "minInstanceCount).")
    max: int = Field(ge=1, le=2048, description="Most nodes the queue scales to (MaxCount; maxInstanceCount).")


# botocore ec2 model, CapacityReservationTarget.CapacityReservationResourceGroupArn; ParallelCluster's own pattern
# for it (pcluster/schemas/cluster_schema.py): arn:<partition>:resource-groups:<region>:<account>:group/<name>.
ResourceGroupArn = Annotated[str, StringConstraints(
    pattern=r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]{1,128}$")]
UltraServerType = Literal["u-p6e-gb200x36", "u-p6e-gb200x72", "u-trn2x64"]


class Capacity(Strict):
    type: CapacityType = Field(
        "on-demand", description="How the nodes are bought: on-demand, spot, reservation (an ODCR) or capacity-block "
        "(ParallelCluster CapacityType; PCS purchaseOption and the launch template's market options).")
    reservation_id: ReservationId | None = Field(
        None, description="ODCR or Capacity Block id (cr-…); for reservation and capacity-block (or, for a "
        "reservation, resource_group_arn). Targeted and open ODCRs alike: the nodes name it, so they use it."
    )
    resource_group_arn: ResourceGroupArn | None = Field(
        None, description="type reservation only: a capacity reservation resource group (several ODCRs, "
        "arn:aws:resource-groups:REGION:ACCOUNT:group/NAME) the nodes launch into, instead of one reservation_id "
        "(ParallelCluster CapacityReservationResourceGroupArn; PCS launch template CapacityReservationTarget).")
    ultraserver: UltraServerType | None = Field(
        None, description="type capacity-block only: the EC2 UltraServer the Capacity Block reserves "
        "(u-p6e-gb200x36 = 9 and u-p6e-gb200x72 = 18 p6e-gb200.36xlarge; u-trn2x64 = 4 trn2u.48xlarge). The queue "
        "holds whole UltraServers (nodes a multiple of its size); each is one NVLink / NeuronLink domain, shown "
        "by plan and tagged on the nodes (fmcluster:ultraserver).")


class Iam(Strict):
    additional_policies: list[PolicyArn] = Field(
        default_factory=list, max_length=10,
        description="Managed IAM policies (ARNs) attached to the nodes' role, e.g. "
        "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess for data or AmazonEC2ContainerRegistryReadOnly for "
        "images. ParallelCluster: Iam.AdditionalIamPolicies of the head node and every queue; pcs: attached to "
        "fmcluster's node role (detached, never deleted, by destroy).")


class QueueIam(Strict):
    additional_policies: list[PolicyArn] = Field(
        default_factory=list, max_length=10,
        description="ParallelCluster only: managed policies for this queue's nodes alone, besides iam."
        "additional_policies (SlurmQueues[].Iam.AdditionalIamPolicies). Refused on pcs, where every node group "
        "shares fmcluster's one node role.")


class Queue(Strict):
    name: str = Field(description="Queue name: the Slurm partition (ParallelCluster, PCS), or on EKS the node group "
                      "and the scheduler's queue that jobs name.")
    instance_type: QueueInstanceType = Field(
        description="EC2 instance type of the queue's nodes, or a list of types the backend may launch "
        "interchangeably (ParallelCluster compute resource Instances, PCS instanceConfigs): they must have the "
        "same vCPUs, accelerators and EFA layout, and not be a reservation or Capacity Block (those hold one "
        "type). plan and cost use the most expensive of the list.")
    subnet_id: SubnetId | None = Field(
        None, description="This queue's own subnet (another AZ, a Local Zone such as us-east-1-dfw-2a where "
        "p6e-gb200 is sold, or a private subnet for multi-interface nodes), in the VPC of network.subnet_id. "
        "Default: network.subnet_id.")
    # strict: a quoted '4' or a bare true is a mistake, not a node count.
    nodes: Annotated[int, Field(strict=True, ge=1, le=2048)] | NodeRange = Field(
        description="Static node count (an integer), or {min, max} for a queue that scales with jobs."
    )
    capacity: Capacity = Field(default_factory=Capacity, description="Where the nodes' capacity comes from.")
    efa: bool | None = Field(None, description="Default: on wherever the instance type supports EFA.")
    placement_group: Literal["auto"] | bool = Field(
        "auto", description="auto: on for on-demand and spot; off for ODCRs and Capacity Blocks (AWS places those)."
    )
    gpu_health_checks: bool = Field(
        True, description="GPU health checks on NVIDIA GPU queues. ParallelCluster: HealthChecks.Gpu (DCGM before "
        "each job). PCS: instanceHealthChecks (continuous STANDARD monitoring and a QUICK DCGM check at each start), "
        "which needs Slurm 26.05: on 25.11 the default is off with a warning and an explicit true is refused.")
    auto_repair: bool | None = Field(
        None, description="Find unhealthy nodes and repair them. Default: on for accelerated queues (GPU, Trainium), "
        "off for others. eks: the node group's nodeRepairConfig plus the eks-node-monitoring-agent add-on; on a "
        "Capacity Block or an ODCR the faults the agent reports reboot the node instead of replacing it. pcs: "
        "instanceHealthChecks (NVIDIA GPUs, Slurm 26.05+). parallelcluster: HealthChecks.Gpu (GPU types). On pcs "
        "and parallelcluster it is gpu_health_checks under another name: write one of them.")
    burn_in: BurnInLevel | BurnIn | None = Field(
        None, description="How new nodes are checked (issue 37): quick (device counts, DCGM level 1, EFA), standard "
        "(DCGM level 2, EFA loopback, a short NCCL all-reduce against a floor), long (DCGM level 3, a longer NCCL "
        "run) or off; or {level, floors: {<nodes>: <GB/s>}}. Default: standard on an accelerated queue of 2 or "
        "more nodes whose type has a known 2-node floor, quick on other accelerated queues, off on CPU queues. "
        "plan shows each level's time; `fmcluster burn-in` runs the checks. create does not gate on it yet.")
    job_exclusive: bool | None = Field(
        None, description="Whole nodes per job (Slurm OverSubscribe=EXCLUSIVE). Default: on for accelerator queues "
        "(GPU/Trainium training wants every GPU and EFA interface of a node), off for CPU queues.")
    slurm_settings: dict[str, str | int | float] = Field(
        default_factory=dict, description="Extra Slurm partition settings for this queue. ParallelCluster: the "
        "queue's CustomSlurmSettings. PCS: the queue's slurmCustomSettings, limited to the parameters PCS allows "
        "for queues (PCS user guide, 'Custom Slurm settings for AWS PCS queues').")
    root_volume_gib: int | None = Field(
        None, ge=35, le=16384, description="Root volume of each compute node, GiB (container images need room). "
        "Default: the larger of 200 and half the head node's root volume.")
    scratch_mount: MountPath | None = Field(
        None, description="Where the instance-store NVMe is mounted as local scratch (ParallelCluster "
        "EphemeralVolume.MountDir; PCS: a RAID 0 of the NVMe devices made at boot; eks: nodeadm's NodeConfig "
        "localStorage RAID0 with this mountPath, the array at SCRATCH/0 for a hostPath volume, kubelet and "
        "containerd on it). Default /local_scratch on types with NVMe; refused on types without.")
    iam: QueueIam | None = Field(None, description="IAM for this queue's nodes (ParallelCluster only).")
    compute_resource: str | None = Field(
        None,
        description="Name of the ParallelCluster compute resource or PCS compute node group. Default: derived "
        "from the instance type (ParallelCluster) or the queue name (PCS).",
    )


class Software(Strict):
    containers: bool = Field(
        True, description="Enroot and Pyxis configured with Slurm on every node (srun --container-image), by the "
        "script fmcluster/scripts/containers.sh: ParallelCluster CustomActions (it ships both, Pyxis disabled); "
        "PCS user data (installs them where the image lacks them).")
    monitoring: bool = Field(
        False, description="Prometheus exporters on every node, by fmcluster/scripts/monitoring.sh: node_exporter "
        "(host metrics, including EFA counters from /sys/class/infiniband) on port 9100 and, on NVIDIA GPU nodes "
        "whose image has Docker (the DLAMI does), NVIDIA's DCGM exporter container on port 9400 (skipped, with a "
        "message in the node's log, without Docker). Nothing scrapes them: point your Prometheus at the nodes. "
        "ParallelCluster also turns on detailed monitoring and its CloudWatch dashboard and logs.")


BootstrapTarget = Literal["compute", "head", "login"]


class BootstrapScript(Strict):
    run: Annotated[str, StringConstraints(min_length=1, max_length=1024)] = Field(
        description="A script: a local path (relative to the spec file) that fmcluster uploads, or an s3:// URL "
        "used as is.")
    args: list[str] = Field(default_factory=list, description="Arguments passed to the script.")
    on: BootstrapTarget = Field(
        "compute", description="Which nodes run it: compute, head or login (head and login are the same node: the "
        "ParallelCluster head node, the PCS login node group).")


class Workload(Strict):
    model_params_b: float = Field(gt=0, le=100_000, description="Model size in billions of parameters.")
    checkpoint_every_min: float = Field(30, gt=0, le=10_080, description="Checkpoint interval: plan reports the "
                                                                          "time a checkpoint takes and its share.")
    tokens_per_second: float | None = Field(None, gt=0, description="Target training throughput: plan reports "
                                                                     "the compute it needs against the cluster's.")
    sequence_length: int | None = Field(None, gt=0, description="Training sequence length, reported with the "
                                                                 "workload in plan.")


class Spec(Strict):
    name: str = Field(description="Cluster name, unique per region.")
    region: RegionName = Field("us-east-1", description="AWS Region of the cluster and everything it uses.")
    backend: Backend = Field("parallelcluster", description="parallelcluster (AWS ParallelCluster 3), pcs (AWS "
                                                            "Parallel Computing Service) or eks (Amazon EKS with a "
                                                            "batch scheduler).")
    network: Network = Field(default_factory=Network, description="Subnets, and SSH access to the head or login "
                                                                  "node (ParallelCluster, PCS).")
    head_node: HeadNode = Field(default_factory=HeadNode, description="The head node (ParallelCluster) or login "
                                                                      "node group (PCS); EKS has none (reach it "
                                                                      "with fmcluster kubeconfig).")
    os: OperatingSystem | None = Field(
        None, description="Node OS. Default: ubuntu2204 on ParallelCluster; on PCS without image.ami, the OS of AWS's "
        "PCS sample AMIs, alinux2023 (the only one they come in).")
    image: Image | None = Field(None, description="A custom image for every node.")
    queues: list[Queue] = Field(min_length=1, description="The compute queues: Slurm partitions (ParallelCluster, "
                                "PCS) or, on EKS, managed node groups each with its scheduler queue.")
    storage: Storage = Field(default_factory=Storage, description="Shared file systems.")
    software: Software = Field(default_factory=Software, description="Node software fmcluster sets up.")
    slurm: Slurm = Field(default_factory=Slurm, description="Slurm settings (ParallelCluster, PCS; EKS has no Slurm: "
                                                        "its scheduler is kubernetes.scheduler).")
    pcs: Pcs = Field(default_factory=Pcs, description="Settings only the pcs backend has.")
    kubernetes: Kubernetes = Field(default_factory=Kubernetes, description="Settings only the eks backend has.")
    workload: Workload | None = Field(None, description="The training job, for plan's report only (renders "
                                                        "nothing).")
    iam: Iam = Field(default_factory=Iam, description="IAM for every node of the cluster.")
    budget: Budget | None = Field(None, description="A spend cap and/or a lease: a guard in AWS stops the "
                                  "cluster's compute when either is reached, with nobody's laptop on.")
    bootstrap: list[BootstrapScript] = Field(
        default_factory=list, description="Your own scripts, run as root after fmcluster's node setup: "
        "ParallelCluster CustomActions OnNodeConfigured; PCS user-data parts.")
    tags: dict[str, str] = Field(default_factory=dict, description="Tags on everything fmcluster creates (with its "
                                                                   "own fmcluster:* tags).")


def min_nodes(queue: Queue) -> int:
    return queue.nodes if isinstance(queue.nodes, int) else queue.nodes.min


def max_nodes(queue: Queue) -> int:
    return queue.nodes if isinstance(queue.nodes, int) else queue.nodes.max
