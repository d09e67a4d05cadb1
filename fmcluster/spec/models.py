"""The spec: one short YAML file describing a training cluster.

These models hold shape, types and defaults. Rules that need several fields at once, or that mirror
what AWS would refuse, live in :mod:`fmcluster.spec.rules` so that each can point at its own field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, StringConstraints

Backend = Literal["parallelcluster", "pcs"]
CapacityType = Literal["on-demand", "spot", "reservation", "capacity-block"]
OperatingSystem = Literal["ubuntu2204", "ubuntu2404", "alinux2023", "rhel9", "rocky9"]
SlurmVersion = Literal["24.11", "25.05", "25.11", "26.05"]
PcsSize = Literal["auto", "SMALL", "MEDIUM", "LARGE"]

# The shape only; which regions exist is botocore's partition data (fmcluster.regions, checked in rules).
RegionName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,40}$")]
SubnetId = Annotated[str, StringConstraints(pattern=r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")]
ReservationId = Annotated[str, StringConstraints(pattern=r"^cr-([0-9a-f]{8}|[0-9a-f]{17})$")]
AmiId = Annotated[str, StringConstraints(pattern=r"^ami-([0-9a-f]{8}|[0-9a-f]{17})$")]
# The shape only (IPv4 or IPv6 with a prefix length); rules check it is a network with ipaddress.
Cidr = Annotated[str, StringConstraints(pattern=r"^[0-9A-Fa-f:.]+/\d{1,3}$", max_length=64)]
MountPath = Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9_./-]*$", max_length=255)]
# EC2's security group id; ParallelCluster's and IAM's policy ARN (pcluster's AdditionalIamPolicy pattern).
SecurityGroupId = Annotated[str, StringConstraints(pattern=r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$")]
PolicyArn = Annotated[str, StringConstraints(pattern=r"^arn:aws[a-z-]*:iam::(aws|\d{12}):policy/[\w+=,.@/-]+$",
                                             max_length=2048)]
S3Url = Annotated[str, StringConstraints(pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")]


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
        from fmcluster import catalog

        def price(name: str) -> float:
            facts = catalog.instance(name)
            return (facts.usd_per_hour or 0.0) if facts else 0.0

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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SshAccess(_Strict):
    key_name: str | None = Field(None, description="EC2 key pair for the head/login node.")
    allowed_cidr: Cidr | None = Field(
        None,
        description="Network allowed to reach SSH: an IPv4 CIDR, or on the pcs backend an IPv6 one. Never "
        "defaults to 0.0.0.0/0: write it to get it (a warning names anything wider than a /16). Without it, SSH "
        "is closed to the outside and SSM Session Manager is the way in.",
    )


class Network(_Strict):
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
    ssh: SshAccess = Field(default_factory=SshAccess)
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


class HeadNode(_Strict):
    instance_type: str = "m7i.2xlarge"
    root_volume_gib: int = Field(200, ge=35, le=16384)


ImageFamily = Literal["pcs-sample", "dlami", "neuron"]


class Image(_Strict):
    ami: AmiId | None = Field(
        None, description="Custom AMI for all nodes: on ParallelCluster one built by `pcluster build-image` (its "
        "Build.ParentImage may be a DLAMI); on PCS one with the PCS agent and Slurm installed. Give ami or family.")
    family: ImageFamily | None = Field(
        None, description="An image AWS publishes, by purpose. pcs-sample: AWS's PCS sample AMIs (pcs backend; "
        "the default there). dlami and neuron (the Deep Learning AMI and the Neuron DLAMI, found by their SSM "
        "public parameters) carry neither ParallelCluster's cookbook nor the PCS agent, so neither backend can "
        "boot them as they are: build an image from them and set ami. Give ami or family.")


class NodeRange(_Strict):
    min: int = Field(ge=0, le=2048)
    max: int = Field(ge=1, le=2048)


# botocore ec2 model, CapacityReservationTarget.CapacityReservationResourceGroupArn; ParallelCluster's own pattern
# for it (pcluster/schemas/cluster_schema.py): arn:<partition>:resource-groups:<region>:<account>:group/<name>.
ResourceGroupArn = Annotated[str, StringConstraints(
    pattern=r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]{1,128}$")]
UltraServerType = Literal["u-p6e-gb200x36", "u-p6e-gb200x72", "u-trn2x64"]


class Capacity(_Strict):
    type: CapacityType = "on-demand"
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


class Iam(_Strict):
    additional_policies: list[PolicyArn] = Field(
        default_factory=list, max_length=10,
        description="Managed IAM policies (ARNs) attached to the nodes' role, e.g. "
        "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess for data or AmazonEC2ContainerRegistryReadOnly for "
        "images. ParallelCluster: Iam.AdditionalIamPolicies of the head node and every queue; pcs: attached to "
        "fmcluster's node role (detached, never deleted, by destroy).")


class QueueIam(_Strict):
    additional_policies: list[PolicyArn] = Field(
        default_factory=list, max_length=10,
        description="ParallelCluster only: managed policies for this queue's nodes alone, besides iam."
        "additional_policies (SlurmQueues[].Iam.AdditionalIamPolicies). Refused on pcs, where every node group "
        "shares fmcluster's one node role.")


class Queue(_Strict):
    name: str = Field(description="Slurm partition name.")
    instance_type: QueueInstanceType = Field(
        description="EC2 instance type of the queue's nodes, or a list of types the backend may launch "
        "interchangeably (ParallelCluster compute resource Instances, PCS instanceConfigs): they must have the "
        "same vCPUs, accelerators and EFA layout, and not be a reservation or Capacity Block (those hold one "
        "type). plan and cost use the most expensive of the list.")
    subnet_id: SubnetId | None = Field(
        None, description="This queue's own subnet (another AZ, or a private subnet for multi-interface nodes), "
        "in the VPC of network.subnet_id. Default: network.subnet_id.")
    # strict: a quoted '4' or a bare true is a mistake, not a node count.
    nodes: Annotated[int, Field(strict=True, ge=1, le=2048)] | NodeRange = Field(
        description="Static node count (an integer), or {min, max} for a queue that scales with jobs."
    )
    capacity: Capacity = Field(default_factory=Capacity)
    efa: bool | None = Field(None, description="Default: on wherever the instance type supports EFA.")
    placement_group: Literal["auto"] | bool = Field(
        "auto", description="auto: on for on-demand and spot; off for ODCRs and Capacity Blocks (AWS places those)."
    )
    gpu_health_checks: bool = True
    iam: QueueIam | None = Field(None, description="IAM for this queue's nodes (ParallelCluster only).")
    compute_resource: str | None = Field(
        None,
        description="Name of the ParallelCluster compute resource or PCS compute node group. Default: derived "
        "from the instance type (ParallelCluster) or the queue name (PCS).",
    )


class Lustre(_Strict):
    mount: MountPath = "/fsx"
    capacity_gib: int = Field(1200, ge=1200, description="1200, 2400, then steps of 2400 GiB.")
    throughput_per_tib: Literal[125, 250, 500, 1000] = Field(250, description="MB/s per TiB (PERSISTENT_2).")
    deployment_type: Literal["PERSISTENT_2"] = "PERSISTENT_2"
    metadata_iops: Literal["auto"] | int = Field(
        "auto", description="auto, or provisioned metadata IOPS: 1500, 3000, 6000, 12000, then steps of 12000."
    )
    s3_import: S3Url | None = Field(None, description="S3 prefix linked as a data repository (lazy load).")
    s3_export: S3Url | None = None
    existing_id: Annotated[str, StringConstraints(pattern=r"^fs-[0-9a-f]{8,17}$")] | None = Field(
        None, description="Mount an existing file system instead of creating one."
    )


class HomeStorage(_Strict):
    type: Literal["openzfs", "efs"] = "openzfs"
    mount: MountPath = "/home"
    capacity_gib: int = Field(256, ge=64, le=524288, description="OpenZFS only.")


class Storage(_Strict):
    lustre: Lustre | None = None
    home: HomeStorage | None = None


class Software(_Strict):
    containers: bool = Field(True, description="Enroot + Pyxis (and Docker) on compute nodes.")
    monitoring: bool = Field(False, description="DCGM and EFA exporters for Prometheus.")


class SlurmDatabase(_Strict):
    uri: str = Field(description="host:port of the MySQL/MariaDB accounting database.")
    user: str
    password_secret_arn: Annotated[str, StringConstraints(pattern=r"^arn:aws[a-z-]*:secretsmanager:.+")]


class Slurm(_Strict):
    version: SlurmVersion = Field(
        "26.05", description="PCS only: the newest version botocore's PCS model and the PCS user guide support. "
        "24.11 and 25.05 are past AWS's end of life.")
    accounting: bool = False
    database: SlurmDatabase | None = Field(None, description="ParallelCluster only: needed when accounting is on.")
    scaledown_idle_minutes: int = Field(10, ge=1, le=1440)


class Pcs(_Strict):
    size: PcsSize = Field(
        "auto", description="Controller size, fixed at creation: SMALL ≤32 nodes, MEDIUM ≤512, LARGE ≤2048."
    )


class Workload(_Strict):
    model_params_b: float = Field(gt=0, le=100_000, description="Model size in billions of parameters.")
    checkpoint_every_min: float = Field(30, gt=0, le=10_080)
    tokens_per_second: float | None = Field(None, gt=0)
    sequence_length: int | None = Field(None, gt=0)


class Spec(_Strict):
    name: str = Field(description="Cluster name, unique per region.")
    region: RegionName = "us-east-1"
    backend: Backend = "parallelcluster"
    network: Network = Field(default_factory=Network)
    head_node: HeadNode = Field(default_factory=HeadNode)
    os: OperatingSystem | None = Field(
        None, description="Node OS. Default: ubuntu2204 on ParallelCluster; on PCS without image.ami, the OS of AWS's "
        "PCS sample AMIs, alinux2023 (the only one they come in).")
    image: Image | None = None
    queues: list[Queue] = Field(min_length=1)
    storage: Storage = Field(default_factory=Storage)
    software: Software = Field(default_factory=Software)
    slurm: Slurm = Field(default_factory=Slurm)
    pcs: Pcs = Field(default_factory=Pcs)
    iam: Iam = Field(default_factory=Iam, description="IAM for every node of the cluster.")
    workload: Workload | None = None
    tags: dict[str, str] = Field(default_factory=dict)


def min_nodes(queue: Queue) -> int:
    return queue.nodes if isinstance(queue.nodes, int) else queue.nodes.min


def max_nodes(queue: Queue) -> int:
    return queue.nodes if isinstance(queue.nodes, int) else queue.nodes.max
