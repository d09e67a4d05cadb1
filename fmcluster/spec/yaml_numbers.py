"""Numbers that YAML 1.1 reads differently from YAML 1.2 (and from the person who wrote them).

PyYAML implements YAML 1.1, whose plain integers include octal (``010`` is 8), hexadecimal (``0x2``), binary
(``0b10``), digit groups (``1_0`` is 10) and base 60 (``1:30`` is 90); its floats take ``_`` and ``:`` too.
YAML 1.2 (the core schema every other modern parser uses) reads only decimal. A spec that says
``nodes: 010`` must not quietly make an 8-node cluster, so such numbers are refused with a hint at their
position instead of being read one way here and another way elsewhere.
"""

from __future__ import annotations

import re

_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_DECIMAL = re.compile(r"[-+]?(0|[1-9][0-9]*)")
_WHY = "YAML 1.2 integers are decimal"


def yaml11_number_problem(tag: str, text: str, value: object) -> str | None:
    """Why the plain scalar ``text``, which PyYAML resolved to ``value`` under ``tag``, is refused; None if
    YAML 1.1 and YAML 1.2 read it the same."""
    if tag == _INT_TAG and not _DECIMAL.fullmatch(text):
        return f"{text!r} is not a decimal integer: {_int_hint(text, value)} ({_WHY}; quote it if it is text)"
    if tag == _FLOAT_TAG and ("_" in text or ":" in text):
        how = "base 60" if ":" in text else "a number with digit groups"
        return (f"{text!r} is read by YAML 1.1 as {how}, {value!r}: write {value!r} "
                "(YAML 1.2 numbers have no '_' or ':'; quote it if it is text)")
    return None


def _int_hint(text: str, value: object) -> str:
    digits = text.lstrip("+-")
    sign = "-" if text.startswith("-") else ""
    if ":" in digits:
        return f"YAML 1.1 reads it as base 60, {value}; write {value}"
    if "_" in digits:
        return f"write {value} without the '_'"
    if digits[:2].lower() == "0x":
        return f"YAML 1.1 reads it as hexadecimal {value}; write {value}"
    if digits[:2].lower() == "0b":
        return f"YAML 1.1 reads it as binary {value}; write {value}"
    decimal = sign + (digits.lstrip("0") or "0")
    if decimal == str(value):
        return f"write {value} without the leading zeros"
    return f"YAML 1.1 reads it as octal {value}; write {decimal}, or {value} if you meant octal"
