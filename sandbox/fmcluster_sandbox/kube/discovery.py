"""Discovery documents ("Kubernetes API Concepts", "Discovery API"): the resource types a cluster serves (built-in
ones and those its established CRDs add) and the API groups with their preferred versions."""

from __future__ import annotations

import re
from typing import Any

from fmcluster_sandbox.kube.resources import BUILTIN, ResourceType, dra_types
from fmcluster_sandbox.kube.store import ClusterStore


def version_key(version: str) -> tuple[int, int, int]:
    """Kubernetes version priority ("Versions in CustomResourceDefinitions"): GA before beta before alpha,
    higher numbers first."""
    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", version)
    if not m:
        return (3, 0, 0)
    stage = {None: 0, "beta": 1, "alpha": 2}[m[2]]
    return (stage, -int(m[1]), -int(m[3] or 0))


def all_types(store: ClusterStore) -> list[ResourceType]:
    return list(BUILTIN) + dra_types(store.kubernetes_version) + list(store.custom_types.values())


def types(store: ClusterStore, group: str, version: str) -> dict[str, ResourceType]:
    """The resource types of one group version, by plural name."""
    return {t.plural: t for t in all_types(store) if t.group == group and t.version == version}


def groups(store: ClusterStore) -> list[dict[str, Any]]:
    """APIGroup entries for ``/apis``: every named group, versions by Kubernetes version priority."""
    by_group: dict[str, list[str]] = {}
    for t in all_types(store):
        if t.group and t.version not in by_group.setdefault(t.group, []):
            by_group[t.group].append(t.version)
    out = []
    for group, versions in by_group.items():
        ordered = sorted(versions, key=version_key)
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in ordered]
        out.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return out
