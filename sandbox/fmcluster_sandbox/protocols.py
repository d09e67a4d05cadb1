"""How the sandbox reads AWS requests and writes AWS errors, protocol by protocol.

Requests are routed the way AWS routes them: by the SigV4 credential scope (service and Region), the
``X-Amz-Target`` header (JSON protocols), the ``Action`` parameter (Query and EC2 protocols) or the S3 path.
Throttling answers in each protocol's own form so botocore's retry logic recognises it.
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any
from urllib.parse import parse_qs


def credential_scope(environ: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(access_key, region, service)`` from the SigV4 Authorization header or presigned query."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    cred = None
    if "Credential=" in auth:
        cred = auth.split("Credential=", 1)[1].split(",", 1)[0].strip()
    else:
        qs = parse_qs(environ.get("QUERY_STRING", ""))
        if "X-Amz-Credential" in qs:
            cred = qs["X-Amz-Credential"][0]
    if not cred:
        return None, None, None
    parts = cred.split("/")
    if len(parts) != 5:
        return None, None, None
    return parts[0], parts[2], parts[3].lower()


def read_body(environ: dict[str, Any]) -> bytes:
    """Read the request body and put it back so that moto can read it again."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


def query_params(environ: dict[str, Any]) -> dict[str, str]:
    """Query-protocol parameters (URL query plus a form-encoded body)."""
    params = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    ctype = environ.get("CONTENT_TYPE", "")
    if environ.get("REQUEST_METHOD") == "POST" and ctype.startswith("application/x-www-form-urlencoded"):
        body = read_body(environ).decode("utf-8", "replace")
        params.update({k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()})
    return params


def s3_operation(environ: dict[str, Any]) -> str:
    method = environ.get("REQUEST_METHOD", "GET")
    path = environ.get("PATH_INFO", "/").strip("/")
    host = environ.get("HTTP_HOST", "")
    virtual = host.count(".") >= 1 and not host.split(":")[0].replace(".", "").isdigit()
    has_key = ("/" in path) if not virtual else bool(path)
    if not path and not virtual:
        return "ListBuckets"
    if has_key:
        return {"GET": "GetObject", "PUT": "PutObject", "DELETE": "DeleteObject", "HEAD": "HeadObject"}.get(
            method, method)
    return {"GET": "ListObjects", "PUT": "CreateBucket", "DELETE": "DeleteBucket", "HEAD": "HeadBucket"}.get(
        method, method)


def request_id() -> str:
    return str(uuid.uuid4())


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def ec2_error_xml(code: str, message: str, rid: str | None = None) -> bytes:
    rid = rid or request_id()
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            f"<Code>{code}</Code><Message>{_xml_escape(message)}</Message></Error></Errors>"
            f"<RequestID>{rid}</RequestID></Response>").encode()


def throttle_response(service: str, protocol: str) -> tuple[int, dict[str, str], bytes]:
    """The error AWS sends when it throttles, in the protocol the caller speaks.

    ``protocol`` is one of ``json`` (awsJson 1.0/1.1), ``rest-json``, ``ec2``, ``query`` or ``s3``.
    """
    rid = request_id()
    if protocol == "json":
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
        return 400, {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": rid}, body
    if protocol == "rest-json":
        body = json.dumps({"message": "Rate exceeded"}).encode()
        return 429, {"Content-Type": "application/json", "x-amzn-ErrorType": "ThrottlingException",
                     "x-amzn-RequestId": rid}, body
    if protocol == "ec2":
        return 503, {"Content-Type": "text/xml;charset=UTF-8"}, ec2_error_xml(
            "RequestLimitExceeded", "Request limit exceeded.", rid)
    if protocol == "s3":
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                "<Message>Please reduce your request rate.</Message>"
                f"<RequestId>{rid}</RequestId><HostId>{rid}</HostId></Error>").encode()
        return 503, {"Content-Type": "application/xml", "x-amz-request-id": rid}, body
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse><Error><Type>Sender</Type>'
            "<Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
            f"<RequestId>{rid}</RequestId></ErrorResponse>").encode()
    return 400, {"Content-Type": "text/xml", "x-amzn-RequestId": rid}, body


def model_refusal(service: str, operation: str, body: bytes, code: str) -> tuple[int, dict[str, str], bytes] | None:
    """For a JSON-protocol service moto answers unchecked: the error AWS's front end sends for a request that breaks
    botocore's model (``code``, as the service's API reference names it), or None when the request is well formed."""
    from fmcluster_sandbox import model_check

    try:
        document = json.loads(body or b"{}")
    except ValueError as exc:
        problems = [("request", f"cannot parse the body: {exc}")]
    else:
        problems = model_check.check(service, operation, document)
    if not problems:
        return None
    message = "; ".join(f"{field}: {text}" for field, text in problems)
    return 400, {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": request_id()}, json.dumps(
        {"__type": code, "Message": message}).encode()
