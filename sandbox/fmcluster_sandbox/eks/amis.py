"""Amazon EKS optimized Amazon Linux 2023 AMIs, and the SSM parameters AWS publishes them under.

"Retrieve recommended Amazon Linux AMI IDs" (EKS User Guide): ``aws ssm get-parameter --name
/aws/service/eks/optimized-ami/<kubernetes-version>/<ami-type>/recommended/image_id`` with the AL2023 types
``amazon-linux-2023/x86_64/standard``, ``amazon-linux-2023/arm64/standard``, ``amazon-linux-2023/x86_64/nvidia``,
``amazon-linux-2023/arm64/nvidia`` and ``amazon-linux-2023/x86_64/neuron``. The sandbox seeds one AMI per
Region, Kubernetes version (:data:`IMAGE_VERSIONS`) and type, owned by ``amazon``, and answers those parameters with
its id; a managed node group without an ``ImageId`` in its launch template launches the AMI of its
``amiType`` (``AL2023_x86_64_NVIDIA`` …) for the cluster's version.

What AWS does not publish in the guide is the sandbox's own: the AMI names follow the form of AWS's
amazon-eks-ami build (``amazon-eks-node-al2023-<arch>-<variant>-<version>-v<date>``) with the sandbox's
date ``v20260101``; only the ``image_id`` sub-parameter is served (not ``image_name`` or ``release_version``);
AL2 and Bottlerocket images are not seeded. Root devices are ``/dev/xvda``.
"""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

from fmcluster_sandbox.eks import catalog

VARIANTS = (("x86_64", "standard"), ("arm64", "standard"), ("x86_64", "nvidia"), ("arm64", "nvidia"),
            ("x86_64", "neuron"))
AMI_TYPES = {"AL2023_x86_64_STANDARD": ("x86_64", "standard"), "AL2023_ARM_64_STANDARD": ("arm64", "standard"),
             "AL2023_x86_64_NVIDIA": ("x86_64", "nvidia"), "AL2023_ARM_64_NVIDIA": ("arm64", "nvidia"),
             "AL2023_x86_64_NEURON": ("x86_64", "neuron")}
# Every version the sandbox serves clusters for, and the two on extended support: AWS publishes AL2023 node images
# for 1.32 and 1.33 too (EKS User Guide, "Create nodes with optimized Amazon Linux AMIs": from 1.33 onwards EKS
# releases AL2023 and Bottlerocket AMIs, 1.32 being the last with AL2 as well; the amazon-eks-ami releases list
# AL2023 builds for both).
IMAGE_VERSIONS = tuple(dict.fromkeys(("1.32", "1.33", *catalog.KUBERNETES_VERSIONS)))
BUILD_DATE = "20260101"  # the sandbox's own build label (AWS's release dates are not in the guide)
PARAMETER_PREFIX = "/aws/service/eks/optimized-ami/"
OWNER_ALIAS = "amazon"


def image_name(kubernetes: str, arch: str, variant: str) -> str:
    return f"amazon-eks-node-al2023-{arch}-{variant}-{kubernetes}-v{BUILD_DATE}"


def image_id(region: str, kubernetes: str, arch: str, variant: str) -> str:
    name = image_name(kubernetes, arch, variant)
    return "ami-" + hashlib.sha256(f"{region}/{name}".encode()).hexdigest()[:17]


def for_ami_type(region: str, kubernetes: str, ami_type: str) -> str | None:
    """The AMI a node group of ``ami_type`` launches, or None for a type the sandbox does not seed."""
    found = AMI_TYPES.get(ami_type)
    if found is None or kubernetes not in IMAGE_VERSIONS:
        return None
    return image_id(region, kubernetes, *found)


def parameters(region: str) -> dict[str, str]:
    return {f"{PARAMETER_PREFIX}{kube}/amazon-linux-2023/{arch}/{variant}/recommended/image_id":
            image_id(region, kube, arch, variant)
            for kube in IMAGE_VERSIONS for arch, variant in VARIANTS}


def seed(ami_backend: Any) -> None:
    from moto.ec2.models.amis import Ami

    region = ami_backend.region_name
    created = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    for kube in IMAGE_VERSIONS:
        for arch, variant in VARIANTS:
            ami_id = image_id(region, kube, arch, variant)
            if ami_id in ami_backend.amis:
                continue
            name = image_name(kube, arch, variant)
            ami_backend.amis[ami_id] = Ami(
                ami_backend, ami_id, name=name,
                description=f"EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: {kube}, {variant})",
                owner_id=OWNER_ALIAS, owner_alias=OWNER_ALIAS, public=True, virtualization_type="hvm",
                architecture=arch, creation_date=created, hypervisor="xen", root_device_type="ebs",
                root_device_name="/dev/xvda", region_name=f"{region}a", image_location=f"amazon/{name}")


_installed = False


def install() -> None:
    """Seed every EC2 backend moto creates, and serve the parameters from moto's SSM (idempotent)."""
    global _installed
    if _installed:
        return
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter, ParameterDict

    from fmcluster_sandbox.ami_seeding import add_seeder

    add_seeder(seed)
    original = ParameterDict._check_loading_status

    def _check_loading_status(self: Any, key: str) -> None:
        original(self, key)
        key = str(key or "")
        if (PARAMETER_PREFIX.startswith(key) or key.startswith(PARAMETER_PREFIX)) and \
                not getattr(self, "_fmcluster_eks_amis", False):
            self._fmcluster_eks_amis = True
            for name, value in parameters(self.region_name).items():
                self.setdefault(name, []).append(Parameter(
                    account_id=self.account_id, name=name, value=value, parameter_type="String",
                    description=None, allowed_pattern=None, keyid=None,
                    last_modified_date=utcnow(), version=1, data_type="aws:ec2:image"))

    ParameterDict._check_loading_status = _check_loading_status
    _installed = True
