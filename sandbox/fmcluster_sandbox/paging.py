"""The opaque nextToken the emulators hand out: an offset into the listing, base64url JSON."""

from __future__ import annotations

import base64
import json


def offset(token: str | None) -> int:
    """Where a listing resumes; ValueError for a token no listing of this sandbox handed out."""
    if not token:
        return 0
    try:
        start = int(json.loads(base64.urlsafe_b64decode(token.encode()))["offset"])
    except Exception as exc:
        raise ValueError(token) from exc
    if start < 0:
        raise ValueError(token)
    return start


def token(next_offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": next_offset}).encode()).decode()
