"""Labels written to a Node through the Kubernetes API (PATCH), kept beside the Node the EKS emulator builds.

The sandbox builds each Node afresh from its instance (:mod:`.nodes`), so what a client writes to it is kept here,
per (account, region, cluster, node name, instance id), and laid over the built Node. Keyed by the instance: a
node replaced by a new instance is a new Node object, and carries none of its predecessor's labels (Kubernetes
"Nodes": a Node object is registered by the kubelet of its instance; labels set through the API are on that object
only).

What a PATCH may change is the Node's ``metadata.labels`` (merge, strategic merge or JSON patch): a label set, changed
or removed (null). A patch that changes anything else of the Node is refused 422 as not emulated: the sandbox's
Nodes are read from their instances, and it keeps no other field a client writes (``spec.unschedulable``, taints,
annotations). Label keys and values are checked as the API server checks them (Kubernetes "Labels and Selectors",
"Syntax and character set": a value of at most 63 characters, beginning and ending with an alphanumeric character,
with dashes, underscores, dots and alphanumerics between; a key's name part the same, with an optional DNS
subdomain prefix of at most 253 characters).
"""

from __future__ import annotations

import copy
import re
import threading
from typing import Any

from fmcluster_sandbox.kube import patches
from fmcluster_sandbox.kube.status import invalid, unsupported_media_type

_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

_LOCK = threading.Lock()
# (account, region, cluster, node name, instance id) -> the labels written through the API (None: removed)
_WRITTEN: dict[tuple[str, str, str, str, str], dict[str, str | None]] = {}


def reset() -> None:
    with _LOCK:
        _WRITTEN.clear()


def instance_of(node: dict[str, Any]) -> str:
    return ((node.get("spec") or {}).get("providerID") or "").rsplit("/", 1)[-1]


def _key(where: tuple[str, str, str], node: dict[str, Any]) -> tuple[str, str, str, str, str]:
    return (*where, node["metadata"]["name"], instance_of(node))


def overlay(where: tuple[str, str, str], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with the labels written to it laid over its built ones."""
    with _LOCK:
        written = dict(_WRITTEN.get(_key(where, node), {}))
    labels = dict(node["metadata"].get("labels") or {})
    for key, value in written.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    node["metadata"]["labels"] = labels
    return node


def label_problems(labels: Any) -> list[tuple[str, str, str]]:
    """The API server's causes (type, message, field) for labels it would refuse."""
    if not isinstance(labels, dict):
        return [("FieldValueInvalid", "labels must be a map of strings", "metadata.labels")]
    causes = []
    for key, value in labels.items():
        prefix, _, name = str(key).rpartition("/")
        if not name or len(name) > 63 or not _NAME.fullmatch(name) or (prefix and (
                len(prefix) > 253 or not _PREFIX.fullmatch(prefix))):
            causes.append(("FieldValueInvalid", f"Invalid value: {key!r}: name part must consist of alphanumeric "
                           "characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                           "metadata.labels"))
        if not isinstance(value, str) or len(value) > 63 or not _NAME.fullmatch(value):
            causes.append(("FieldValueInvalid", f"Invalid value: {value!r}: a valid label must be an empty string "
                           "or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                           "alphanumeric character (at most 63 characters)", f"metadata.labels.{key}"))
    return causes


def write(where: tuple[str, str, str], before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Keep the label changes between ``before`` (the Node as served) and ``after`` (it patched); the causes of a
    refusal instead, when the patch changes more than labels or sets a label the API server would refuse."""
    strip = copy.deepcopy(after)
    labels = (strip.get("metadata") or {}).pop("labels", None) or {}
    plain = copy.deepcopy(before)
    (plain.get("metadata") or {}).pop("labels", None)
    (strip.get("metadata") or {}).pop("resourceVersion", None)
    (plain.get("metadata") or {}).pop("resourceVersion", None)
    if strip != plain:
        return [("FieldValueForbidden", "the sandbox keeps only metadata.labels of a Node written through the API "
                 "(its Nodes are read from their instances): other fields are not emulated", "")]
    causes = label_problems(labels)
    if causes:
        return causes
    old = before["metadata"].get("labels") or {}
    changes: dict[str, str | None] = {k: v for k, v in labels.items() if old.get(k) != v}
    changes.update({k: None for k in old if k not in labels})
    with _LOCK:
        _WRITTEN.setdefault(_key(where, before), {}).update(changes)
    return []


def patch(where: tuple[str, str, str], node: dict[str, Any], content_type: str, body: Any) -> dict[str, Any]:
    """The Node after a PATCH of ``body`` (its content type as the API server reads it), its label changes kept;
    KubeError 422 for what :func:`write` refuses, 415 for server-side apply (not emulated for Nodes)."""
    if content_type == patches.APPLY:
        raise unsupported_media_type(content_type)
    merged = (patches.json_patch(node, body) if content_type == patches.JSON_PATCH else
              patches.strategic_merge_patch(node, body) if content_type == patches.STRATEGIC else
              patches.merge_patch(node, body))
    causes = write(where, node, merged)
    if causes:
        raise invalid("Node", node["metadata"]["name"], causes)
    return overlay(where, node)
