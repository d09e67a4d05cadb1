"""PATCH bodies ("Kubernetes API Concepts", "Patch"): JSON merge patch (RFC 7386), JSON patch (RFC 6902) and
server-side apply.

Strategic merge patch (``application/strategic-merge-patch+json``, kubectl's and the Python client's default for
built-in kinds) is applied as a JSON merge patch: lists are replaced rather than merged by their patch merge key,
and ``$patch``/``$retainKeys`` directives are refused with 400 (not emulated). Server-side apply
(``application/apply-patch+yaml``) needs ``fieldManager``; it creates the object when absent, otherwise merges the
applied configuration into it like a merge patch. Field ownership (``managedFields``), apply conflicts and the
removal of fields a manager stopped applying are not emulated.

Request parameters that apply to some patch types only (:func:`patch_options_causes`, apimachinery
``pkg/apis/meta/v1/validation`` ``ValidatePatchOptions``, checked before the object is looked up): ``force`` "may not be
specified for non-apply patch", ``fieldManager`` "is required for apply patch", and a ``fieldManager`` is at most 128
characters ("Server-Side Apply": field management); a violation is 422 Invalid of kind ``PatchOptions.meta.k8s.io``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from fmcluster_sandbox.kube.status import KubeError, bad_request

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
APPLY_CBOR = "application/apply-patch+cbor"
SUPPORTED = (MERGE, STRATEGIC, JSON_PATCH, APPLY)


FIELD_MANAGER_MAX_LENGTH = 128


def patch_options_causes(content_type: str, query: dict[str, str]) -> list[tuple[str, str, str]]:
    """The PatchOptions causes the API server refuses for a PATCH of ``content_type`` with ``query`` (none: valid)."""
    causes = []
    if content_type != APPLY:
        if "force" in query:
            causes.append(("FieldValueForbidden", "force", "Forbidden: may not be specified for non-apply patch"))
    elif not query.get("fieldManager"):
        causes.append(("FieldValueRequired", "fieldManager", "Required value: is required for apply patch"))
    if len(query.get("fieldManager") or "") > FIELD_MANAGER_MAX_LENGTH:
        causes.append(("FieldValueTooLong", "fieldManager",
                       f"Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"))
    return causes


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _no_directives(patch: Any) -> None:
    if isinstance(patch, dict):
        for key, value in patch.items():
            if key.startswith("$"):
                raise bad_request(f"strategic merge patch directive {key} is not emulated by the sandbox")
            _no_directives(value)
    elif isinstance(patch, list):
        for item in patch:
            _no_directives(item)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    _no_directives(patch)
    return merge_patch(target, patch)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"json patch path {path!r} does not start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    for part in parts[:-1]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    try:
        for op in operations:
            kind, parts = op["op"], _pointer(op["path"])
            if kind in ("move", "copy"):
                source = _pointer(op["from"])
                parent = _parent(doc, source)
                value = copy.deepcopy(parent[int(source[-1])] if isinstance(parent, list) else parent[source[-1]])
                if kind == "move":
                    del parent[int(source[-1]) if isinstance(parent, list) else source[-1]]
                op, kind = {"value": value}, "add"
            if not parts:
                if kind in ("add", "replace"):
                    doc = copy.deepcopy(op["value"])
                    continue
            parent = _parent(doc, parts)
            last = parts[-1]
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if kind == "add":
                    parent.insert(index, copy.deepcopy(op["value"]))
                elif kind == "remove":
                    del parent[index]
                elif kind == "replace":
                    parent[index] = copy.deepcopy(op["value"])
                elif kind == "test" and parent[index] != op["value"]:
                    raise bad_request(f"json patch test failed at {op['path']}")
            else:
                if kind == "add":
                    parent[last] = copy.deepcopy(op["value"])
                elif kind == "remove":
                    del parent[last]
                elif kind == "replace":
                    if last not in parent:
                        raise KeyError(last)
                    parent[last] = copy.deepcopy(op["value"])
                elif kind == "test" and parent.get(last) != op["value"]:
                    raise bad_request(f"json patch test failed at {op['path']}")
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise KubeError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                        f"json patch failed: {exc!r}") from None
    return doc


def parse_body(body: bytes, content_type: str) -> Any:
    try:
        if content_type == APPLY:
            import yaml

            text = body.decode()
            if text.lstrip().startswith("{"):  # JSON is YAML, and the JSON parser reads it ten times faster
                try:
                    return json.loads(text)
                except ValueError:
                    pass  # flow-style YAML that is not JSON
            return yaml.safe_load(text or "null")
        return json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the body of the request could not be decoded: {exc}") from None
