"""A PersistentVolumeClaim's larger request, as the API server admits it (Kubernetes, "Persistent Volumes",
"Expanding Persistent Volumes Claims": "You can only expand a PVC if its storage class's allowVolumeExpansion field
is set to true"; shrinking is not supported).

* a smaller ``spec.resources.requests.storage`` than the claim had: 422 Invalid, ``Forbidden: field can not be less
  than previous value`` (core validation, ValidatePersistentVolumeClaimUpdate);
* a larger one when the claim's StorageClass is absent or lacks ``allowVolumeExpansion: true``: 403 Forbidden from
  the PersistentVolumeClaimResize admission plugin, ``only dynamically provisioned pvc can be resized and the
  storageclass that provisions the pvc must support resize`` (the plugin checks only the class, whatever the
  wording: a statically provisioned claim of such a class is resized too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fmcluster_sandbox.kube.placement import quantity
from fmcluster_sandbox.kube.status import forbidden, invalid


def _request(obj: dict[str, Any]) -> Any:
    return (((obj.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")


def check(old: dict[str, Any], new: dict[str, Any], storage_class: Callable[[str], dict[str, Any] | None]) -> None:
    """Raise as the API server answers a claim update whose storage request changes; ``storage_class`` reads one."""
    if new.get("kind") != "PersistentVolumeClaim":
        return
    before, after = _request(old), _request(new)
    if before is None or after is None or quantity(before) == quantity(after):
        return
    name = new["metadata"]["name"]
    if quantity(after) < quantity(before):
        raise invalid("PersistentVolumeClaim", name, [("FieldValueForbidden", "spec.resources.requests.storage",
                                                       "Forbidden: field can not be less than previous value")])
    class_name = (new.get("spec") or {}).get("storageClassName") or ""
    found = storage_class(class_name) if class_name else None
    if not (found or {}).get("allowVolumeExpansion"):
        raise forbidden(f'persistentvolumeclaims "{name}" is forbidden: only dynamically provisioned pvc can be '
                        "resized and the storageclass that provisions the pvc must support resize", "update",
                        "persistentvolumeclaims", name)
