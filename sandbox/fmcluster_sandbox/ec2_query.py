"""Responses in the EC2 query protocol, for the EC2 actions the sandbox serves itself."""

from __future__ import annotations

import uuid
from xml.sax.saxutils import escape

NAMESPACE = "http://ec2.amazonaws.com/doc/2016-11-15/"


def ok(root: str, inner: str) -> tuple[int, dict, bytes]:
    body = f'<{root} xmlns="{NAMESPACE}"><requestId>{uuid.uuid4()}</requestId>{inner}</{root}>'
    return 200, {"Content-Type": "text/xml"}, body.encode()


def error(code: str, message: str) -> tuple[int, dict, bytes]:
    body = (f"<Response><Errors><Error><Code>{code}</Code><Message>{escape(message)}</Message></Error></Errors>"
            f"<RequestID>{uuid.uuid4()}</RequestID></Response>")
    return 400, {"Content-Type": "text/xml"}, body.encode()


def tag_set(tags: dict[str, str]) -> str:
    items = "".join(f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>" for k, v in tags.items())
    return f"<tagSet>{items}</tagSet>"
