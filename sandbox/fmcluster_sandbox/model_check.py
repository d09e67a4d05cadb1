"""The sandbox's one request checker: a request against botocore's service model, as AWS's front ends do.

Every service the sandbox emulates itself (PCS, and the EC2, FSx and Service Quotas actions moto lacks)
checks its requests here, so a request fmcluster renders wrongly is refused here too, whatever fmcluster's
own checks say. It never imports fmcluster's product code: the model is the only authority.

``check`` reports every violation of an input (or output) shape: unknown and missing required members,
types, enums, string lengths and patterns, numeric ranges, list and map sizes, as ``(field path, message)``
pairs. ``from_query`` turns EC2/Query-protocol parameters (``Filter.1.Name=…``) back into the structure the
model describes, so query requests are checked the same way. Patterns follow Smithy: searched, not
implicitly anchored.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import botocore.session
from botocore.model import OperationModel, ServiceModel, Shape

Problems = list[tuple[str, str]]


@functools.lru_cache(maxsize=16)
def service_model(service: str) -> ServiceModel:
    return botocore.session.get_session().get_service_model(service)


def operation(service: str, name: str) -> OperationModel | None:
    model = service_model(service)
    return model.operation_model(name) if name in model.operation_names else None


def documented_values(service: str, shape_name: str, member: str) -> list[str]:
    """Values a member's documentation lists as ``Valid Values: <code>a | b</code>`` (PCS's Slurm versions)."""
    doc = service_model(service).shape_for(shape_name).members[member].documentation or ""
    found = re.search(r"Valid Values:\s*<code>([^<]*)</code>", doc)
    return [v.strip() for v in found.group(1).split("|") if v.strip()] if found else []


def check(service: str, op_name: str, document: Any, *, output: bool = False) -> Problems:
    """Every constraint of the operation's input (or output) shape that ``document`` breaks."""
    op = operation(service, op_name)
    if op is None:
        return [("", f"unknown operation {op_name}")]
    shape = op.output_shape if output else op.input_shape
    if shape is None:
        return []
    problems: Problems = []
    _walk(shape, document, "", problems, output)
    return problems


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:  # Java-only classes such as \p{L}: AWS checks them, this checker cannot
        return None


def _at(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _walk(shape: Shape, value: Any, path: str, problems: Problems, output: bool) -> None:
    where = path or "request"
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            problems.append((where, f"expected an object, got {type(value).__name__}"))
            return
        members = shape.members
        problems.extend((_at(path, name), "unknown member") for name in value if name not in members)
        problems.extend((_at(path, name), "is required") for name in shape.required_members
                        if value.get(name) is None)
        for name, member in members.items():
            if value.get(name) is not None:
                _walk(member, value[name], _at(path, name), problems, output)
    elif kind == "list":
        if not isinstance(value, list):
            problems.append((where, f"expected a list, got {type(value).__name__}"))
            return
        _bounds(shape, len(value), where, problems, "items")
        for index, item in enumerate(value):
            if item is None:
                problems.append((f"{where}[{index}]", "must not be null"))
            else:
                _walk(shape.member, item, f"{where}[{index}]", problems, output)
    elif kind == "map":
        if not isinstance(value, dict):
            problems.append((where, f"expected an object, got {type(value).__name__}"))
            return
        _bounds(shape, len(value), where, problems, "entries")
        for key, item in value.items():
            _walk(shape.key, key, f"{where}.{key}", problems, output)
            if item is None:
                problems.append((f"{where}.{key}", "must not be null"))
            else:
                _walk(shape.value, item, f"{where}.{key}", problems, output)
    elif kind == "string":
        if not isinstance(value, str):
            problems.append((where, f"expected a string, got {type(value).__name__}"))
            return
        if shape.enum and value not in shape.enum:
            problems.append((where, f"value {value!r} is not one of {', '.join(shape.enum)}"))
        _bounds(shape, len(value), where, problems, "characters")
        pattern = shape.metadata.get("pattern")
        compiled = _compiled(pattern) if pattern else None
        if compiled is not None and not compiled.search(value):
            problems.append((where, f"value {value!r} does not match pattern {pattern}"))
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append((where, f"expected an integer, got {type(value).__name__}"))
            return
        _bounds(shape, value, where, problems)
    elif kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append((where, f"expected a number, got {type(value).__name__}"))
            return
        _bounds(shape, value, where, problems)
    elif kind == "boolean":
        if not isinstance(value, bool):
            problems.append((where, f"expected a boolean, got {type(value).__name__}"))
    elif kind == "timestamp":
        # JSON protocols send epoch seconds; Query/EC2 send ISO 8601 text.
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            problems.append((where, f"expected a timestamp, got {type(value).__name__}"))
    elif kind == "blob" and not isinstance(value, (str, bytes)):
        problems.append((where, f"expected base64 text, got {type(value).__name__}"))


def _bounds(shape: Shape, size: float, where: str, problems: Problems, unit: str = "") -> None:
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    if unit:
        if low is not None and size < low:
            problems.append((where, f"must have at least {low} {unit}, has {size}"))
        if high is not None and size > high:
            problems.append((where, f"must have at most {high} {unit}, has {size}"))
        return
    if low is not None and size < low:
        problems.append((where, f"must be >= {low}, is {size}"))
    if high is not None and size > high:
        problems.append((where, f"must be <= {high}, is {size}"))


# -- Query / EC2 protocol -------------------------------------------------------------------------------


def from_query(service: str, op_name: str, params: dict[str, str]) -> tuple[dict[str, Any], Problems]:
    """Query parameters → the structure of the operation's input shape (values typed), plus every
    parameter the shape has no place for (AWS answers those with UnknownParameter)."""
    op = operation(service, op_name)
    if op is None or op.input_shape is None:
        return {}, []
    used: set[str] = {"Action", "Version"}
    ec2 = service_model(service).metadata.get("protocol") == "ec2"
    document = _read_structure(op.input_shape, params, "", used, ec2)
    unknown = [(key, "unknown parameter") for key in params if key not in used]
    return document, unknown


def _query_name(member: Shape, name: str, ec2: bool) -> str:
    if ec2:
        if "queryName" in member.serialization:
            return member.serialization["queryName"]
        located = member.serialization.get("name")
        return located[0].upper() + located[1:] if located else name
    return member.serialization.get("name", name)


def _read_structure(shape: Shape, params: dict[str, str], prefix: str, used: set[str], ec2: bool) -> dict:
    out: dict[str, Any] = {}
    for name, member in shape.members.items():
        value = _read(member, params, prefix + _query_name(member, name, ec2), used, ec2)
        if value is not None:
            out[name] = value
    return out


def _read(shape: Shape, params: dict[str, str], key: str, used: set[str], ec2: bool) -> Any:
    kind = shape.type_name
    if kind == "structure":
        if not any(k.startswith(key + ".") for k in params):
            return None
        return _read_structure(shape, params, key + ".", used, ec2)
    if kind == "list":
        flattened = ec2 or shape.serialization.get("flattened")
        base = key if flattened else key + ".member"
        items, index = [], 1
        while any(k == f"{base}.{index}" or k.startswith(f"{base}.{index}.") for k in params):
            items.append(_read(shape.member, params, f"{base}.{index}", used, ec2))
            index += 1
        return items if items else None
    if key not in params:
        return None
    used.add(key)
    return _typed(shape, params[key])


def _typed(shape: Shape, text: str) -> Any:
    kind = shape.type_name
    try:
        if kind in ("integer", "long"):
            return int(text)
        if kind in ("float", "double"):
            return float(text)
    except ValueError:
        return text  # left as text: the walk reports the wrong type
    if kind == "boolean":
        return {"true": True, "false": False}.get(text.lower(), text)
    return text
