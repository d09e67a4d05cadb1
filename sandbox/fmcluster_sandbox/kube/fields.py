"""Field management ("Server-Side Apply": field management, conflicts, managers; ``metadata.managedFields``).

Every write records which manager owns which fields, in ``metadata.managedFields`` entries (``manager``,
``operation`` Apply or Update, ``apiVersion``, ``time``, ``fieldsType: FieldsV1``, ``fieldsV1``):

* an apply (``application/apply-patch+yaml``) by manager M owns exactly the fields its configuration sets.
  Setting a field to a value other than the live one (lists and their items compared on the keys the configuration
  sets) while another manager owns it is a conflict: 409 Conflict, reason ``Conflict``, one
  ``FieldManagerConflict`` cause per field, message ``Apply failed with 1 conflict: conflict with "<manager>" using
  <apiVersion> at <time>: .spec.replicas`` (the form of the API server's ``fieldmanager/internal/conflict.go``);
  with ``force=true`` the applier takes those fields over. A field M applied before and no longer applies is
  removed, unless another manager owns it too;
* any other write (create, update, merge/JSON patch) by manager M (``fieldManager``, else the User-Agent up to its
  first ``/``) takes the fields it sets or changes as an Update entry of M, and they leave other managers' sets
  (an update never conflicts).

Fields are leaves of the object outside ``apiVersion``, ``kind``, ``status`` and ``metadata`` (but
``metadata.labels``/``annotations``). Not emulated: lists are atomic (a list, ``containers`` included, is one field,
where the API server merges ``listType: map`` lists item by item), so two managers that each own one container
conflict over the whole list; ``/status`` writes record no owner; ``managedFields`` a client sends are ignored.
"""

from __future__ import annotations

import copy
from typing import Any

from fmcluster_sandbox.kube.status import KubeError

Path = tuple[str, ...]


def leaves(obj: Any, prefix: Path = ()) -> dict[Path, Any]:
    out: dict[Path, Any] = {}
    if not isinstance(obj, dict):
        return out
    for key, value in obj.items():
        if not prefix and key in ("apiVersion", "kind", "status"):
            continue
        if not prefix and key == "metadata":
            for part in ("labels", "annotations"):
                if isinstance(value, dict) and isinstance(value.get(part), dict):
                    out.update(leaves(value[part], ("metadata", part)))
            continue
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            out.update(leaves(value, path))
        else:
            out[path] = value
    return out


def path_text(path: Path) -> str:
    return "".join(f".{p}" for p in path)


def encode(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return root


def decode(fields: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, sub in (fields or {}).items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        children = decode(sub, path) if isinstance(sub, dict) else set()
        out |= children or {path}
    return out


def _entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in (obj.get("metadata") or {}).get("managedFields") or [] if isinstance(e, dict)]


def _entry(manager: str, operation: str, api_version: str, now: str, paths: set[Path]) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now,
            "fieldsType": "FieldsV1", "fieldsV1": encode(paths)}


def _store(obj: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    kept = [e for e in entries if decode(e.get("fieldsV1") or {})]
    obj.setdefault("metadata", {})["managedFields"] = kept
    if not kept:
        obj["metadata"].pop("managedFields")


def _manager_text(entry: dict[str, Any]) -> str:
    text = f'"{entry["manager"]}"'
    if entry.get("operation") == "Update":
        text += f' using {entry.get("apiVersion")}' + (f' at {entry["time"]}' if entry.get("time") else "")
    return text


def record_update(old: dict[str, Any] | None, new: dict[str, Any], manager: str, api_version: str, now: str,
                  sent: set[Path] | None = None) -> None:
    """Record a non-apply write of ``new`` (over ``old``) by ``manager`` in ``new``'s managedFields. ``sent``: on
    create, the fields the request itself set (server defaults belong to nobody)."""
    before = leaves(old) if old is not None else {}
    after = leaves(new)
    changed = {p for p, v in after.items() if before.get(p, object()) != v}
    if sent is not None:
        changed &= sent
    removed = set(before) - set(after)
    entries = copy.deepcopy(_entries(old)) if old is not None else []
    mine = None
    for entry in entries:
        paths = decode(entry.get("fieldsV1") or {})
        if entry.get("manager") == manager and entry.get("operation") == "Update":
            mine = entry
            paths = (paths | changed) - removed
        else:
            paths = paths - changed - removed
        entry["fieldsV1"] = encode(paths)
    if mine is None and changed:
        entries.append(_entry(manager, "Update", api_version, now, changed))
    elif mine is not None and changed:
        mine.update({"time": now, "apiVersion": api_version})
    _store(new, entries)


def apply(live: dict[str, Any], config: dict[str, Any], manager: str, force: bool, api_version: str,
          now: str) -> dict[str, Any]:
    """The object after ``manager`` applies ``config`` to ``live`` (409 on conflicts unless ``force``)."""
    applied = leaves(config)
    current = leaves(live)
    entries = copy.deepcopy(_entries(live))
    conflicts: list[tuple[dict[str, Any], Path]] = []
    for entry in entries:
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            continue
        owned = decode(entry.get("fieldsV1") or {})
        for path, value in applied.items():
            if path in owned and path in current and not _covers(current[path], value):
                conflicts.append((entry, path))
    if conflicts and not force:
        raise conflict_error(conflicts)
    taken = {path for _, path in conflicts}
    previous: set[Path] = set()
    others: set[Path] = set()
    for entry in entries:
        paths = decode(entry.get("fieldsV1") or {})
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            previous = paths
        else:
            others |= paths - taken
            entry["fieldsV1"] = encode(paths - taken)
    merged = copy.deepcopy(live)
    for path in previous - set(applied) - others:
        _remove(merged, path)
    merged = _merge(merged, config)
    entries = [e for e in entries if not (e.get("manager") == manager and e.get("operation") == "Apply")]
    entries.append(_entry(manager, "Apply", api_version, now, set(applied)))
    _store(merged, entries)
    return merged


def created_by_apply(obj: dict[str, Any], config: dict[str, Any], manager: str, api_version: str, now: str) -> None:
    _store(obj, [_entry(manager, "Apply", api_version, now, set(leaves(config)))])


def conflict_error(conflicts: list[tuple[dict[str, Any], Path]]) -> KubeError:
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {_manager_text(e)}",
               "field": path_text(p)} for e, p in conflicts]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_manager_text(entry)}: {path_text(path)}"
    else:
        lines = []
        for text in sorted({_manager_text(e) for e, _ in conflicts}):
            lines.append(f"conflicts with {text}:")
            lines += [f"- {path_text(p)}" for e, p in conflicts if _manager_text(e) == text]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return KubeError(409, "Conflict", message, {"causes": causes})


def _covers(live: Any, applied: Any) -> bool:
    """Whether the live value already is what was applied: maps and list items compared on the applied keys only
    (server defaults such as a container's ``terminationMessagePath`` are not a different value)."""
    if isinstance(applied, dict) and isinstance(live, dict):
        return all(k in live and _covers(live[k], v) for k, v in applied.items())
    if isinstance(applied, list) and isinstance(live, list):
        return len(applied) == len(live) and all(_covers(a, b) for a, b in zip(live, applied, strict=True))
    return live == applied


def _remove(obj: dict[str, Any], path: Path) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


def _merge(target: Any, patch: Any) -> Any:
    """Deep merge of an applied configuration: maps merge, everything else (lists included) is replaced."""
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    out = dict(target)
    for key, value in patch.items():
        out[key] = _merge(out.get(key), value)
    return out
