"""The Kubernetes versions Amazon EKS offers, as the EKS User Guide lists them: "Review release notes for
Kubernetes versions on standard support" (1.36, 1.35, 1.34) and "Review release notes for Kubernetes versions
on extended support" (1.33, 1.32). Which of them is on standard or extended support, and which EKS no longer creates
clusters at, follows today's date and the release calendar of "Understand the Kubernetes version lifecycle on EKS"
("You can create new Amazon EKS clusters on any version offered in standard or extended support"; "On the end of
extended support date, you can no longer create new Amazon EKS clusters with the unsupported version"): 1.34's
standard support ended on December 2, 2026. A cluster on extended support pays $0.60 an hour for its control plane
instead of $0.10 (Amazon EKS pricing)."""

from __future__ import annotations

import datetime as dt

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
# that every fmcluster node boots (fmcluster/backends/eks/nodes/images.py). EKS User Guide, "Create nodes with optimized
# Amazon Linux AMIs": "Kubernetes version 1.32 is the last version for which Amazon EKS will release AL2 AMIs. From
# version 1.33 onwards, Amazon EKS will continue to release AL2023 and Bottlerocket based AMIs"; the accelerated
# AL2023 variants have been published for every supported version since October 2024 ("Amazon EKS optimized Amazon
# Linux 2023 accelerated AMIs now available", AWS Containers blog), and the amazon-eks-ami releases
# (github.com/awslabs/amazon-eks-ami/releases) list AL2023 builds for 1.32 and 1.33 beside 1.34 to 1.36. A version
# outside this list has no image under /aws/service/eks/optimized-ami/<version>/amazon-linux-2023/.
AL2023_NODE_IMAGES: tuple[str, ...] = ("1.32", "1.33", "1.34", "1.35", "1.36")

# The versions the two release-notes pages list; which support each is on today follows RELEASE_CALENDAR.
KNOWN: tuple[str, ...] = (*EXTENDED_SUPPORT, *STANDARD_SUPPORT)
# version -> (end of standard support, end of extended support), UTC dates from the release calendar; None where the
# calendar gives no date yet.
RELEASE_CALENDAR: dict[str, tuple[dt.date | None, dt.date | None]] = {
    "1.32": (dt.date(2026, 3, 23), dt.date(2027, 3, 23)),
    "1.33": (dt.date(2026, 7, 29), dt.date(2027, 7, 29)),
    "1.34": (dt.date(2026, 12, 2), dt.date(2027, 12, 2)),
    "1.35": (None, None),
    "1.36": (None, None),
}


def usable(version: str) -> bool:
    """Whether EKS offers ``version`` and AWS publishes the AL2023 node images for it."""
    return support(version) is not None and version in AL2023_NODE_IMAGES


def support(version: str, today: dt.date | None = None) -> str | None:
    """"standard", "extended", or None for a version EKS does not offer (or no longer creates clusters at) on
    ``today`` (default: today, UTC)."""
    if version not in KNOWN:
        return None
    today = today or dt.datetime.now(dt.timezone.utc).date()
    end_standard, end_extended = RELEASE_CALENDAR[version]
    if end_extended is not None and today >= end_extended:
        return None
    return "extended" if end_standard is not None and today >= end_standard else "standard"


def offered(today: dt.date | None = None) -> tuple[str, ...]:
    """The versions EKS creates clusters at on ``today``, oldest first."""
    return tuple(v for v in KNOWN if support(v, today) is not None)


def control_plane_usd_per_hour(version: str) -> float:
    return CONTROL_PLANE_USD_PER_HOUR[support(version) or "standard"]
