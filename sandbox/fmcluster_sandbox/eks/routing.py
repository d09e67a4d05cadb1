"""REST-JSON requests back into operations and their input documents, from botocore's EKS model.

EKS names its operation by HTTP method and path (``GET /clusters/{name}``). Each operation's ``requestUri``
from the model becomes a pattern; URI labels, query-string members and the JSON body are put back under the
member names of the input shape, typed as the model says, so that :func:`model_check.check` sees the same
document botocore serialised. The path is split on the raw (still percent-encoded) URI, because a label such
as ``principalArn`` carries ``/`` encoded as ``%2F``.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any
from urllib.parse import parse_qs, unquote

from fmcluster_sandbox import model_check

SERVICE = "eks"


@functools.lru_cache(maxsize=1)
def _routes() -> list[tuple[str, list[str], str]]:
    model = model_check.service_model(SERVICE)
    routes = []
    for name in model.operation_names:
        http = model.operation_model(name).http
        path = http["requestUri"].split("?", 1)[0]
        routes.append((http["method"], [s for s in path.split("/") if s], name))
    # literal segments before labels: /clusters/{name}/addons wins over a label at the same place
    routes.sort(key=lambda r: (-len(r[1]), [s.startswith("{") for s in r[1]]))
    return routes


def match(method: str, raw_path: str) -> tuple[str, dict[str, str]] | None:
    """``(operation, {label: decoded value})`` for a request line, or None when no operation has that path."""
    segments = [unquote(s) for s in raw_path.split("?", 1)[0].split("/") if s]
    for op_method, pattern, name in _routes():
        if op_method != method or len(pattern) != len(segments):
            continue
        labels: dict[str, str] = {}
        for want, got in zip(pattern, segments, strict=True):
            if want.startswith("{"):
                labels[want.strip("{}+")] = got
            elif want != got:
                break
        else:
            return name, labels
    return None


def _typed(shape: Any, values: list[str]) -> Any:
    if shape.type_name == "list":
        return [_typed(shape.member, [v]) for v in values]
    value = values[-1]
    if shape.type_name in ("integer", "long"):
        return int(value) if re.fullmatch(r"-?\d+", value) else value
    if shape.type_name == "boolean":
        return {"true": True, "false": False}.get(value.lower(), value)
    return value


def document(operation: str, labels: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
    """The input document of ``operation``: labels, query string and body under their member names.

    Raises ``ValueError`` when the body is not a JSON object."""
    shape = model_check.operation(SERVICE, operation).input_shape
    out: dict[str, Any] = {}
    if body.strip():
        parsed = json.loads(body)
        if not isinstance(parsed, dict):
            raise ValueError("the request body must be a JSON object")
        out.update(parsed)
    if shape is None:
        return out
    params = parse_qs(query, keep_blank_values=True)
    for member_name, member in shape.members.items():
        location = member.serialization.get("location")
        wire = member.serialization.get("name", member_name)
        if location == "uri" and wire in labels:
            out[member_name] = labels[wire]
        elif location == "querystring" and wire in params:
            out[member_name] = _typed(member, params[wire])
    return out
