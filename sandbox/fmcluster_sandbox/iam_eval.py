"""IAM policy evaluation for what the sandbox does as a role on a user's behalf (a schedule's execution role).

AWS's logic ("Policy evaluation logic", IAM User Guide), within one account and for identity policies only: an
explicit Deny in any statement that applies wins; otherwise an Allow that applies allows; otherwise the request is
implicitly denied. A statement applies when its Action (or NotAction) matches the action (case-insensitive, ``*``
and ``?`` wildcards), its Resource (or NotResource) matches the resource ARN (case-sensitive) and every condition
holds for the request context.

moto's own evaluator (moto/iam/access_control.py) does not fit: it treats an Allow whose condition fails as an
explicit Deny, and a condition key absent from the request as satisfied (AWS: not satisfied, unless ...IfExists).

Conditions evaluated: StringEquals, StringNotEquals, StringEqualsIgnoreCase, StringLike, StringNotLike, ArnEquals,
ArnLike, ArnNotEquals, ArnNotLike, Null, each with ...IfExists, on single-valued keys. Not evaluated (a statement
that uses them never applies, and the outcome says so): the ForAnyValue:/ForAllValues: set operators, numeric, date,
Bool and IP operators, and policy variables (``${aws:username}``). Not emulated: resource-based policies,
permissions boundaries, session policies and SCPs.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

_STRING_OPERATORS = {
    "StringEquals": lambda want, have: have == want,
    "StringEqualsIgnoreCase": lambda want, have: have.lower() == want.lower(),
    "StringLike": lambda want, have: _wildcard(want, have),
    "ArnEquals": lambda want, have: have == want,
    "ArnLike": lambda want, have: _wildcard(want, have),
}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike", "ArnNotEquals": "ArnEquals",
            "ArnNotLike": "ArnLike"}


class Unsupported(Exception):
    """A condition the sandbox cannot evaluate."""


def _wildcard(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE if ignore_case else 0) is not None


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _condition_holds(operator: str, key: str, wanted: list[str], context: dict[str, str]) -> bool:
    if_exists = operator.endswith("IfExists")
    base = operator[:-len("IfExists")] if if_exists else operator
    have = next((v for k, v in context.items() if k.lower() == key.lower()), None)
    if base == "Null":
        return (have is None) == (str(wanted[0]).lower() == "true")
    if have is None:
        # A missing key fails every operator, negated ones included, unless ...IfExists (IAM User Guide,
        # "Condition operators": "...IfExists condition operators").
        return if_exists
    if base in _NEGATED:
        return not any(_STRING_OPERATORS[_NEGATED[base]](w, have) for w in wanted)
    if base in _STRING_OPERATORS:
        return any(_STRING_OPERATORS[base](w, have) for w in wanted)
    raise Unsupported(f"condition operator {operator} is not evaluated by the sandbox")


def _applies(statement: dict[str, Any], action: str, resource: str, context: dict[str, str]) -> bool:
    if "NotAction" in statement:
        if any(_wildcard(p, action, ignore_case=True) for p in _listed(statement["NotAction"])):
            return False
    elif not any(_wildcard(p, action, ignore_case=True) for p in _listed(statement.get("Action"))):
        return False
    if "NotResource" in statement:
        if any(_wildcard(p, resource) for p in _listed(statement["NotResource"])):
            return False
    elif not any(_wildcard(p, resource) for p in _listed(statement.get("Resource"))):
        return False
    for operator, block in (statement.get("Condition") or {}).items():
        if ":" in operator:  # ForAnyValue:/ForAllValues:
            raise Unsupported(f"condition operator {operator} is not evaluated by the sandbox")
        for key, wanted in block.items():
            if not _condition_holds(operator, key, _listed(wanted), context):
                return False
    return True


def evaluate(documents: list[Any], action: str, resource: str, context: dict[str, str]) -> tuple[bool, str]:
    """``(allowed, why)`` for ``action`` on ``resource`` under these identity policy documents."""
    allowed = False
    for document in documents:
        policy = json.loads(document) if isinstance(document, str) else document
        statements = policy.get("Statement", [])
        for statement in [statements] if isinstance(statements, dict) else statements:
            try:
                applies = _applies(statement, action, resource, context)
            except Unsupported as exc:
                return False, str(exc)
            if applies and statement.get("Effect") == "Deny":
                return False, f"explicit deny of {action} on {resource}"
            allowed = allowed or (applies and statement.get("Effect") == "Allow")
    if allowed:
        return True, f"{action} on {resource} allowed"
    return False, f"no identity-based policy allows {action} on {resource}"


def trusts_service(trust_policy: Any, service: str, context: dict[str, str]) -> bool:
    """Whether a role's trust policy lets ``service`` (e.g. ``scheduler.amazonaws.com``) call sts:AssumeRole."""
    policy = json.loads(trust_policy) if isinstance(trust_policy, str) else trust_policy
    statements = (policy or {}).get("Statement", [])
    allowed = False
    for statement in [statements] if isinstance(statements, dict) else statements:
        principal = statement.get("Principal") or {}
        services = _listed(principal.get("Service")) if isinstance(principal, dict) else []
        if service not in services and principal != "*":
            continue
        actions = _listed(statement.get("Action"))
        if not any(fnmatch.fnmatchcase("sts:assumerole", a.lower()) for a in actions):
            continue
        try:
            holds = all(_condition_holds(op, key, _listed(wanted), context)
                        for op, block in (statement.get("Condition") or {}).items() for key, wanted in block.items())
        except Unsupported:
            holds = False
        if holds and statement.get("Effect") == "Deny":
            return False
        allowed = allowed or (holds and statement.get("Effect") == "Allow")
    return allowed
