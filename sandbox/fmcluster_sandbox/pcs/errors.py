"""PCS's error responses (awsJson1_0), with the HTTP codes PCS documents for its error shapes."""

from __future__ import annotations

import json
import uuid
from typing import Any

# The PCS model carries no httpStatusCode on its error shapes; these are PCS's documented codes.
ERROR_STATUS = {
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "ResourceNotFoundException": 404,
    "ConflictException": 409,
    "ServiceQuotaExceededException": 402,
    "ThrottlingException": 429,
    "InternalServerException": 500,
}
RESOURCE_TYPE = {"cluster": "cluster", "compute_node_group": "computeNodeGroup", "queue": "queue"}


class PcsError(Exception):
    def __init__(self, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra

    def response(self) -> tuple[int, dict[str, str], bytes]:
        body = {"__type": self.code, "message": self.message, **self.extra}
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "x-amzn-ErrorType": self.code,
            "x-amzn-RequestId": str(uuid.uuid4()),
        }
        return ERROR_STATUS.get(self.code, 400), headers, json.dumps(body).encode()


def validation(message: str, fields: list[tuple[str, str]] | None = None,
               reason: str = "fieldValidationFailed") -> PcsError:
    extra: dict[str, Any] = {"reason": reason}
    if fields:
        extra["fieldList"] = [{"name": name, "message": msg} for name, msg in fields]
    return PcsError("ValidationException", message, **extra)


def field_error(field: str, message: str) -> PcsError:
    """A ValidationException about one field, with the message in both places."""
    return validation(message, [(field, message)])


def not_found(kind: str, ident: str) -> PcsError:
    return PcsError("ResourceNotFoundException", f"{RESOURCE_TYPE[kind]} {ident} not found",
                    resourceId=ident, resourceType=RESOURCE_TYPE[kind])


def conflict(kind: str, ident: str, message: str) -> PcsError:
    return PcsError("ConflictException", message, resourceId=ident, resourceType=RESOURCE_TYPE[kind])


def quota(message: str, kind: str, ident: str, quota_code: str) -> PcsError:
    return PcsError("ServiceQuotaExceededException", message, serviceCode="pcs", resourceId=ident,
                    resourceType=RESOURCE_TYPE[kind], quotaCode=quota_code)
