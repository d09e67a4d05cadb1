"""Check Kubernetes manifests offline, as strictly as an API server would and then some.

Built-in kinds are checked against the upstream OpenAPI schemas ``kubernetes-validate`` ships (its strict set: an
unknown field is a problem, where an API server would drop it or, with fieldValidation=Strict, refuse it); custom
resources against their CRD's ``openAPIV3Schema`` treated as closed (an API server prunes unknown fields silently, so
a misspelt quota would vanish without a word). References AWS fills at create time are replaced with well-formed
stand-ins first, as ``validate`` does for AWS request documents. CEL rules (``x-kubernetes-validations``) are not
evaluated here; the sandbox's Kubernetes API evaluates them.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import jsonschema
from kubernetes_validate import utils as kubernetes_validate
from referencing import Registry, Resource

from fmcluster.backends.eks.software.releases import all_crds
from fmcluster.validate.requests import with_stand_ins

_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
_OBJECT_META = {"$ref": f"{_DEFINITIONS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
# Kubernetes' own name and label rules (apimachinery validation: IsDNS1123Subdomain, IsValidLabelValue).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def schema_version(kubernetes_version: str) -> str:
    """The newest schema set kubernetes-validate ships that is not newer than the cluster (else its oldest)."""
    wanted = _minor(kubernetes_version)
    shipped = sorted(kubernetes_validate.all_versions(), key=_minor)
    fitting = [version for version in shipped if _minor(version) <= wanted]
    return fitting[-1] if fitting else shipped[0]


def manifest_problems(objects: list[dict[str, Any]], kubernetes_version: str) -> list[str]:
    """Every problem with ``objects`` for a cluster at ``kubernetes_version``, as ``Kind/name: path: message``
    lines; [] when all of them pass."""
    version = schema_version(kubernetes_version)
    problems: list[str] = []
    for obj in objects:
        where = f"{obj.get('kind', '?')}/{(obj.get('metadata') or {}).get('name', '?')}"
        try:
            filled = with_stand_ins(obj)
        except KeyError as exc:  # a reference nothing at create time would fill
            problems.append(f"{where}: {exc.args[0]}")
            continue
        problems += [f"{where}: {problem}" for problem in _object_problems(filled, version)]
    return problems


def _object_problems(obj: dict[str, Any], version: str) -> list[str]:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return ["apiVersion and kind are required"]
    validator = _custom_validator(api_version, kind) or _builtin_validator(api_version, kind, version)
    if validator is None:
        return [f"no schema for {kind} {api_version}: neither a Kubernetes {version} kind nor one of fmcluster's "
                "scheduler CRDs"]
    found = [f"{_path(error)}: {error.message}" for error in
             sorted(validator.iter_errors(obj), key=lambda error: list(map(str, error.absolute_path)))]
    return found + _name_problems(obj)


def _name_problems(obj: dict[str, Any]) -> list[str]:
    metadata = obj.get("metadata") or {}
    problems = []
    name = metadata.get("name")
    if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        problems.append(f"metadata.name: {name!r} is not a Kubernetes name (lower-case letters, digits, '-' and "
                        "'.', starting and ending with a letter or digit, at most 253 characters)")
    for key, value in (metadata.get("labels") or {}).items():
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            problems.append(f"metadata.labels.{key}: {value!r} is not a label value (at most 63 letters, digits, "
                            "'-', '_' and '.', starting and ending with a letter or digit)")
    return problems


def _path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "(object)"


def _minor(version: str) -> tuple[int, int]:
    major, minor = re.match(r"^v?(\d+)\.(\d+)", version).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


@functools.cache
def _registry(version: str) -> Registry:
    definitions = kubernetes_validate.schema_contents(
        f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", version)
    return Resource.from_contents(definitions) @ Registry()


@functools.cache
def _builtin_validator(api_version: str, kind: str, version: str) -> jsonschema.protocols.Validator | None:
    # kubernetes-validate's file names: the group's first label and the version (apps/v1 -> apps-v1; v1 -> v1).
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kubernetes_validate.schema_contents(
            f"kubernetes-json-schema/v{version}-local-strict/{kind.lower()}-{group_version}.json", version)
    except FileNotFoundError:
        return None
    return jsonschema.Draft202012Validator(schema, registry=_registry(version))


@functools.cache
def _custom_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> closed schema, for every served version of every shipped CRD."""
    schemas = {}
    for crd in all_crds():
        spec = crd["spec"]
        for served in spec["versions"]:
            if not served.get("served", True):
                continue
            schema = _closed(copy.deepcopy(served["schema"]["openAPIV3Schema"]))
            # The CRD leaves metadata open ("type: object"); the API server checks it as ObjectMeta.
            schema.setdefault("properties", {})["metadata"] = _OBJECT_META
            schemas[(f"{spec['group']}/{served['name']}", spec["names"]["kind"])] = schema
    return schemas


def _custom_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    schema = _custom_schemas().get((api_version, kind))
    if schema is None:
        return None
    # ObjectMeta's definition is the same in every shipped schema set; take the newest.
    return jsonschema.Draft202012Validator(schema, registry=_registry(kubernetes_validate.latest_version()))


def _closed(schema: Any) -> Any:
    """An OpenAPI schema where every object with listed properties allows no others (unless the CRD says it keeps
    unknown fields)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("properties", "patternProperties", "$defs", "definitions"):
                for name in value:
                    value[name] = _closed(value[name])
            elif key in ("items", "additionalProperties", "not") or key in ("allOf", "anyOf", "oneOf"):
                schema[key] = _closed(value)
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        return [_closed(item) for item in schema]
    return schema
