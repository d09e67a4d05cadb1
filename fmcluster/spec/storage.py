"""The spec's ``storage`` section: FSx for Lustre for data, and the shared /home (FSx for OpenZFS or EFS)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fmcluster.spec.field_types import FsxFileSystemId, HomeStorageId, MountPath, S3Url, Strict


class Lustre(Strict):
    mount: MountPath = Field("/fsx", description="Where every node mounts the Lustre file system.")
    capacity_gib: int = Field(1200, ge=1200, description="1200, 2400, then steps of 2400 GiB.")
    throughput_per_tib: Literal[125, 250, 500, 1000] = Field(250, description="MB/s per TiB (PERSISTENT_2).")
    deployment_type: Literal["PERSISTENT_2"] = Field(
        "PERSISTENT_2", description="FSx for Lustre deployment type; PERSISTENT_2 only (the current generation).")
    metadata_iops: Literal["auto"] | int = Field(
        "auto", description="auto, or provisioned metadata IOPS: 1500, 3000, 6000, 12000, then steps of 12000."
    )
    s3_import: S3Url | None = Field(None, description="S3 prefix linked as a data repository (lazy load).")
    s3_export: S3Url | None = Field(None, description="S3 prefix that new and changed files are exported to.")
    existing_id: FsxFileSystemId | None = Field(
        None, description="Mount an existing FSx for Lustre file system (fs- and 17 hex digits) instead of creating "
        "one; its DNS name and mount name are read from FSx (DescribeFileSystems). The other fields except mount "
        "are then not used. It is never deleted by fmcluster.")


class HomeStorage(Strict):
    type: Literal["openzfs", "efs"] = Field(
        "openzfs", description="openzfs: FSx for OpenZFS (NFS); efs: Amazon EFS. Created by fmcluster, or existing.")
    mount: MountPath = Field("/home", description="Where every node (head/login and compute) mounts it.")
    capacity_gib: int = Field(256, ge=64, le=524288, description="OpenZFS only: the file system's size when "
                                                                  "fmcluster creates it.")
    existing_id: HomeStorageId | None = Field(
        None, description="Mount existing storage instead of creating it: an FSx for OpenZFS volume (fsvol- and 17 "
        "hex digits) with type openzfs, an EFS file system (fs- and 8 or 17 hex digits) with type efs. It must "
        "accept NFS from the cluster's nodes; fmcluster never deletes it.")


class Storage(Strict):
    lustre: Lustre | None = Field(None, description="FSx for Lustre for data and checkpoints: created, or existing.")
    home: HomeStorage | None = Field(None, description="Shared /home: FSx for OpenZFS or EFS, created or existing.")
