"""What a backend method gets from the command that calls it, in place of the command's session: the cluster's
name, region and spec, the engine's context, where the nodes go, where warnings go, and a way to read what an
earlier run recorded and to record what this one decided. The backend never reaches the state store: the
command writes what it records (and a reading command, ``status``, writes nothing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fmcluster.aws.placement import Placement
    from fmcluster.engine import Context
    from fmcluster.spec.models import Spec


def _nothing_waits() -> set[str]:
    return set()


@dataclass
class BackendContext:
    name: str
    region: str
    ctx: Context  # the engine's context: AWS clients, published values, tags
    spec: Spec | None = None
    spec_file: str = "spec.yaml"
    # Where what the user should know (AWS's caution about sample AMIs) goes; backends never print.
    warn: Callable[[str], None] = field(default=lambda message: None, repr=False)
    # Where the nodes go, decided once by the command (and recorded by it); lazy: only what needs it asks.
    placement_of: Callable[[], Placement] | None = field(default=None, repr=False)
    # (kind, key) -> the outputs recorded for that decision by an earlier run, or None.
    recall: Callable[[str, str], dict[str, Any] | None] = field(default=lambda kind, key: None, repr=False)
    # (kind, key, physical id, outputs): a decision to keep for the next run; the command writes it.
    record: Callable[[str, str, str | None, dict[str, Any]], None] = field(default=lambda *_: None, repr=False)
    # The queues whose Capacity Block has not begun (their nodes cannot launch yet: waiting, not failing); the
    # command reads the blocks.
    queues_waiting: Callable[[], set[str]] = field(default=_nothing_waits, repr=False)
    # The kinds of every backend's own stack (``BackendProfile.stack_kind``): what such a stack made carries its
    # tags, and any backend's scan may meet it (the one that finds everything, on a cluster with no record).
    stack_kinds: frozenset[str] = frozenset()

    def require_spec(self) -> Spec:
        if self.spec is None:
            raise RuntimeError("this step needs the cluster's spec")
        return self.spec

    def placement(self) -> Placement:
        if self.placement_of is None:
            raise RuntimeError("this step needs the cluster's placement")
        return self.placement_of()
