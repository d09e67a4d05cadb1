"""Kubernetes versions as EKS moves a cluster between them: one minor version at a time, never down."""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.resources import CLUSTER_VERSION_PAGE
from fmcluster.engine import AttributeChange


def minor(version: str) -> int:
    """The minor number of a Kubernetes version ("1.35" → 35)."""
    return int(str(version).split(".")[1])


def versions_between(current: str, wanted: str) -> list[str]:
    """Each minor version from the one after ``current`` up to ``wanted``: the way EKS takes a cluster."""
    major = str(wanted).split(".")[0]
    return [f"{major}.{m}" for m in range(minor(current) + 1, minor(wanted) + 1)]


def upgrade_note(old: Any, new: Any) -> str:
    """What a Kubernetes version change does, for the plan (CLUSTER_VERSION_PAGE)."""
    if not isinstance(old, str) or not isinstance(new, str) or "." not in old or "." not in new:
        return ""
    if minor(new) < minor(old):
        return f"EKS cannot downgrade a cluster ({CLUSTER_VERSION_PAGE})"
    steps = versions_between(old, new)
    return ("one minor version at a time: " + " → ".join([old, *steps]) + "; control plane, then node groups, "
            "then add-ons, at each") if len(steps) > 1 else ""


def describe_version_change(changes: list[AttributeChange]) -> str:
    return ", ".join(f"{'Kubernetes' if c.path == 'version' else 'launch template version'} {c.old} → {c.new}"
                     for c in changes)
