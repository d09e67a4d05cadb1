"""A PCS cluster's /home: an FSx for OpenZFS file system or an EFS one that fmcluster makes (the nodes mount it
from their user data), or the look-up of an existing one."""

from __future__ import annotations

from fmcluster.backends.slurm.openzfs import (
    OPENZFS_DEPLOYMENT_TYPE,
    OPENZFS_NFS_EXPORT_OPTIONS,
    openzfs_throughput_mbps,
)
from fmcluster.render.storage import AddDocument
from fmcluster.spec.models import Spec

# An FSx for OpenZFS root volume is exported at /fsx (FSx for OpenZFS guide, "Mounting volumes").
OPENZFS_ROOT_VOLUME_PATH = "/fsx"


def home_documents(add: AddDocument, spec: Spec, subnet: str) -> dict[str, str] | None:
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
