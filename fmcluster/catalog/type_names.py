"""Instance type names as text: whether one is shaped like an EC2 type (``family.size``), and the common
non-accelerated types a did-you-mean may offer. Says nothing about whether AWS sells a type."""

from __future__ import annotations

import re

# Common non-accelerated types (head / login nodes), for did-you-mean only: no facts are claimed.
_COMMON_FAMILIES = (
    "m7i", "m7i-flex", "c7i", "r7i", "m6i", "c6i", "r6i", "m7a", "c7a", "r7a", "m6a", "c6a",
    "m7g", "c7g", "r7g", "m5", "c5", "r5", "m5n", "c5n", "c6in", "c7gn", "t3", "t3a",
)  # fmt: skip
_COMMON_SIZES = ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")
_T3_SIZES = ("nano", "micro", "small", "medium", "large", "xlarge", "2xlarge")
_FLEX_SIZES = ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge")


def _common_types() -> tuple[str, ...]:
    names: list[str] = []
    for fam in _COMMON_FAMILIES:
        if fam.startswith("t3"):
            sizes: tuple[str, ...] = _T3_SIZES
        elif fam.endswith("-flex"):
            sizes = _FLEX_SIZES
        else:
            sizes = _COMMON_SIZES
        names.extend(f"{fam}.{s}" for s in sizes)
    # Accelerated types outside the catalog that users commonly type.
    names.extend(["trn1n.32xlarge", "g5.48xlarge", "g6e.48xlarge", "p4de.24xlarge"])
    return tuple(dict.fromkeys(names))


COMMON_EC2_TYPES: tuple[str, ...] = _common_types()


_FAMILY_RE = r"[a-z]+[a-z0-9]*(?:-[a-z0-9]+)*"
_SIZE_RE = r"(?:nano|micro|small|medium|large|xlarge|[1-9][0-9]*xlarge|metal(?:-[1-9][0-9]*xl)?)"
_TYPE_RE = re.compile(rf"(?P<family>{_FAMILY_RE})\.(?P<size>{_SIZE_RE})")


def is_valid_ec2_type_name(name: str) -> bool:
    """Syntactic check of an EC2 instance type name (``family.size``); says nothing about existence.

    The family is lower-case letters and digits containing at least one digit, optionally followed
    by ``-suffix`` parts (``p6-b200``, ``p6e-gb200``, ``m7i-flex``, ``u-6tb1``); the size is
    ``nano|micro|small|medium|large|xlarge|<N>xlarge|metal|metal-<N>xl``.
    """
    if not isinstance(name, str):
        return False
    m = _TYPE_RE.fullmatch(name)
    return bool(m and any(c.isdigit() for c in m.group("family")))
