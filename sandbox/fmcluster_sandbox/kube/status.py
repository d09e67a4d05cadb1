"""Kubernetes API errors as the API server answers them: a ``Status`` object (meta/v1) with reason and code.

Reasons and codes follow k8s.io/apimachinery/pkg/api/errors (``NewNotFound``, ``NewAlreadyExists``,
``NewConflict``, ``NewInvalid``, ``NewBadRequest``, ``NewUnauthorized``, ``NewForbidden``,
``NewMethodNotSupported``) and the "Kubernetes API Concepts" page ("Status" and "Response status kind").
"""

from __future__ import annotations

import json
from typing import Any

JSON = {"Content-Type": "application/json"}


class KubeError(Exception):
    """An API error; ``response()`` is the server's ``(status, headers, body)``."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": self.message, "reason": self.reason, "code": self.code}
        if not self.reason:  # an error that is not a StatusError: the API server sends no reason
            out.pop("reason")
        if self.details is not None:
            out["details"] = self.details
        return out

    def response(self) -> tuple[int, dict[str, str], bytes]:
        return self.code, dict(JSON), json.dumps(self.status()).encode()


def not_found(plural: str, name: str, group: str = "") -> KubeError:
    qualified = f"{plural}.{group}" if group else plural
    return KubeError(404, "NotFound", f'{qualified} "{name}" not found',
                     {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural})


def no_route(path: str) -> KubeError:
    # An unknown path: the API server's 404 has no details, reason NotFound, message "the server could not
    # find the requested resource".
    return KubeError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(plural: str, name: str, group: str = "") -> KubeError:
    qualified = f"{plural}.{group}" if group else plural
    details = {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural}
    return KubeError(409, "AlreadyExists", f'{qualified} "{name}" already exists', details)


def conflict(plural: str, name: str, group: str = "") -> KubeError:
    qualified = f"{plural}.{group}" if group else plural
    details = {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural}
    return KubeError(409, "Conflict", f'Operation cannot be fulfilled on {qualified} "{name}": the object has been '
                     "modified; please apply your changes to the latest version and try again", details)


def invalid(kind: str, name: str, causes: list[tuple[str, str, str]], group: str = "") -> KubeError:
    """422 Invalid; each cause is ``(reason, field, message)`` (reasons as in field.ErrorType: FieldValueInvalid,
    FieldValueRequired, FieldValueNotSupported, ...)."""
    text = ", ".join(f"{field}: {message}" if field else message for _, field, message in causes)
    qualified = f"{kind}.{group}" if group else kind
    return KubeError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}',
                     {"name": name, "group": group, "kind": kind,
                      "causes": [{"reason": r, "message": m, "field": f} for r, f, m in causes]})


def bad_request(message: str) -> KubeError:
    return KubeError(400, "BadRequest", message)


def unauthorized(message: str = "Unauthorized") -> KubeError:
    return KubeError(401, "Unauthorized", message)


def forbidden(message: str, verb: str, plural: str, name: str = "", group: str = "") -> KubeError:
    details: dict[str, Any] = {"kind": plural}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return KubeError(403, "Forbidden", message, details)


def method_not_allowed(message: str) -> KubeError:
    return KubeError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> KubeError:
    return KubeError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                     f"accepted media types include: application/json, application/merge-patch+json, "
                     f"application/apply-patch+yaml (got {content_type!r})")
