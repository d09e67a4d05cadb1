"""Shared storage documents for the backends fmcluster drives through boto3 (PCS, EKS): FSx for Lustre and the
look-up that reads an existing file system's DNS and mount names from AWS at create time, so nothing about it is
hard-coded. A backend's own storage (PCS's /home) is in its folder, the OpenZFS facts both Slurm backends share in
:mod:`fmcluster.backends.slurm.openzfs`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fmcluster.spec.models import Spec

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


def mount_lines(mounts: list[dict[str, Any]]) -> list[str]:
    return [f"mount_storage {m['kind']} {m['server']} {m['path']} {m['mount']}" for m in mounts]
