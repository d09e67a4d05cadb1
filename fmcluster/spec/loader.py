"""Turn a spec file into a validated :class:`Spec`, or into errors that point at the file."""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from fmcluster.errors import SpecError, SpecProblem
from fmcluster.spec.models import Spec
from fmcluster.spec.positions import Path_, PositionedDocument, load_yaml_with_positions
from fmcluster.spec.rules import check_rules

# What a value should look like, for fields whose pydantic message would only quote a regex.
_PATTERN_HINTS = {
    "subnet_id": "a subnet id like subnet-0123456789abcdef0",
    "head_subnet_id": "a subnet id like subnet-0123456789abcdef0",
    "reservation_id": "a capacity reservation id like cr-0123456789abcdef0",
    "ami": "an AMI id like ami-0123456789abcdef0",
    "allowed_cidr": "a CIDR like 203.0.113.0/24 (or 2001:db8::/48 on the pcs backend)",
    "region": "an AWS region name like us-east-1",
    "mount": "an absolute path like /fsx",
    "s3_import": "an S3 URL like s3://bucket/prefix",
    "s3_export": "an S3 URL like s3://bucket/prefix",
    "existing_id": "an FSx file system id (fs- and 17 hex digits, like fs-0123456789abcdef0); for storage.home an "
                   "FSx for OpenZFS volume id (fsvol- and 17) or an EFS id (fs- and 8 or 17)",
    "scratch_mount": "an absolute path like /local_scratch",
    "password_secret_arn": "a Secrets Manager ARN",
    "notify": "an email address like ops@example.com",
}

# A union member that took the value's type but not its size: its own message says what is wrong.
_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}

# Fields typed as a union, with the one sentence that describes every accepted form.
_UNION_HINTS = {
    "nodes": "expected a node count (a whole number) or a range {min: N, max: M}",
    "placement_group": "expected auto, true or false",
    "metadata_iops": "expected auto or a number of IOPS (1500, 3000, 6000, 12000, then steps of 12000)",
    "efa": "expected true or false",
    "burn_in": "expected a level (quick, standard, long or off) or a mapping {level: …, floors: {<nodes>: <GB/s>}}",
}


@dataclass
class LoadedSpec:
    """A valid spec, the document it came from (for positions) and anything worth a warning."""

    spec: Spec
    document: PositionedDocument
    warnings: list[SpecProblem] = field(default_factory=list)


def parse_spec(path: str | Path) -> tuple[Spec, PositionedDocument]:
    """A spec file's shape checked (types, keys, values), before its rules: enough to know what it names."""
    document = load_yaml_with_positions(path)
    try:
        return Spec.model_validate(document.data), document
    except ValidationError as exc:
        raise SpecError(_translate(exc, document)) from None


def load_spec(path: str | Path) -> LoadedSpec:
    """Load and check a spec file. Raises :class:`SpecError` listing every problem with its position."""
    spec, document = parse_spec(path)
    errors, warnings = check_rules(spec, document)
    if errors:
        raise SpecError(errors)
    return LoadedSpec(spec=spec, document=document, warnings=warnings)


def load_spec_data(data: dict[str, Any], source: str) -> LoadedSpec:
    """Check spec data that did not come from a file (a spec changed by ``scale``) by the same rules as a
    file; problems name ``source`` instead of a line."""
    document = PositionedDocument(file=source, data=data)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_translate(exc, document)) from None
    errors, warnings = check_rules(spec, document)
    if errors:
        raise SpecError(errors)
    return LoadedSpec(spec=spec, document=document, warnings=warnings)


def _translate(exc: ValidationError, document: PositionedDocument) -> list[SpecProblem]:
    located = [(_data_path(error["loc"], document.data), error) for error in exc.errors(include_url=False)]
    paths = {path for (path, _), _ in located}
    problems: list[SpecProblem] = []
    seen: set[Path_] = set()
    for (path, in_union), error in located:
        # A union reports every member's complaint; keep the one that went deepest into the value.
        if path in seen or any(other[: len(path)] == path and other != path for other in paths):
            continue
        seen.add(path)
        field_name = next((p for p in reversed(path) if isinstance(p, str)), "")
        kind = error["type"]
        given = error.get("input")
        if kind == "extra_forbidden":
            problems.append(document.problem(path, _unknown_key_message(path), at_key=True))
        elif kind == "missing":
            parent = path[:-1]
            problems.append(document.problem(parent, f"required key '{path[-1]}' is missing"))
        elif in_union and field_name in _UNION_HINTS and kind not in _RANGE_ERRORS:
            problems.append(document.problem(path, f"{_UNION_HINTS[field_name]}, got {_show(given)}"))
        elif kind == "string_pattern_mismatch" and field_name in _PATTERN_HINTS:
            problems.append(document.problem(path, f"expected {_PATTERN_HINTS[field_name]}, got {_show(given)}"))
        elif kind == "literal_error":
            allowed = error.get("ctx", {}).get("expected", "")
            message = f"must be {allowed}, got {_show(given)}"
            choices = [c.strip().strip("'") for c in allowed.replace(" or ", ",").split(",") if c.strip()]
            close = difflib.get_close_matches(str(given), choices, n=1)
            if close:
                message += f" (did you mean '{close[0]}'?)"
            problems.append(document.problem(path, message))
        elif kind == "value_error":  # our own validators' sentences, which already say what was given
            problems.append(document.problem(path, _lower_first(str(error["msg"]).removeprefix("Value error, "))))
        else:
            problems.append(document.problem(path, f"{_lower_first(error['msg'])}, got {_show(given)}"))
    return problems


def _data_path(loc: tuple[Any, ...], data: Any) -> tuple[Path_, bool]:
    """Keep the parts of pydantic's ``loc`` that exist in the data; drop union-member tags."""
    path: list[str | int] = []
    node = data
    in_union = False
    for part in loc:
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and _names_a_field(path, part):
            # A missing or unknown key: it belongs in the path, the walk stops there.
            path.append(part)
            node = None
        else:
            in_union = True
    return tuple(path), in_union


def _names_a_field(path: list[str | int], key: str) -> bool:
    """True for a field name, False for a union-member tag such as ``int`` or ``NodeRange``."""
    model = _model_at(tuple(path))
    return model is None or key in model.model_fields


def _unknown_key_message(path: Path_) -> str:
    key = str(path[-1])
    model = _model_at(path[:-1])
    message = f"unknown key '{key}'"
    if model is not None:
        close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
        if close:
            message += f" (did you mean '{close[0]}'?)"
        else:
            message += f"; allowed here: {', '.join(model.model_fields)}"
    return message


def _model_at(path: Path_) -> type[BaseModel] | None:
    """The pydantic model class that describes the mapping at ``path`` in the spec."""
    current: Any = Spec
    for part in path:
        current = _unwrap(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else None
        elif isinstance(current, type) and issubclass(current, BaseModel) and part in current.model_fields:
            current = current.model_fields[part].annotation
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """Strip Optional/Union down to the one model (or list) inside, if there is one."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            inner = _unwrap(arg)
            if (isinstance(inner, type) and issubclass(inner, BaseModel)) or typing.get_origin(inner) is list:
                return inner
    if typing.get_origin(annotation) is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    return annotation


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
