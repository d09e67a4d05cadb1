"""The machine image a PCS cluster's nodes boot: the spec's own AMI, or AWS's PCS sample AMI.

One job: for each CPU architecture the spec's instance types need, find the image, with its architecture
and root device name (``DescribeImages``), which the launch templates' root volume mapping must name.

PCS has no default image. Without ``image.ami`` the nodes use AWS's sample AMIs, found as the PCS user
guide says ("Using sample Amazon Machine Images (AMIs) with AWS PCS"): owner ``amazon``, name
``aws-pcs-sample_ami-al2023-{x86_64|arm64}…`` — from Slurm 26.05 one image whose description lists the
Slurm versions it supports ("Slurm: 25.05, 25.11, 26.05."), before that one image per version named
``…-slurm-{version}…`` (``amzn2`` up to 25.05) — the newest that supports the spec's Slurm version. AWS
says sample AMIs "are for demonstration purposes and are not recommended for production workloads";
fmcluster says so whenever it uses one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fmcluster.errors import AwsError, UsageError
from fmcluster.render.common import architecture
from fmcluster.spec.models import Spec

SAMPLE_PREFIXES = ("aws-pcs-sample_ami-al2023-", "aws-pcs-sample_ami-amzn2-")
SAMPLE_CAUTION = ("AWS PCS sample AMIs are for demonstration purposes and are not recommended for production "
                  "workloads (AWS PCS user guide); set image.ami to your own AMI for real work")


@dataclass(frozen=True)
class Image:
    ami_id: str
    name: str
    architecture: str
    root_device_name: str
    sample: bool


def architectures(spec: Spec) -> set[str]:
    return {architecture(t) for t in [spec.head_node.instance_type, *(q.instance_type for q in spec.queues)]}


def find_images(spec: Spec, ec2: Any, warn: Callable[[str], None] | None = None) -> dict[str, Image]:
    """The image per architecture the spec needs; ``warn`` hears AWS's caution when sample AMIs are used."""
    from botocore.exceptions import ClientError

    needed = sorted(architectures(spec))
    try:
        if spec.image is not None and spec.image.ami is not None:
            return _own_image(spec, ec2, needed)
        found = {arch: _sample_image(spec, ec2, arch) for arch in needed}
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise AwsError("ec2 DescribeImages", error.get("Code", "Unknown"), error.get("Message", str(exc)),
                       "check the region and the credentials' ec2:DescribeImages permission") from None
    if warn is not None:
        warn(f"{SAMPLE_CAUTION}: " + ", ".join(f"{i.name} ({i.ami_id})" for i in found.values()))
    return found


def _own_image(spec: Spec, ec2: Any, needed: list[str]) -> dict[str, Image]:
    ami = spec.image.ami
    images = ec2.describe_images(ImageIds=[ami])["Images"]
    if not images:
        raise UsageError(f"image.ami {ami} does not exist in {spec.region}")
    image = _image(images[0], sample=False)
    other = [arch for arch in needed if arch != image.architecture]
    if other:
        raise UsageError(f"image.ami {ami} is {image.architecture}, but the spec's instance types also need "
                         f"{', '.join(other)}: one AMI cannot boot both")
    return {image.architecture: image}


def supports(image: dict[str, Any], slurm_version: str) -> bool:
    """Whether a sample AMI carries ``slurm_version``: by its name before 26.05, its description after."""
    if f"-slurm-{slurm_version}" in image.get("Name", ""):
        return True
    listed = re.search(r"Slurm:\s*([0-9., ]+)", image.get("Description") or "")
    return bool(listed) and slurm_version in {v.strip() for v in listed.group(1).strip(" .").split(",")}


def _sample_image(spec: Spec, ec2: Any, arch: str) -> Image:
    names = [f"{prefix}{arch}*" for prefix in SAMPLE_PREFIXES]
    pages = ec2.get_paginator("describe_images").paginate(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": names}, {"Name": "state", "Values": ["available"]}])
    images = [image for page in pages for image in page["Images"] if supports(image, spec.slurm.version)]
    if not images:
        raise UsageError(f"no AWS PCS sample AMI for {arch} supports Slurm {spec.slurm.version} in {spec.region} "
                         f"(searched {', '.join(names)}): set image.ami to an AMI with the PCS agent and Slurm "
                         f"{spec.slurm.version} installed")
    return _image(max(images, key=lambda image: image.get("CreationDate", "")), sample=True)


def _image(described: dict[str, Any], sample: bool) -> Image:
    if not described.get("RootDeviceName"):
        raise UsageError(f"AMI {described['ImageId']} has no root device name: PCS nodes boot EBS-backed AMIs")
    return Image(described["ImageId"], described.get("Name", ""), described.get("Architecture", "x86_64"),
                 described["RootDeviceName"], sample)
