"""One cluster's stored objects, with the metadata the API server owns ("Object Names and IDs", "Kubernetes API
Concepts": resourceVersion; "Kubernetes Object Management").

Every write gets a new cluster-wide ``resourceVersion`` (a string clients must treat as opaque); creation sets
``uid``, ``creationTimestamp`` and ``generation`` 1; an update that changes anything outside ``metadata`` and
``status`` increments ``generation``.
"""

from __future__ import annotations

import copy
import datetime as _dt
import uuid
from dataclasses import dataclass, field
from typing import Any

from fmcluster_sandbox.kube.resources import INITIAL_NAMESPACES, ResourceType, from_crd

Key = tuple[str, str, str, str]  # (group, plural, namespace or "", name)


@dataclass
class ClusterStore:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    custom_types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)  # (group, version, plural)
    revision: int = 0
    kubernetes_version: str = ""  # the cluster's, set by the API on each request (the built-in types depend on it)

    def __post_init__(self) -> None:
        for name in INITIAL_NAMESPACES:
            self.put(("", "namespaces", "", name), {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}, new=True)

    def next_revision(self) -> str:
        self.revision += 1
        return str(self.revision)

    def put(self, key: Key, obj: dict[str, Any], new: bool) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        if new:
            meta["uid"] = meta.get("uid") or str(uuid.uuid4())
            meta["creationTimestamp"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            meta["generation"] = 1
        meta["resourceVersion"] = self.next_revision()
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def get(self, key: Key) -> dict[str, Any] | None:
        obj = self.objects.get(key)
        return copy.deepcopy(obj) if obj is not None else None

    def items(self, group: str, plural: str, namespace: str | None) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for (g, p, ns, _), o in sorted(self.objects.items())
                if g == group and p == plural and (namespace is None or ns == namespace)]

    def delete(self, key: Key) -> dict[str, Any] | None:
        return self.objects.pop(key, None)

    def delete_namespace_contents(self, namespace: str) -> None:
        for key in [k for k in self.objects if k[2] == namespace]:
            del self.objects[key]

    # -- CRDs --------------------------------------------------------------------------------------
    def install_crd(self, crd: dict[str, Any]) -> None:
        self.remove_crd_types(crd["metadata"]["name"])
        for rtype in from_crd(crd):
            self.custom_types[(rtype.group, rtype.version, rtype.plural)] = rtype

    def remove_crd_types(self, crd_name: str) -> None:
        for key in [k for k, t in self.custom_types.items() if t.crd == crd_name]:
            del self.custom_types[key]

    def delete_custom_resources(self, group: str, plural: str) -> None:
        for key in [k for k in self.objects if k[0] == group and k[1] == plural]:
            del self.objects[key]
