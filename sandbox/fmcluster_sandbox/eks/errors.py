"""EKS's error responses (REST-JSON), with the HTTP status botocore's EKS model gives each error shape."""

from __future__ import annotations

import json
import uuid
from typing import Any

from fmcluster_sandbox import model_check


class EksError(Exception):
    """One EKS error: its shape name (``InvalidParameterException`` …), message and the shape's extra members
    (``clusterName``, ``nodegroupName``, ``addonName``)."""

    def __init__(self, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = {k: v for k, v in extra.items() if v is not None}

    def response(self) -> tuple[int, dict[str, str], bytes]:
        status = 400
        model = model_check.service_model("eks")
        if self.code in model.shape_names:
            status = model.shape_for(self.code).metadata.get("error", {}).get("httpStatusCode", 400)
        headers = {"Content-Type": "application/json", "x-amzn-ErrorType": self.code,
                   "x-amzn-RequestId": str(uuid.uuid4())}
        return status, headers, json.dumps({"message": self.message, **self.extra}).encode()


def invalid(message: str, **extra: Any) -> EksError:
    return EksError("InvalidParameterException", message, **extra)


def invalid_request(message: str, **extra: Any) -> EksError:
    return EksError("InvalidRequestException", message, **extra)


def in_use(message: str, **extra: Any) -> EksError:
    return EksError("ResourceInUseException", message, **extra)


def not_found(message: str, **extra: Any) -> EksError:
    return EksError("ResourceNotFoundException", message, **extra)
