"""Shared storage documents for the backends fmcluster drives through boto3 (PCS, EKS): FSx for Lustre, an FSx
for OpenZFS or EFS /home, and the look-ups that read existing file systems' DNS and mount names from AWS at create
time, so nothing about them is hard-coded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fmcluster.spec.models import Spec, max_nodes

# ParallelCluster cannot create an OpenZFS file system, only mount a volume; fmcluster creates it first and
# fills this reference with its root volume's id at create time (``validate`` uses a stand-in offline).
OPENZFS_ROOT_VOLUME = "${fsx_openzfs.home.root_volume_id}"
# SINGLE_AZ_2: the current single-AZ generation (160-10240 MB/s, NVMe read cache), in the compute subnet's AZ.
OPENZFS_DEPLOYMENT_TYPE = "SINGLE_AZ_2"
# What AWS accepts for SINGLE_AZ_2 / MULTI_AZ_1 (botocore's CreateFileSystemOpenZFSConfiguration docs).
OPENZFS_THROUGHPUT_STEPS = (160, 320, 640, 1280, 2560, 3840, 5120, 7680, 10240)
# NFS ports an OpenZFS client needs (FSx OpenZFS guide, "Managing file system access"; ParallelCluster's FSX_PORTS).
OPENZFS_NFS_PORT_RANGES = ((111, 111), (2049, 2049), (20001, 20003))
OPENZFS_NFS_EXPORT_OPTIONS = ["rw", "crossmnt", "no_root_squash"]


def openzfs_throughput_mbps(spec: Spec) -> int:
    """/home holds code, environments and small files (checkpoints go to Lustre): the smallest step serves a
    small cluster; many nodes starting jobs at once (imports, venvs) get the next."""
    nodes = sum(max_nodes(queue) for queue in spec.queues)
    return OPENZFS_THROUGHPUT_STEPS[0] if nodes < 32 else OPENZFS_THROUGHPUT_STEPS[1]

# An FSx for OpenZFS root volume is exported at /fsx (FSx for OpenZFS guide, "Mounting volumes").
OPENZFS_ROOT_VOLUME_PATH = "/fsx"

AddDocument = Callable[..., None]


def lustre(add: AddDocument, spec: Spec, subnet: str) -> dict[str, str] | None:
    """The Lustre documents: the file system in ``subnet`` with its S3 data repositories, or a look-up of the
    existing one. Returns its mount (server, path, mount point), or None without Lustre."""
    lustre = spec.storage.lustre
    if lustre is None:
        return None
    if lustre.existing_id is not None:
        return existing_lustre(add, spec)
    add("fsx-lustre.yaml", "fsx_lustre", "lustre", "fsx", {"": "CreateFileSystem"},
        "storage/fsx_lustre.yaml.j2", deployment_type=lustre.deployment_type, capacity_gib=lustre.capacity_gib,
        throughput_per_tib=lustre.throughput_per_tib, subnet_id=subnet,
        metadata_iops=None if lustre.metadata_iops == "auto" else lustre.metadata_iops)
    for index, s3_path in enumerate(p for p in (lustre.s3_import, lustre.s3_export) if p):
        add(f"fsx-data-repository-{index}.yaml", "fsx_data_repository", str(index), "fsx",
            {"": "CreateDataRepositoryAssociation"}, "storage/fsx_data_repository.yaml.j2",
            file_system_path="/data" if index == 0 else "/export", s3_path=s3_path,
            export=s3_path == lustre.s3_export)
    return {"kind": "lustre", "server": "${fsx_lustre.lustre.dns_name}", "path": "${fsx_lustre.lustre.mount_name}",
            "mount": lustre.mount, "id": "${fsx_lustre.lustre.id}"}


def existing_lustre(add: AddDocument, spec: Spec) -> dict[str, str]:
    """A look-up of the existing Lustre file system; returns its mount for the user data."""
    lustre = spec.storage.lustre
    assert lustre is not None and lustre.existing_id is not None
    add("existing-fsx-lustre.yaml", "existing_fsx_lustre", "lustre", "fsx", {"": "DescribeFileSystems"},
        "storage/existing_file_system.yaml.j2", ids_member="FileSystemIds", ident=lustre.existing_id,
        what=f"existing FSx for Lustre {lustre.existing_id}: DNS name and mount name")
    return {"kind": "lustre", "server": "${existing_fsx_lustre.lustre.dns_name}",
            "path": "${existing_fsx_lustre.lustre.mount_name}", "mount": lustre.mount, "id": lustre.existing_id}


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
