"""The value of an attribute AWS has not issued yet: plans are computed before anything exists."""

from __future__ import annotations


class Unknown:
    """A value AWS issues only when a resource this one depends on is made ("known after apply")."""

    def __repr__(self) -> str:
        return "(known after apply)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unknown)

    def __hash__(self) -> int:
        return 0


UNKNOWN = Unknown()
