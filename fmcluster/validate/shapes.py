"""Walk a botocore shape and report every constraint a value breaks.

botocore's own ParamValidator checks types, required and unknown members; AWS services also enforce
enums, string lengths and patterns, numeric ranges and list sizes. This checks all of them, for any
service model: the PCS emulator uses it on requests, ``fmcluster validate`` on rendered documents.
Patterns follow Smithy semantics: searched, not implicitly anchored.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from botocore.model import Shape


@functools.lru_cache(maxsize=512)
def _pattern(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        # Some models (IAM) use Java regex classes such as \p{L} that Python's re cannot compile.
        return None


def check_shape(shape: Shape, value: Any, is_input: bool = True) -> list[tuple[str, str]]:
    """(field path, message) for every constraint of ``shape`` that ``value`` breaks."""
    errors: list[tuple[str, str]] = []
    _walk(shape, value, "", errors, is_input)
    return errors


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _walk(shape: Shape, value: Any, path: str, errors: list[tuple[str, str]], is_input: bool) -> None:
    kind = shape.type_name
    where = path or "request"
    if kind == "structure":
        if not isinstance(value, dict):
            errors.append((where, f"expected an object, got {type(value).__name__}"))
            return
        members = shape.members
        for name in value:
            if name not in members:
                errors.append((_join(path, name), "unknown member"))
        for name in shape.required_members:
            if value.get(name) is None:
                errors.append((_join(path, name), "is required"))
        for name, member in members.items():
            if value.get(name) is not None:
                _walk(member, value[name], _join(path, name), errors, is_input)
    elif kind == "list":
        if not isinstance(value, list):
            errors.append((where, f"expected a list, got {type(value).__name__}"))
            return
        _size(shape, len(value), where, "items", errors)
        for index, item in enumerate(value):
            if item is None:
                errors.append((f"{where}[{index}]", "must not be null"))
            else:
                _walk(shape.member, item, f"{where}[{index}]", errors, is_input)
    elif kind == "map":
        if not isinstance(value, dict):
            errors.append((where, f"expected an object, got {type(value).__name__}"))
            return
        _size(shape, len(value), where, "entries", errors)
        for key, item in value.items():
            _walk(shape.key, key, f"{where}.{key}", errors, is_input)
            if item is None:
                errors.append((f"{where}.{key}", "must not be null"))
            else:
                _walk(shape.value, item, f"{where}.{key}", errors, is_input)
    elif kind == "string":
        if not isinstance(value, str):
            errors.append((where, f"expected a string, got {type(value).__name__}"))
            return
        enum = shape.enum
        if enum and value not in enum:
            errors.append((where, f"value {value!r} is not one of {', '.join(enum)}"))
        _size(shape, len(value), where, "characters", errors)
        pattern = shape.metadata.get("pattern")
        compiled = _pattern(pattern) if pattern else None
        if compiled is not None and not compiled.search(value):
            errors.append((where, f"value {value!r} does not match pattern {pattern}"))
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append((where, f"expected an integer, got {type(value).__name__}"))
            return
        _range(shape, value, where, errors)
    elif kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append((where, f"expected a number, got {type(value).__name__}"))
            return
        _range(shape, value, where, errors)
    elif kind == "boolean":
        if not isinstance(value, bool):
            errors.append((where, f"expected a boolean, got {type(value).__name__}"))
    elif kind == "timestamp":
        # awsJson1_0 sends timestamps as epoch seconds.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append((where, f"expected epoch seconds, got {type(value).__name__}"))
    elif kind == "blob":
        if not isinstance(value, str):
            errors.append((where, f"expected base64 text, got {type(value).__name__}"))


def _size(shape: Shape, size: int, where: str, unit: str, errors: list[tuple[str, str]]) -> None:
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    if low is not None and size < low:
        errors.append((where, f"must have at least {low} {unit}, has {size}"))
    if high is not None and size > high:
        errors.append((where, f"must have at most {high} {unit}, has {size}"))


def _range(shape: Shape, value: float, where: str, errors: list[tuple[str, str]]) -> None:
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    if low is not None and value < low:
        errors.append((where, f"must be >= {low}, is {value}"))
    if high is not None and value > high:
        errors.append((where, f"must be <= {high}, is {value}"))
