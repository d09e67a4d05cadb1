"""The engine key of a Kubernetes object, and back: pure, so rendering needs no Kubernetes client.

A resource's key must hold no ``.`` (references split on it: ``${kube_object.<key>.uid}``) and must say which
object it is even without a manifest (``destroy`` from a state record). It is the object's kind, name, API group
(``core`` for the core group), version and, for a namespaced object, namespace, joined by ``__``, with every ``.``
written as ``_`` — Kubernetes names, namespaces and groups hold no ``_``, so this reads back unambiguously:
``ConfigMap__settings__core__v1__team``,
``CustomResourceDefinition__resourceflavors_kueue_x-k8s_io__apiextensions_k8s_io__v1``.
"""

from __future__ import annotations

from typing import Any

_SEPARATOR = "__"
_CORE = "core"


def object_key(manifest: dict[str, Any]) -> str:
    """The engine key of the object ``manifest`` describes."""
    group, _, version = manifest["apiVersion"].rpartition("/")
    meta = manifest.get("metadata") or {}
    fields = [manifest["kind"], meta["name"], group or _CORE, version]
    if meta.get("namespace"):
        fields.append(meta["namespace"])
    for value in fields:
        if "_" in value or not value:
            raise ValueError(f"{manifest['kind']} {meta.get('name')!r}: {value!r} cannot be part of a key "
                             "(Kubernetes names hold no '_')")
    return _SEPARATOR.join(value.replace(".", "_") for value in fields)


def manifest_of_key(key: str) -> dict[str, Any]:
    """apiVersion, kind and metadata (name, namespace) of the object ``key`` names: :func:`object_key` reversed."""
    fields = [value.replace("_", ".") for value in key.split(_SEPARATOR)]
    if len(fields) not in (4, 5):
        raise ValueError(f"{key!r} is not a Kubernetes object key")
    kind, name, group, version = fields[:4]
    meta = {"name": name} | ({"namespace": fields[4]} if len(fields) == 5 else {})
    return {"apiVersion": version if group == _CORE else f"{group}/{version}", "kind": kind, "metadata": meta}
