"""Labels, annotations and taints written to a Node through the Kubernetes API (PATCH), kept beside the Node the
EKS emulator builds.

The sandbox builds each Node afresh from its instance (:mod:`.nodes`), so what a client writes to it is kept here,
per (account, region, cluster, node name, instance id), and laid over the built Node. Keyed by the instance: a
node replaced by a new instance is a new Node object, and carries none of its predecessor's labels, and the taints
its node group registers it with, not the ones written to its predecessor (Kubernetes "Nodes": a Node object is
registered by the kubelet of its instance, which applies ``--register-with-taints`` "when registering the node"
only, kubelet reference; what is set through the API is on that object only).

What a PATCH may change is the Node's ``metadata.labels`` and ``metadata.annotations`` (one set, changed or
removed: null) and its ``spec.taints`` (the list as a whole: strategic merge patch replaces it, Kubernetes API
reference, NodeSpec ``taints`` has no patch strategy), by merge, strategic merge or JSON patch. A patch that changes
anything else of the Node is refused 422 as not emulated: the sandbox's Nodes are read from their instances, and it
keeps no other field a client writes (``spec.unschedulable``). Label keys and values are checked as the API server
checks them (Kubernetes "Labels and Selectors", "Syntax and character set": a value of at most 63 characters,
beginning and ending with an alphanumeric character, with dashes, underscores, dots and alphanumerics between; a
key's name part the same, with an optional DNS subdomain prefix of at most 253 characters); an annotation's key as a
label key, its values any strings of at most 256 KiB together (Kubernetes "Annotations", "Syntax and character
set"; apimachinery ``ValidateAnnotations``, ``TotalAnnotationSizeLimitB`` 256 * 1024, counting keys and values); a
taint's key as a label key, its value as a label value, its effect one of ``NoSchedule``, ``PreferNoSchedule``,
``NoExecute``, and no two taints with one key and effect (Kubernetes API reference, Taint; kubernetes/kubernetes
``pkg/apis/core/validation`` ``validateNodeTaints``: "taints must be unique by key and effect pair").
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

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_LOCK = threading.Lock()
# (account, region, cluster, node name, instance id, "labels" | "annotations") -> what was written through the API
# (None: removed)
_WRITTEN: dict[tuple[str, str, str, str, str, str], dict[str, str | None]] = {}
_MAPS = ("labels", "annotations")
ANNOTATIONS_MAX_BYTES = 256 * 1024
# the same key -> the taints last written through the API (the whole list)
_TAINTS: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = {}


def reset() -> None:
    with _LOCK:
        _WRITTEN.clear()
        _TAINTS.clear()


def instance_of(node: dict[str, Any]) -> str:
    return ((node.get("spec") or {}).get("providerID") or "").rsplit("/", 1)[-1]


def _key(where: tuple[str, str, str], node: dict[str, Any]) -> tuple[str, str, str, str, str]:
    return (*where, node["metadata"]["name"], instance_of(node))


def overlay(where: tuple[str, str, str], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with the labels, annotations and taints written to it laid over its built ones."""
    with _LOCK:
        written = {part: dict(_WRITTEN.get((*_key(where, node), part), {})) for part in _MAPS}
        taints = copy.deepcopy(_TAINTS.get(_key(where, node)))
    for part in _MAPS:
        kept = dict(node["metadata"].get(part) or {})
        for key, value in written[part].items():
            if value is None:
                kept.pop(key, None)
            else:
                kept[key] = value
        if kept or part == "labels":
            node["metadata"][part] = kept
        else:
            node["metadata"].pop(part, None)
    if taints is not None:
        spec = node.setdefault("spec", {})
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)
    return node


def _bad_key(key: Any) -> bool:
    prefix, _, name = str(key).rpartition("/")
    return not name or len(name) > 63 or not _NAME.fullmatch(name) or bool(prefix and (
        len(prefix) > 253 or not _PREFIX.fullmatch(prefix)))


def _bad_value(value: Any) -> bool:
    return not isinstance(value, str) or len(value) > 63 or not _NAME.fullmatch(value)


def _key_cause(key: Any, field: str) -> tuple[str, str, str]:
    return ("FieldValueInvalid", f"Invalid value: {key!r}: name part must consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character", field)


def _value_cause(value: Any, field: str) -> tuple[str, str, str]:
    return ("FieldValueInvalid", f"Invalid value: {value!r}: a valid label must be an empty string or consist of "
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at "
            "most 63 characters)", field)


def label_problems(labels: Any) -> list[tuple[str, str, str]]:
    """The API server's causes (type, message, field) for labels it would refuse."""
    if not isinstance(labels, dict):
        return [("FieldValueInvalid", "labels must be a map of strings", "metadata.labels")]
    causes = []
    for key, value in labels.items():
        if _bad_key(key):
            causes.append(_key_cause(key, "metadata.labels"))
        if _bad_value(value):
            causes.append(_value_cause(value, f"metadata.labels.{key}"))
    return causes


def annotation_problems(annotations: Any) -> list[tuple[str, str, str]]:
    """The API server's causes for annotations it would refuse."""
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        return [("FieldValueInvalid", "annotations must be a map of strings", "metadata.annotations")]
    causes = [_key_cause(key, "metadata.annotations") for key in annotations if _bad_key(key)]
    size = sum(len(str(k).encode()) + len(v.encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        causes.append(("FieldValueTooLong", f"Too long: must have at most {ANNOTATIONS_MAX_BYTES} bytes",
                       "metadata.annotations"))
    return causes


def taint_problems(taints: Any) -> list[tuple[str, str, str]]:
    """The API server's causes for a Node's taints it would refuse."""
    if not isinstance(taints, list) or not all(isinstance(t, dict) for t in taints):
        return [("FieldValueInvalid", "taints must be a list of objects", "spec.taints")]
    causes: list[tuple[str, str, str]] = []
    seen: set[tuple[Any, Any]] = set()
    for i, taint in enumerate(taints):
        field = f"spec.taints[{i}]"
        if not taint.get("key"):
            causes.append(("FieldValueRequired", "Required value", f"{field}.key"))
        elif _bad_key(taint["key"]):
            causes.append(_key_cause(taint["key"], f"{field}.key"))
        if _bad_value(taint.get("value", "")):
            causes.append(_value_cause(taint.get("value"), f"{field}.value"))
        if taint.get("effect") not in _EFFECTS:
            causes.append(("FieldValueNotSupported", f"Unsupported value: {taint.get('effect')!r}: supported "
                           f"values: {', '.join(repr(e) for e in _EFFECTS)}", f"{field}.effect"))
        if (taint.get("key"), taint.get("effect")) in seen:
            causes.append(("FieldValueDuplicate", f"Duplicate value: {taint.get('key')!r}: taints must be unique by "
                           "key and effect pair", f"{field}"))
        seen.add((taint.get("key"), taint.get("effect")))
    return causes


def write(where: tuple[str, str, str], before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Keep the label, annotation and taint changes between ``before`` (the Node as served) and ``after`` (it
    patched); the causes of a refusal instead, when the patch changes more than those or writes one the API server
    would refuse."""
    strip, plain = copy.deepcopy(after), copy.deepcopy(before)
    maps = {part: (strip.get("metadata") or {}).pop(part, None) or {} for part in _MAPS}
    taints = (strip.get("spec") or {}).pop("taints", None) or []
    for node in (strip, plain):
        for part in (*_MAPS, "resourceVersion"):
            (node.get("metadata") or {}).pop(part, None)
        (node.get("spec") or {}).pop("taints", None)
    if strip != plain:
        return [("FieldValueForbidden", "the sandbox keeps only metadata.labels, metadata.annotations and spec.taints "
                 "of a Node written through the API (its Nodes are read from their instances): other fields are not "
                 "emulated", "")]
    causes = label_problems(maps["labels"]) + annotation_problems(maps["annotations"]) + taint_problems(taints)
    if causes:
        return causes
    changes: dict[str, dict[str, str | None]] = {}
    for part in _MAPS:
        old = before["metadata"].get(part) or {}
        changes[part] = {k: v for k, v in maps[part].items() if old.get(k) != v}
        changes[part].update({k: None for k in old if k not in maps[part]})
    with _LOCK:
        for part in _MAPS:
            _WRITTEN.setdefault((*_key(where, before), part), {}).update(changes[part])
        if taints != ((before.get("spec") or {}).get("taints") or []):
            _TAINTS[_key(where, before)] = copy.deepcopy(taints)
    return []


def patch(where: tuple[str, str, str], node: dict[str, Any], content_type: str, body: Any) -> dict[str, Any]:
    """The Node after a PATCH of ``body`` (its content type as the API server reads it), its label, annotation and
    taint changes kept; KubeError 422 for what :func:`write` refuses, 415 for server-side apply (not emulated for
    Nodes)."""
    if content_type == patches.APPLY:
        raise unsupported_media_type(content_type)
    merged = (patches.json_patch(node, body) if content_type == patches.JSON_PATCH else
              patches.strategic_merge_patch(node, body) if content_type == patches.STRATEGIC else
              patches.merge_patch(node, body))
    causes = write(where, node, merged)
    if causes:
        raise invalid("Node", node["metadata"]["name"], causes)
    return overlay(where, node)
