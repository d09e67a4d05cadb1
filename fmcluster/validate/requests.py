"""Check rendered request documents against botocore's service models (PCS, EKS, EC2, IAM, FSx)."""

from __future__ import annotations

import functools
from typing import Any

import botocore.session
from botocore.model import ServiceModel

from fmcluster.checks import CheckResult
from fmcluster.engine.references import references, resolve
from fmcluster.render.documents import Document, RenderedDocuments
from fmcluster.validate.shapes import check_shape
from fmcluster.validate.stand_ins import stand_in


@functools.cache
def _service_model(service: str) -> ServiceModel:
    return botocore.session.get_session().get_service_model(service)


def with_stand_ins(body: Any) -> Any:
    """``body`` with every reference filled by its stand-in."""
    return resolve(body, {ref: stand_in(ref) for ref in references(body)})


def check_document(document: Document) -> list[str]:
    """Problems with one document, as ``Operation: message`` lines; [] when botocore accepts it."""
    body = with_stand_ins(document.body)
    model = _service_model(document.service)
    problems: list[str] = []
    for section, operation in document.operations.items():
        params = body if section == "" else body.get(section)
        if params is None:
            continue
        for item in params if isinstance(params, list) else [params]:
            problems.extend(f"{operation}: {p}" for p in check_request(model, operation, item))
    return problems


def check_request(model: ServiceModel, operation: str, params: dict[str, Any]) -> list[str]:
    """Every constraint of the operation's input shape: what botocore checks (types, required, unknown
    members) and what it leaves to the service (enums, patterns, lengths, ranges)."""
    input_shape = model.operation_model(operation).input_shape
    return [f"{path}: {message}" for path, message in check_shape(input_shape, params)]


def botocore_checks(rendered: RenderedDocuments, documents: list[Document] | None = None) -> CheckResult:
    """Every document (or ``documents``) against botocore's model of the service that takes it."""
    documents = rendered.documents if documents is None else documents
    problems = [f"{d.filename}: {p}" for d in documents for p in check_document(d)]
    services = sorted({d.service for d in documents})
    return CheckResult("botocore shapes", "failed" if problems else "passed",
                       f"{len(documents)} documents against the {', '.join(services)} models", problems)
