"""One read of AWS per resource while a command only looks: ``status``, ``diff``, and the plan ``create`` shows
before it asks.

Such a command reads a cluster three ways: the backend's ``describe`` (status, queues, nodes), ``discover`` (what
is tagged for the cluster, listed) and the plan (each resource of the spec read by its id). Inside
:func:`reading` the session's :class:`~fmcluster.engine.context.Context` holds a :class:`Snapshot` of what this pass
read, by kind and id: a discovery scan keeps every item it lists, and a read by id asks the snapshot before
AWS (:func:`kept`), or reads through it (:func:`once`) so that the next reader of the same item gets the same
answer.

Outside :func:`reading` there is no snapshot, and every read goes to AWS: the engine's walk, which writes,
always reads fresh (a snapshot kept past a write would plan the next write from a stale answer). ``create``
closes the pass before it asks, so nothing read there outlives the plan it showed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from fmcluster.engine.context import Context

T = TypeVar("T")
_ABSENT = object()  # a read that found nothing (kept too: "not there" is an answer as well)


class Snapshot:
    """What one read-only pass got from AWS: items by (kind, id), kind naming the AWS shape
    ("ec2.SecurityGroups", "pcs.ComputeNodeGroup"), id what a read asks for it by (an id, a name)."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._fetching: dict[tuple[str, str], threading.Lock] = {}

    def fetching(self, kind: str, ident: str) -> threading.Lock:
        """The lock a reader of (kind, ident) holds while it asks AWS: the plan reads several resources at once,
        and two of them asking for the same item must make one call, not two."""
        with self._lock:
            return self._fetching.setdefault((kind, ident), threading.Lock())

    def keep(self, kind: str, item: Any, idents: Iterable[str]) -> None:
        with self._lock:
            for ident in idents:
                if ident:
                    self._items[(kind, ident)] = _ABSENT if item is None else item

    def get(self, kind: str, ident: str) -> Any:
        """The item, None when the pass found it absent, :data:`MISSING` when the pass never read it."""
        with self._lock:
            item = self._items.get((kind, ident), MISSING)
        return None if item is _ABSENT else item


MISSING: Any = object()


@contextmanager
def reading(ctx: Context) -> Iterator[Snapshot]:
    """A read-only pass: reads inside share one :class:`Snapshot`; it is dropped on the way out."""
    previous = ctx.snapshot
    ctx.snapshot = snapshot = Snapshot()
    try:
        yield snapshot
    finally:
        ctx.snapshot = previous


def keep(ctx: Context, kind: str, item: Any, *idents: str) -> None:
    """Keep what a scan listed (or a read found) under each of ``idents``; nothing outside a pass."""
    if ctx.snapshot is not None:
        ctx.snapshot.keep(kind, item, idents)


def kept(ctx: Context, kind: str, ident: str | None) -> Any:
    """The item this pass already read under ``ident`` (None: read as absent), or :data:`MISSING`: read it."""
    if ctx.snapshot is None or not ident:
        return MISSING
    return ctx.snapshot.get(kind, ident)


def once(ctx: Context, kind: str, ident: str, fetch: Callable[[], T],
         aliases: Callable[[Any], Iterable[str]] = lambda item: ()) -> T:
    """``fetch()`` (a read of one item, None when absent) unless this pass has read it; the answer is kept under
    ``ident`` and ``aliases(item)`` (its id and its name: readers ask by either). An exception is not kept."""
    found = kept(ctx, kind, ident)
    if found is not MISSING or ctx.snapshot is None or not ident:
        return cast(T, found) if found is not MISSING else fetch()
    with ctx.snapshot.fetching(kind, ident):
        found = kept(ctx, kind, ident)  # another reader may have fetched it while this one waited
        if found is not MISSING:
            return cast(T, found)
        item = fetch()
        keep(ctx, kind, item, ident, *(aliases(item) if item is not None else ()))
        return item
