"""AWS's PCS sample AMIs (Slurm and the PCS agent preinstalled), which a new account finds with
DescribeImages, seeded as the PCS user guide publishes them ("Using sample Amazon Machine Images (AMIs)
with AWS PCS" and "Release notes for AWS PCS sample AMIs"):

* before Slurm 26.05, one AMI per architecture and Slurm version, the version in its name:
  ``aws-pcs-sample_ami-{amzn2|al2023}-{x86_64|arm64}-slurm-{version}`` — Amazon Linux 2 (``amzn2``) up to
  Slurm 25.05, Amazon Linux 2023 (``al2023``) for 25.11;
* from Slurm 26.05, one AMI per architecture, ``aws-pcs-sample_ami-al2023-{x86_64|arm64}``, whose
  description lists the Slurm versions it supports ("for example ``Slurm: 25.05, 25.11, 26.05.``");
* owned by ``amazon`` (``--owners amazon``), EBS-backed (gp2), in the Regions where PCS runs ("AWS
  Parallel Computing Service endpoints and quotas").

What the guide does not publish is not invented: AMI names carry a time stamp ("If there are multiple
AMIs, use the AMI with the most recent time stamp") whose exact format AWS does not document, so the
sandbox appends its creation date; the single-version AMIs' descriptions are not published, so they have
none; the publishing account's id is not published, so OwnerId carries the alias. Root devices are
``/dev/xvda``, the root device name of Amazon Linux AMIs ("Device names for volumes on Amazon EC2
instances", EC2 user guide).
"""

from __future__ import annotations

import datetime
import hashlib

ARCHITECTURES = ("x86_64", "arm64")
# (OS part of the name, Slurm version, release date) for the single-version AMIs in the release notes.
SINGLE_VERSION = (("amzn2", "23.11", "2024-08-28"), ("amzn2", "24.05", "2024-12-18"), ("amzn2", "24.11", "2025-05-14"),
                  ("amzn2", "25.05", "2025-10-16"), ("al2023", "25.11", "2026-02-02"))
# The 26.05 form: the description is the guide's own example.
MULTI_VERSION = (("al2023", "Slurm: 25.05, 25.11, 26.05.", "2026-06-15"),)
ROOT_DEVICE = "/dev/xvda"
OWNER_ALIAS = "amazon"
# "Service endpoints" of AWS PCS in the AWS General Reference.
PCS_REGIONS = frozenset({
    "us-east-1", "us-east-2", "us-west-2", "af-south-1", "ap-southeast-3", "ap-south-1", "ap-northeast-3",
    "ap-northeast-2", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "eu-central-1", "eu-west-1", "eu-west-2",
    "eu-south-1", "eu-west-3", "eu-south-2", "eu-north-1", "sa-east-1", "us-gov-east-1", "us-gov-west-1",
})


def sample_amis() -> list[dict]:
    """Name, description, architecture and creation date of every sample AMI, as one Region holds them."""
    out = []
    for arch in ARCHITECTURES:
        for os_part, version, released in SINGLE_VERSION:
            out.append({"name": f"aws-pcs-sample_ami-{os_part}-{arch}-slurm-{version}-{released}T00-00-00",
                        "description": None, "architecture": arch, "created": released})
        for os_part, description, released in MULTI_VERSION:
            out.append({"name": f"aws-pcs-sample_ami-{os_part}-{arch}-{released}T00-00-00",
                        "description": description, "architecture": arch, "created": released})
    return out


def seed(ami_backend) -> None:
    from moto.ec2.models.amis import Ami

    if ami_backend.region_name not in PCS_REGIONS:
        return
    for image in sample_amis():
        ami_id = "ami-" + hashlib.sha256(f"{ami_backend.region_name}/{image['name']}".encode()).hexdigest()[:17]
        if ami_id in ami_backend.amis:
            continue
        created = datetime.datetime.fromisoformat(image["created"]).replace(tzinfo=datetime.timezone.utc)
        ami_backend.amis[ami_id] = Ami(
            ami_backend, ami_id, name=image["name"], description=image["description"], owner_id=OWNER_ALIAS,
            owner_alias=OWNER_ALIAS, public=True, virtualization_type="hvm", architecture=image["architecture"],
            creation_date=created, hypervisor="xen", root_device_type="ebs", root_device_name=ROOT_DEVICE,
            region_name=f"{ami_backend.region_name}a", image_location=f"amazon/{image['name']}")


def install() -> None:
    """Seed every EC2 backend moto creates (moto builds them lazily, per account and region)."""
    from fmcluster_sandbox.ami_seeding import add_seeder

    add_seeder(seed)
