"""Checks JSON documents against botocore's PCS service model, the way PCS's front end does.

``check_input`` walks an operation's input shape and reports every violation (unknown members,
missing required members, types, enums, string lengths and patterns, numeric ranges, list and map
sizes) as ``(field path, message)`` pairs for a ``ValidationException``'s ``fieldList``.
``check_output`` walks an output shape so the emulator can refuse to answer with a malformed document.
Patterns follow Smithy semantics: they are searched, not implicitly anchored.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import botocore.session
from botocore.model import OperationModel, ServiceModel

from fmcluster.validate.shapes import check_shape


@functools.lru_cache(maxsize=1)
def service_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("pcs")


def operation(name: str) -> OperationModel | None:
    model = service_model()
    if name not in model.operation_names:
        return None
    return model.operation_model(name)


def documented_values(shape_name: str, member: str) -> list[str]:
    """Values listed as ``Valid Values: <code>a | b</code>`` in a member's documentation."""
    shape = service_model().shape_for(shape_name)
    doc = shape.members[member].documentation or ""
    found = re.search(r"Valid Values:\s*<code>([^<]*)</code>", doc)
    if not found:
        return []
    return [v.strip() for v in found.group(1).split("|") if v.strip()]


def error_shape_names() -> list[str]:
    return [shape.name for shape in service_model().error_shapes]


def check_input(op_name: str, params: Any) -> list[tuple[str, str]]:
    op = operation(op_name)
    if op is None:
        return [("", f"unknown operation {op_name}")]
    return check_shape(op.input_shape, params, is_input=True)


def check_output(op_name: str, document: Any) -> list[tuple[str, str]]:
    op = operation(op_name)
    if op is None or op.output_shape is None:
        return []
    return check_shape(op.output_shape, document, is_input=False)
