"""CEL validation rules of CRD schemas (``x-kubernetes-validations``; "Extend the Kubernetes API with
CustomResourceDefinitions", "Validation rules"), evaluated with cel-python.

Each rule is evaluated at the schema node that carries it, with ``self`` bound to the object's value there; nodes
the object does not have are not evaluated. Transition rules (those that use ``oldSelf``) run only on updates and
only where the old object had the value too (object properties and map values correlate; list items do not, so
transition rules inside lists are skipped). A rule that is false, or fails to evaluate (e.g. a missing field), is
422 Invalid at its path with the rule's ``message`` (``messageExpression`` is not evaluated; its text is not
used), ``reason`` and ``fieldPath`` when given. ``optionalOldSelf`` and the Kubernetes CEL libraries beyond
standard CEL (quantity, URL, IP, regex format, ``isSorted`` …) are not emulated: a rule using them fails to compile
and is reported as such.
"""

from __future__ import annotations

import functools
from typing import Any

from fmcluster_sandbox.kube.validation import field_path

_MISSING = object()
REASONS = {"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"}


@functools.lru_cache(maxsize=512)
def _program(rule: str) -> Any:
    import celpy

    env = celpy.Environment()
    return env.program(env.compile(rule))


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(value), "number")


def check(obj: dict[str, Any], schema: dict[str, Any] | None, old: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """Causes ``(reason, field, message)`` for every rule ``obj`` breaks (``old``: the stored object on update)."""
    if not schema:
        return []
    causes: list[tuple[str, str, str]] = []
    _walk(obj, schema, [], old if old is not None else _MISSING, causes, root=True)
    return causes


def _walk(value: Any, schema: dict[str, Any], path: list[Any], old: Any, causes: list, root: bool = False) -> None:
    for rule in schema.get("x-kubernetes-validations") or []:
        _evaluate(rule, value, path, old, causes)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            child = props.get(key) if key in props else (additional if isinstance(additional, dict) else None)
            if child is None:
                continue
            old_item = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
            _walk(item, child, path + [key], old_item, causes)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(item, schema["items"], path + [index], _MISSING, causes)


def _evaluate(rule: dict[str, Any], value: Any, path: list[Any], old: Any, causes: list) -> None:
    import celpy

    text = str(rule.get("rule", ""))
    transition = "oldSelf" in text
    if transition and old is _MISSING:
        return
    where = field_path(path) + (rule.get("fieldPath") or "")
    where = where.lstrip(".")
    reason = rule.get("reason") if rule.get("reason") in REASONS else "FieldValueInvalid"
    try:
        activation = {"self": celpy.json_to_cel(value)}
        if transition:
            activation["oldSelf"] = celpy.json_to_cel(old)
        result = _program(text).evaluate(activation)
        if isinstance(result, Exception):  # cel-python answers some runtime errors instead of raising them
            raise result
    except Exception as exc:  # noqa: BLE001 - compile or runtime errors are the rule's failure
        causes.append((reason, where, f'Invalid value: "{_type_name(value)}": rule {text!r} could not be evaluated: '
                                      f"{type(exc).__name__}: {exc}"))
        return
    if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
        message = rule.get("message") or f"failed rule: {text}"
        causes.append((reason, where, f'Invalid value: "{_type_name(value)}": {message}'))
