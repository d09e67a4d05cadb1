"""Kind-specific rules of the API server beyond the OpenAPI schema: immutable fields on update, and Secrets'
``stringData`` and base64 ``data``.

Immutable fields follow each kind's validation in kubernetes/kubernetes ``pkg/apis/<group>/validation`` as the API
reference states them: "Immutable" / "field is immutable" (422 Invalid, cause ``FieldValueInvalid`` or
``FieldValueForbidden``):

* StatefulSet: ``spec.selector``, ``serviceName``, ``volumeClaimTemplates``, ``podManagementPolicy`` (updates may
  change only replicas, ordinals, template, updateStrategy, persistentVolumeClaimRetentionPolicy, minReadySeconds).
* Deployment, DaemonSet: ``spec.selector`` ("Deployment" / "DaemonSet" API reference: "It must match the pod
  template's labels" and is immutable in apps/v1).
* Job: ``spec.selector`` and ``spec.template`` (Job API reference; mutable scheduling directives of suspended
  Jobs are not emulated).
* StorageClass: ``provisioner``, ``parameters``, ``reclaimPolicy``, ``volumeBindingMode`` ("Storage Classes":
  "Once created, ... cannot be updated").
* RuntimeClass: ``handler`` ("Runtime Class": "the handler ... is immutable").
* PersistentVolume: the volume source; PersistentVolumeClaim: ``spec`` except ``resources.requests`` and
  ``volumeAttributesClassName`` ("Persistent Volumes").
* RoleBinding, ClusterRoleBinding: ``roleRef`` ("Using RBAC Authorization": "roleRef is immutable").
* CSIDriver: not emulated (which of its fields are immutable has changed across Kubernetes versions).
* ConfigMap, Secret with ``immutable: true``: ``data``/``binaryData`` and ``immutable`` itself ("Immutable
  ConfigMaps", "Immutable Secrets"); a Secret's ``type``.
* CustomResourceDefinition: ``spec.scope`` (apiextensions validation ``ValidateCustomResourceDefinitionUpdate``;
  group and plural are fixed by the name).

Secrets ("Secrets", API reference): ``stringData`` is write-only; its values are base64-encoded into ``data``
(overriding keys there) and it is not stored. ``data`` values must be base64, else 400 BadRequest as the decoder
answers.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from fmcluster_sandbox.kube.status import bad_request, invalid

_PV_SOURCE_FIELDS = ("accessModes", "capacity", "claimRef", "mountOptions", "nodeAffinity",
                     "persistentVolumeReclaimPolicy", "storageClassName", "volumeMode", "volumeAttributesClassName")


def _get(obj: dict[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _immutable(kind: str) -> list[str]:
    return {
        "Deployment": ["spec.selector"],
        "DaemonSet": ["spec.selector"],
        "StatefulSet": ["spec.selector", "spec.serviceName", "spec.volumeClaimTemplates", "spec.podManagementPolicy"],
        "Job": ["spec.selector", "spec.template"],
        "StorageClass": ["provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"],
        "RuntimeClass": ["handler"],
        "RoleBinding": ["roleRef"],
        "ClusterRoleBinding": ["roleRef"],
        "CustomResourceDefinition": ["spec.scope"],
        "Secret": ["type"],
    }.get(kind, [])


def check_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """422 Invalid when an update changes a field the kind makes immutable."""
    kind, name = new["kind"], new["metadata"]["name"]
    group = new["apiVersion"].split("/")[0] if "/" in new["apiVersion"] else ""
    causes = []
    for field in _immutable(kind):
        if _get(old, field) != _get(new, field):
            if kind == "StorageClass":
                causes.append(("FieldValueForbidden", field, f"Forbidden: updates to {field} are forbidden."))
            elif field == "roleRef":
                causes.append(("FieldValueInvalid", field, "Invalid value: cannot change roleRef"))
            else:
                causes.append(("FieldValueInvalid", field, "Invalid value: field is immutable"))
    if kind == "PersistentVolume":
        def source(obj: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in (obj.get("spec") or {}).items() if k not in _PV_SOURCE_FIELDS}

        if source(old) != source(new):
            causes.append(("FieldValueForbidden", "spec.persistentvolumesource",
                           "Forbidden: spec.persistentvolumesource is immutable after creation"))
    if kind == "PersistentVolumeClaim":
        def fixed(obj: dict[str, Any]) -> dict[str, Any]:
            spec = {k: v for k, v in (obj.get("spec") or {}).items() if k not in ("volumeAttributesClassName",
                                                                                   "volumeName")}
            resources = dict(spec.get("resources") or {})
            resources.pop("requests", None)
            spec["resources"] = resources
            return spec

        if fixed(old) != fixed(new):
            causes.append(("FieldValueForbidden", "spec", "Forbidden: spec is immutable after creation except "
                           "resources.requests and volumeAttributesClassName for bound claims"))
    if kind in ("ConfigMap", "Secret") and old.get("immutable") is True:
        if new.get("immutable") is not True:
            causes.append(("FieldValueForbidden", "immutable", "Forbidden: field is immutable when `immutable` is set"))
        for field in ("data", "binaryData"):
            if (old.get(field) or {}) != (new.get(field) or {}):
                causes.append(("FieldValueForbidden", field, "Forbidden: field is immutable when `immutable` is set"))
    if causes:
        raise invalid(kind, name, causes, group)


def normalise_secret(obj: dict[str, Any]) -> None:
    """Fold ``stringData`` into ``data`` and check ``data`` is base64, as the API server does on every write."""
    if not isinstance(obj.get("data") or {}, dict) or not isinstance(obj.get("stringData") or {}, dict):
        return  # the schema check answers 422 for these
    for key, value in (obj.get("data") or {}).items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise bad_request(f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data in '
                              f'data.{key}: {exc}') from None
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {}) or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def _selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) or \
                (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


_ENV_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")


def env_causes(pod: dict[str, Any], path: str) -> list[tuple[str, str, str]]:
    """Mutually exclusive fields of a container's ``env`` (kubernetes ``pkg/apis/core/validation``
    ``validateEnvVarValueFrom``; EnvVar API reference: ``valueFrom`` "Cannot be used if value is not empty"): a
    ``valueFrom`` needs exactly one source, and none beside a non-empty ``value``."""
    causes = []
    for group in ("initContainers", "containers"):
        for i, container in enumerate(pod.get(group) or []):
            for j, env in enumerate((container or {}).get("env") or []):
                source = (env or {}).get("valueFrom")
                if not isinstance(source, dict):
                    continue
                where = f"{path}.{group}[{i}].env[{j}].valueFrom"
                count = sum(1 for key in _ENV_SOURCES if source.get(key) is not None)
                if count == 0:
                    message = "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
                elif env.get("value"):
                    message = "may not be specified when `value` is not empty"
                elif count > 1:
                    message = "may not have more than one field specified at a time"
                else:
                    continue
                causes.append(("FieldValueInvalid", where, f'Invalid value: "": {message}'))
    return causes


def volume_causes(pod: dict[str, Any], path: str) -> list[tuple[str, str, str]]:
    """A pod volume names exactly one source (kubernetes ``pkg/apis/core/validation`` ``validateVolumeSource``: "may
    not specify more than 1 volume type", "must specify a volume type"). The API server puts the cause on the second
    source in its own order of the sources; the sandbox puts it on the volume."""
    causes = []
    for i, volume in enumerate(pod.get("volumes") or []):
        sources = [k for k, v in (volume or {}).items() if k != "name" and v is not None]
        if len(sources) > 1:
            causes.append(("FieldValueForbidden", f"{path}.volumes[{i}]",
                           "Forbidden: may not specify more than 1 volume type"))
        elif not sources:
            causes.append(("FieldValueRequired", f"{path}.volumes[{i}]", "Required value: must specify a volume type"))
    return causes


def check_workload(obj: dict[str, Any], own_job_selector: bool = False) -> None:
    """Controllers' own validation (``pkg/apis/apps/validation``, ``pkg/apis/batch/validation``), after defaults:

    * Deployment, DaemonSet, StatefulSet: a non-empty ``spec.selector`` that matches the template's labels; the
      template's ``restartPolicy`` is ``Always``.
    * Job: the template's ``restartPolicy`` is ``OnFailure`` or ``Never`` ("Jobs": "Pod Template"); a selector
      given at creation (``own_job_selector``) needs ``manualSelector: true``.
    * Every kind: the pod template's containers' ``env`` (:func:`env_causes`) and volumes (:func:`volume_causes`).
    """
    kind, spec = obj.get("kind"), obj.get("spec")
    if kind not in ("Deployment", "DaemonSet", "StatefulSet", "Job") or not isinstance(spec, dict):
        return
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    pod = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    name = obj["metadata"]["name"]
    group = obj["apiVersion"].split("/")[0]
    causes = env_causes(pod, "spec.template.spec") + volume_causes(pod, "spec.template.spec")
    if kind in ("Deployment", "DaemonSet", "StatefulSet"):
        selector = spec.get("selector") or {}
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            causes.append(("FieldValueInvalid", "spec.selector",
                           f"Invalid value: {selector}: empty selector is invalid for {kind.lower()}"))
        elif not _selector_matches(selector, labels):
            causes.append(("FieldValueInvalid", "spec.template.metadata.labels",
                           f"Invalid value: {labels}: `selector` does not match template `labels`"))
        if pod.get("restartPolicy") != "Always":
            causes.append(("FieldValueNotSupported", "spec.template.spec.restartPolicy",
                           f'Unsupported value: "{pod.get("restartPolicy")}": supported values: "Always"'))
    else:
        if pod.get("restartPolicy") not in ("OnFailure", "Never"):
            causes.append(("FieldValueRequired", "spec.template.spec.restartPolicy",
                           'Required value: valid values: "OnFailure", "Never"'))
        if own_job_selector and not spec.get("manualSelector"):
            causes.append(("FieldValueInvalid", "spec.selector",
                           f"Invalid value: {spec['selector']}: `selector` not auto-generated"))
    if causes:
        raise invalid(kind, name, causes, group)
