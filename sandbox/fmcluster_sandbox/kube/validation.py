"""Schema checks of every object written: built-in kinds against Kubernetes' OpenAPI schemas, custom resources
against their CRD's ``openAPIV3Schema``.

Built-in kinds use the schemas ``kubernetes-validate`` ships (upstream OpenAPI, Kubernetes 1.25 to 1.37, in a
"strict" variant where objects are closed): the cluster's version picks the newest schema set not newer than it.

Unknown fields follow the API server's field validation ("Kubernetes API Concepts", "Field validation"): with
``fieldValidation=Strict`` the request fails with 400 BadRequest ``strict decoding error: unknown field "…"``;
with ``Warn`` the fields are dropped and named in a ``Warning`` header; with ``Ignore`` they are dropped silently.
The default is Warn, as the API server's. A server-side apply is different: the applied configuration is converted to
the kind's typed schema, and an unknown field fails that conversion whatever ``fieldValidation`` says, with the API
server's 500 ``failed to create typed patch object (<ns>/<name>; <group>/<version>, Kind=<kind>): .<field>: field
not declared in schema`` (a Status without reason; kubernetes/kubernetes issues #122480, #139253: still 500).
Other schema violations are 422 Invalid with one cause per field.

Custom resources are structural ("Specifying a structural schema"): at each object level fields not declared in
``properties`` are unknown unless ``x-kubernetes-preserve-unknown-fields: true`` or ``additionalProperties``
(a map) says otherwise; ``apiVersion``, ``kind`` and ``metadata`` are always allowed at the root; ``default``
values are applied ("Defaulting") before validation; ``nullable`` admits null. CEL rules
(``x-kubernetes-validations``) are evaluated by :mod:`.cel_rules`.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any

import jsonschema

from fmcluster_sandbox.kube.status import KubeError, bad_request, invalid

FIELD_VALIDATION = ("Strict", "Warn", "Ignore")
DEFAULT_FIELD_VALIDATION = "Warn"  # "Kubernetes API Concepts", "Field validation": Warn (default)
APPLY = "Apply"  # server-side apply: unknown fields fail whatever fieldValidation says
# RFC 1123 subdomain (apimachinery IsDNS1123Subdomain): names of most objects.
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Kinds whose names must be RFC 1123 labels rather than subdomains (apimachinery ValidateNamespaceName etc.).
LABEL_NAMED = {"Namespace"}
# Names with path segments are allowed for RBAC objects (ValidateRBACName: any name without "/" or "%").
PATH_SEGMENT_NAMED = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def field_path(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# -- built-in kinds --------------------------------------------------------------------------------
def schema_versions() -> list[str]:
    from kubernetes_validate.utils import all_versions

    return all_versions()


def schema_version_for(kubernetes_version: str) -> str:
    """The kubernetes-validate schema set used for a cluster of ``kubernetes_version`` (e.g. "1.33")."""
    from packaging.version import Version

    wanted = Version(kubernetes_version.lstrip("v"))
    candidates = [v for v in schema_versions() if Version(v) <= Version(f"{wanted.major}.{wanted.minor}.99")]
    if not candidates:
        raise ValueError(f"no Kubernetes OpenAPI schemas for version {kubernetes_version}")
    return candidates[-1]


@functools.lru_cache(maxsize=8)
def _registry(schema_version: str) -> Any:
    from kubernetes_validate.utils import schema_contents
    from referencing import Registry, Resource

    defs = schema_contents(f"kubernetes-json-schema/v{schema_version}-local-strict/_definitions.json", schema_version)
    return Resource.from_contents(defs) @ Registry()


@functools.lru_cache(maxsize=256)
def _builtin_validator(schema_version: str, kind: str, api_version: str) -> Any:
    from kubernetes_validate.utils import schema_contents

    short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = schema_contents(f"kubernetes-json-schema/v{schema_version}-local-strict/{kind.lower()}-{short}.json",
                             schema_version)
    return jsonschema.validators.Draft202012Validator(schema, registry=_registry(schema_version))


def check_builtin(obj: dict[str, Any], kubernetes_version: str, mode: str) -> list[str]:
    """Validate (and, under Warn/Ignore, prune) ``obj`` in place; answers the warnings to send."""
    validator = _builtin_validator(schema_version_for(kubernetes_version), obj["kind"], obj["apiVersion"])
    unknown: list[tuple[list[Any], str]] = []
    causes: list[tuple[str, str, str]] = []
    for error in validator.iter_errors(obj):
        _collect(error, unknown, causes)
    warnings = _unknown_fields(obj, unknown, mode)
    _raise_invalid(obj, causes)
    return warnings


def _collect(error: jsonschema.ValidationError, unknown: list, causes: list) -> None:
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and error.validator_value is False:
        declared = set(error.schema.get("properties", {}))
        patterns = list(error.schema.get("patternProperties", {}))
        for key in error.instance:
            if key not in declared and not any(re.search(p, key) for p in patterns):
                unknown.append((path, key))
        return
    if error.validator in ("anyOf", "oneOf") and error.context:
        # Report the branch that got furthest: the one whose errors sit deepest in the object.
        best = max(error.context, key=lambda e: len(list(e.absolute_path)))
        if len(list(best.absolute_path)) > len(path):
            _collect(best, unknown, causes)
            return
    reason = {"required": "FieldValueRequired", "enum": "FieldValueNotSupported"}.get(str(error.validator),
                                                                                         "FieldValueInvalid")
    if error.validator == "required":
        missing = re.match(r"'([^']+)' is a required property", error.message)
        field = field_path(path + [missing[1]]) if missing else field_path(path)
        causes.append((reason, field, "Required value"))
        return
    value = json.dumps(error.instance)
    value = value if len(value) <= 80 else value[:77] + "..."
    causes.append((reason, field_path(path), f"Invalid value: {value}: {error.message}"))


def _unknown_fields(obj: dict[str, Any], unknown: list[tuple[list[Any], str]], mode: str) -> list[str]:
    if not unknown:
        return []
    names = [field_path(path + [key]) for path, key in unknown]
    if mode == APPLY:
        meta = obj.get("metadata") or {}
        api_version = obj.get("apiVersion", "")
        gvk = f"{api_version if '/' in api_version else '/' + api_version}, Kind={obj.get('kind', '')}"
        raise KubeError(500, "", f"failed to create typed patch object ({meta.get('namespace', '')}/"
                        f"{meta.get('name', '')}; {gvk}): " + "\n".join(f".{n}: field not declared in schema"
                                                                       for n in names))
    if mode == "Strict":
        raise bad_request("strict decoding error: " + ", ".join(f'unknown field "{n}"' for n in names))
    for path, key in sorted(unknown, key=lambda u: -len(u[0])):
        parent: Any = obj
        for part in path:
            parent = parent[part]
        parent.pop(key, None)
    return [f'unknown field "{n}"' for n in names] if mode == "Warn" else []


def _raise_invalid(obj: dict[str, Any], causes: list[tuple[str, str, str]]) -> None:
    if causes:
        raise invalid(obj.get("kind", ""), (obj.get("metadata") or {}).get("name", ""), causes,
                      obj.get("apiVersion", "").split("/")[0] if "/" in obj.get("apiVersion", "") else "")


def check_metadata(obj: dict[str, Any]) -> None:
    """Name and label syntax (apimachinery ValidateObjectMeta, ValidateLabels)."""
    meta = obj.get("metadata") or {}
    kind, name = obj.get("kind", ""), meta.get("name", "")
    group = obj["apiVersion"].split("/")[0] if "/" in obj.get("apiVersion", "") else ""
    causes = []
    if not name:
        causes.append(("FieldValueRequired", "metadata.name", "Required value: name or generateName is required"))
    elif kind in PATH_SEGMENT_NAMED:
        if "/" in name or "%" in name or name in (".", ".."):
            causes.append(("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": may not contain "/"'))
    else:
        pattern, limit = (DNS_LABEL, 63) if kind in LABEL_NAMED else (DNS_SUBDOMAIN, 253)
        if len(name) > limit or not pattern.match(name):
            causes.append(("FieldValueInvalid", "metadata.name",
                           f'Invalid value: "{name}": a lowercase RFC 1123 '
                           f'{"label" if kind in LABEL_NAMED else "subdomain"} must consist of lower case '
                           "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                           "character"))
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label = key.rpartition("/")
        if not label or len(label) > 63 or not LABEL_NAME.match(label) or (
                prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix))):
            causes.append(("FieldValueInvalid", "metadata.labels", f'Invalid value: "{key}": name part must '
                           "consist of alphanumeric characters, '-', '_' or '.'"))
        if not isinstance(value, str) or len(value) > 63 or (value and not LABEL_NAME.match(value)):
            causes.append(("FieldValueInvalid", "metadata.labels", f'Invalid value: "{value}": a valid label must '
                           "be an empty string or consist of alphanumeric characters, '-', '_' or '.'"))
    if causes:
        raise invalid(kind, name, causes, group)


# -- custom resources ------------------------------------------------------------------------------
ROOT_FIELDS = ("apiVersion", "kind", "metadata")


def check_custom(obj: dict[str, Any], schema: dict[str, Any] | None, mode: str) -> list[str]:
    """Default, prune-check and validate a custom resource in place against its CRD version's schema."""
    if schema is None:
        return []
    unknown: list[tuple[list[Any], str]] = []
    _walk(obj, schema, [], unknown, root=True)
    warnings = _unknown_fields(obj, unknown, mode)
    validator = jsonschema.Draft4Validator(_openapi_to_jsonschema(schema))
    causes: list[tuple[str, str, str]] = []
    for error in validator.iter_errors(obj):
        _collect(error, [], causes)
    _raise_invalid(obj, causes)
    return warnings


def _walk(value: Any, schema: dict[str, Any], path: list[Any], unknown: list, root: bool = False) -> None:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        embedded = schema.get("x-kubernetes-embedded-resource") is True
        for key, item in value.items():
            if (root or embedded) and key in ROOT_FIELDS:
                continue  # ObjectMeta is checked as metadata, not against the CRD's schema
            if key in props:
                _walk(item, props[key], path + [key], unknown)
            elif isinstance(additional, dict):
                _walk(item, additional, path + [key], unknown)
            elif not preserve and additional is not True:
                unknown.append((path, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(item, schema["items"], path + [index], unknown)


def _openapi_to_jsonschema(schema: Any) -> Any:
    """OpenAPI v3 to JSON Schema draft 4: ``nullable`` admits null; ``x-kubernetes-*`` and ``format`` stay
    (unknown keywords are ignored by jsonschema)."""
    if isinstance(schema, list):
        return [_openapi_to_jsonschema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _openapi_to_jsonschema(v) if k not in ("enum", "default", "example") else v for k, v in schema.items()}
    if out.get("properties") is not None:
        out["properties"] = {k: _openapi_to_jsonschema(v) for k, v in schema["properties"].items()}
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def check_crd_names(crd: dict[str, Any]) -> None:
    """apiextensions validation: the CRD's name is ``<spec.names.plural>.<spec.group>``; one storage version."""
    spec, name = crd.get("spec") or {}, crd["metadata"]["name"]
    causes = []
    expected = f"{(spec.get('names') or {}).get('plural', '')}.{spec.get('group', '')}"
    if name != expected:
        causes.append(("FieldValueInvalid", "metadata.name",
                       f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    storage = [v for v in spec.get("versions", []) if v.get("storage")]
    if len(storage) != 1:
        causes.append(("FieldValueInvalid", "spec.versions",
                       "Invalid value: must have exactly one version marked as storage version"))
    if causes:
        raise invalid("CustomResourceDefinition", name, causes, "apiextensions.k8s.io")


__all__ = ["FIELD_VALIDATION", "DEFAULT_FIELD_VALIDATION", "KubeError", "check_builtin", "check_custom",
           "check_metadata", "check_crd_names", "schema_version_for", "schema_versions"]
