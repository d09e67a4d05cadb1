"""The references between rendered documents, and how they are filled.

A document that needs an id AWS has not issued yet holds a reference such as ``${security_group.id}``.
The engine fills references at create time; ``validate`` fills them with well-formed stand-ins so the
documents can be checked against botocore's models offline. Neutral ground: the renderers write
references, the graph orders resources by them and the engine resolves them, and none of those imports another
for it.
"""

from __future__ import annotations

import base64
import re
from typing import Any

REFERENCE = re.compile(r"\$\{([a-z_]+(?:\.[A-Za-z0-9_-]+)*)\}")
# A value written as {Fn::Base64: text} is sent base64-encoded, after the references inside the text are
# filled (EC2 launch template user data): encoding at render time would hide those references.
BASE64 = "Fn::Base64"


def references(value: Any) -> set[str]:
    """Every ``${…}`` reference inside a document body."""
    found: set[str] = set()
    if isinstance(value, str):
        found.update(REFERENCE.findall(value))
    elif isinstance(value, dict):
        for item in value.values():
            found |= references(item)
    elif isinstance(value, list):
        for item in value:
            found |= references(item)
    return found


def resolve(value: Any, values: dict[str, Any], missing: Any = None) -> Any:
    """Replace references with ``values``; a string that is exactly one reference takes the value's type.

    A reference with no value raises KeyError, unless ``missing`` is given: then a whole-string reference
    becomes ``missing`` and so does any string with one inside (plans compare what is known so far)."""
    if isinstance(value, str):
        whole = REFERENCE.fullmatch(value)
        if whole:
            if whole.group(1) not in values and missing is not None:
                return missing
            return values[whole.group(1)]
        if missing is not None and any(ref not in values for ref in REFERENCE.findall(value)):
            return missing
        return REFERENCE.sub(lambda m: str(values[m.group(1)]), value)
    if isinstance(value, dict):
        if set(value) == {BASE64}:
            text = resolve(value[BASE64], values, missing)
            if missing is not None and text is missing:
                return missing
            return base64.b64encode(str(text).encode()).decode()
        return {key: resolve(item, values, missing) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, values, missing) for item in value]
    return value
