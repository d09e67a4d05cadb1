"""Shared storage documents for the PCS backend, and existing storage on both: what fmcluster creates (FSx for
Lustre is in :mod:`fmcluster.render.pcs`; here an FSx for OpenZFS or EFS /home) and the look-ups that read
existing file systems' DNS and mount names from AWS at create time, so nothing about them is hard-coded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fmcluster.render.parallelcluster import (
    OPENZFS_DEPLOYMENT_TYPE,
    OPENZFS_NFS_EXPORT_OPTIONS,
    openzfs_throughput_mbps,
)
from fmcluster.spec.models import Spec

# An FSx for OpenZFS root volume is exported at /fsx (FSx for OpenZFS guide, "Mounting volumes").
OPENZFS_ROOT_VOLUME_PATH = "/fsx"

AddDocument = Callable[..., None]


def existing_lustre(add: AddDocument, spec: Spec) -> dict[str, str]:
    """A look-up of the existing Lustre file system; returns its mount for the user data."""
    lustre = spec.storage.lustre
    assert lustre is not None and lustre.existing_id is not None
    add("existing-fsx-lustre.yaml", "existing_fsx_lustre", "lustre", "fsx", {"": "DescribeFileSystems"},
        "storage/existing_file_system.yaml.j2", ids_member="FileSystemIds", ident=lustre.existing_id,
        what=f"existing FSx for Lustre {lustre.existing_id}: DNS name and mount name")
    return {"kind": "lustre", "server": "${existing_fsx_lustre.lustre.dns_name}",
            "path": "${existing_fsx_lustre.lustre.mount_name}", "mount": lustre.mount}


def pcs_home(add: AddDocument, spec: Spec, subnet: str) -> dict[str, str] | None:
    """The /home documents of a PCS cluster; returns its mount for the user data."""
    home = spec.storage.home
    if home is None:
        return None
    if home.existing_id and home.type == "openzfs":
        add("existing-fsx-volume.yaml", "existing_fsx_volume", "home", "fsx", {"": "DescribeVolumes"},
            "storage/existing_file_system.yaml.j2", ids_member="VolumeIds", ident=home.existing_id,
            what=f"existing FSx for OpenZFS volume {home.existing_id}: its file system's DNS name and its path")
        return {"kind": "nfs", "server": "${existing_fsx_volume.home.dns_name}",
                "path": "${existing_fsx_volume.home.volume_path}", "mount": home.mount}
    if home.existing_id:
        add("existing-efs.yaml", "existing_efs", "home", "efs", {"": "DescribeFileSystems"},
            "storage/existing_efs.yaml.j2", ident=home.existing_id)
        return {"kind": "nfs", "server": "${existing_efs.home.dns_name}", "path": "/", "mount": home.mount}
    if home.type == "openzfs":
        # The nodes reach it through the cluster's self-referencing security group (NFS included).
        add("fsx-openzfs.yaml", "fsx_openzfs", "home", "fsx", {"": "CreateFileSystem"},
            "parallelcluster/fsx_openzfs.yaml.j2", deployment_type=OPENZFS_DEPLOYMENT_TYPE, mount=home.mount,
            capacity_gib=home.capacity_gib, throughput_mbps=openzfs_throughput_mbps(spec), backup_retention_days=7,
            subnet_id=subnet, nfs_exports=[{"clients": "*", "options": OPENZFS_NFS_EXPORT_OPTIONS}],
            security_group="${security_group.cluster.id}")
        return {"kind": "nfs", "server": "${fsx_openzfs.home.dns_name}", "path": OPENZFS_ROOT_VOLUME_PATH + "/",
                "mount": home.mount}
    add("efs.yaml", "efs", "home", "efs", {"create": "CreateFileSystem", "mount_target": "CreateMountTarget"},
        "storage/efs.yaml.j2", subnet_id=subnet, name=f"{spec.name}-home")
    return {"kind": "nfs", "server": "${efs.home.dns_name}", "path": "/", "mount": home.mount}


def mount_lines(mounts: list[dict[str, Any]]) -> list[str]:
    return [f"mount_storage {m['kind']} {m['server']} {m['path']} {m['mount']}" for m in mounts]
