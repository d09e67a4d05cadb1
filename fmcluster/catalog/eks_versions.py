"""The Kubernetes versions Amazon EKS offers, as the EKS User Guide lists them: "Review release notes for
Kubernetes versions on standard support" (1.36, 1.35, 1.34) and "Review release notes for Kubernetes versions
on extended support" (1.33, 1.32). A cluster on extended support pays $0.60 an hour for its control plane
instead of $0.10 (Amazon EKS pricing)."""

from __future__ import annotations

STANDARD_SUPPORT: tuple[str, ...] = ("1.34", "1.35", "1.36")
EXTENDED_SUPPORT: tuple[str, ...] = ("1.32", "1.33")
# The newest standard-support version fmcluster knows: what a spec without kubernetes.version gets.
DEFAULT_VERSION = STANDARD_SUPPORT[-1]
# Amazon EKS pricing (aws.amazon.com/eks/pricing), as the AWS Containers blog "Amazon EKS extended support for
# Kubernetes versions pricing" states it: "$0.60 per cluster per hour" in extended support, "$0.10 per cluster per
# hour" in standard support.
CONTROL_PLANE_USD_PER_HOUR = {"standard": 0.10, "extended": 0.60}
PRICING_NOTE = ("$0.10 per cluster-hour on standard support, $0.60 on extended (Amazon EKS pricing, "
                "aws.amazon.com/eks/pricing)")


# The versions for which AWS publishes the EKS-optimized Amazon Linux 2023 node images (standard, NVIDIA and Neuron)
# that every fmcluster node boots (fmcluster/backends/eks/node_images.py). EKS User Guide, "Create nodes with optimized
# Amazon Linux AMIs": "Kubernetes version 1.32 is the last version for which Amazon EKS will release AL2 AMIs. From
# version 1.33 onwards, Amazon EKS will continue to release AL2023 and Bottlerocket based AMIs"; the accelerated
# AL2023 variants have been published for every supported version since October 2024 ("Amazon EKS optimized Amazon
# Linux 2023 accelerated AMIs now available", AWS Containers blog), and the amazon-eks-ami releases
# (github.com/awslabs/amazon-eks-ami/releases) list AL2023 builds for 1.32 and 1.33 beside 1.34 to 1.36. A version
# outside this list has no image under /aws/service/eks/optimized-ami/<version>/amazon-linux-2023/.
AL2023_NODE_IMAGES: tuple[str, ...] = ("1.32", "1.33", "1.34", "1.35", "1.36")


def usable(version: str) -> bool:
    """Whether EKS offers ``version`` and AWS publishes the AL2023 node images for it."""
    return support(version) is not None and version in AL2023_NODE_IMAGES


def support(version: str) -> str | None:
    """"standard", "extended", or None for a version EKS does not offer."""
    if version in STANDARD_SUPPORT:
        return "standard"
    return "extended" if version in EXTENDED_SUPPORT else None


def control_plane_usd_per_hour(version: str) -> float:
    return CONTROL_PLANE_USD_PER_HOUR[support(version) or "standard"]
