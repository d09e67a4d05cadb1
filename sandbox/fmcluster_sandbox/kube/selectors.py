"""``labelSelector`` and ``fieldSelector`` of list requests ("Labels and Selectors", "Field Selectors").

Label selectors: equality-based (``k=v``, ``k==v``, ``k!=v``) and set-based (``k in (a,b)``, ``k notin (a,b)``,
``k``, ``!k``), comma-separated requirements all of which must hold. Field selectors: ``metadata.name`` and
``metadata.namespace`` with ``=``, ``==`` or ``!=`` (the fields every resource supports).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fmcluster_sandbox.kube.status import bad_request

Matcher = Callable[[dict[str, Any]], bool]
_SET = re.compile(r"^\s*(?P<key>[^\s!=,()]+)\s+(?P<op>in|notin)\s+\((?P<values>[^)]*)\)\s*$")
_EQ = re.compile(r"^\s*(?P<key>[^\s!=,()]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=,()]*)\s*$")
_EXISTS = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=,()]+)\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def label_selector(selector: str) -> Matcher:
    checks: list[Matcher] = []
    for part in _split(selector or ""):
        if m := _SET.match(part):
            key, values = m["key"], {v.strip() for v in m["values"].split(",") if v.strip()}
            if m["op"] == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif m := _EQ.match(part):
            key, value = m["key"], m["value"]
            if m["op"] == "!=":
                checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif m := _EXISTS.match(part):
            key = m["key"]
            if m["neg"]:
                checks.append(lambda labels, k=key: k not in labels)
            else:
                checks.append(lambda labels, k=key: k in labels)
        else:
            raise bad_request(f"unable to parse requirement: {part.strip()!r} in label selector {selector!r}")
    return lambda obj: all(check((obj.get("metadata") or {}).get("labels") or {}) for check in checks)


def field_selector(selector: str) -> Matcher:
    checks: list[Matcher] = []
    for part in _split(selector or ""):
        m = _EQ.match(part)
        if not m or m["key"] not in ("metadata.name", "metadata.namespace"):
            raise bad_request(f'field label not supported: "{part.strip()}"')
        field, value, negate = m["key"].split(".")[1], m["value"], m["op"] == "!="
        checks.append(lambda obj, f=field, v=value, n=negate:
                      ((obj.get("metadata") or {}).get(f, "") == v) != n)
    return lambda obj: all(check(obj) for check in checks)
