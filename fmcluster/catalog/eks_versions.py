"""The Kubernetes versions Amazon EKS offers, as the EKS User Guide lists them: "Review release notes for
Kubernetes versions on standard support" (1.36, 1.35, 1.34) and "Review release notes for Kubernetes versions
on extended support" (1.33, 1.32). A cluster on extended support pays $0.60 an hour for its control plane
instead of $0.10 (Amazon EKS pricing)."""

from __future__ import annotations

STANDARD_SUPPORT: tuple[str, ...] = ("1.34", "1.35", "1.36")
EXTENDED_SUPPORT: tuple[str, ...] = ("1.32", "1.33")
# The newest standard-support version fmcluster knows: what a spec without kubernetes.version gets.
DEFAULT_VERSION = STANDARD_SUPPORT[-1]
CONTROL_PLANE_USD_PER_HOUR = {"standard": 0.10, "extended": 0.60}


def support(version: str) -> str | None:
    """"standard", "extended", or None for a version EKS does not offer."""
    if version in STANDARD_SUPPORT:
        return "standard"
    return "extended" if version in EXTENDED_SUPPORT else None


def control_plane_usd_per_hour(version: str) -> float:
    return CONTROL_PLANE_USD_PER_HOUR[support(version) or "standard"]
