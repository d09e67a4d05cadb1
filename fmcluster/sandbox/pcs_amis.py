"""AWS's PCS sample AMIs (Slurm and the PCS agent preinstalled), which a new account can find with
DescribeImages. moto knows none, so the sandbox seeds one per OS, architecture and Slurm version."""

from __future__ import annotations

import datetime
import hashlib

OSES = ("ubuntu2204", "ubuntu2404", "alinux2023", "rhel9", "rocky9")
ARCHITECTURES = ("x86_64", "arm64")
SLURM_VERSIONS = ("24.11", "25.05", "25.11")
OWNER_ID = "amazon"


def sample_ami_name(os_name: str, arch: str, slurm: str) -> str:
    return f"aws-pcs-sample_ami-{os_name}-{arch}-slurm-{slurm}-20260101"


def seed(ami_backend) -> None:
    from moto.ec2.models.amis import Ami

    created = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    for os_name in OSES:
        for arch in ARCHITECTURES:
            for slurm in SLURM_VERSIONS:
                name = sample_ami_name(os_name, arch, slurm)
                ami_id = "ami-" + hashlib.sha256(name.encode()).hexdigest()[:17]
                if ami_id in ami_backend.amis:
                    continue
                ami_backend.amis[ami_id] = Ami(
                    ami_backend, ami_id, name=name, description=f"AWS PCS sample AMI ({os_name}, Slurm {slurm})",
                    owner_id=OWNER_ID, owner_alias="amazon", public=True, virtualization_type="hvm",
                    architecture=arch, creation_date=created, hypervisor="xen", root_device_type="ebs",
                    root_device_name="/dev/sda1", region_name=f"{ami_backend.region_name}a")


def install() -> None:
    """Seed every EC2 backend moto creates (moto builds them lazily, per account and region)."""
    from fmcluster.sandbox.ami_seeding import add_seeder

    add_seeder(seed)
