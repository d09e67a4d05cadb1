"""The spec's value types: the names it accepts (backends, schedulers, capacity types, versions), the shapes of
AWS ids and paths it checks, and the strict base every spec section is built on."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints

Backend = Literal["parallelcluster", "pcs", "eks"]
KubernetesScheduler = Literal["kueue", "volcano", "kai"]
CapacityType = Literal["on-demand", "spot", "reservation", "capacity-block"]
OperatingSystem = Literal["ubuntu2204", "ubuntu2404", "alinux2023", "rhel9", "rocky9"]
SlurmVersion = Literal["24.11", "25.05", "25.11", "26.05"]
PcsSize = Literal["auto", "SMALL", "MEDIUM", "LARGE"]

# The shape only; which regions exist is botocore's partition data (fmcluster.connection.regions, checked in rules).
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
# ParallelCluster's own patterns (pcluster/schemas/cluster_schema.py, pcluster/constants.py): an FSx file system
# is fs- and 17 hex digits, an FSx volume fsvol- and 17, an EFS file system fs- and 8 or 17.
FsxFileSystemId = Annotated[str, StringConstraints(pattern=r"^fs-[0-9a-f]{17}$")]
HomeStorageId = Annotated[str, StringConstraints(pattern=r"^(fsvol-[0-9a-f]{17}|fs-[0-9a-f]{8}|fs-[0-9a-f]{17})$")]


# Every spec section: an unknown key is a mistake, and a loaded spec never changes.
class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
