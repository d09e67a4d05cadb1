"""``fmcluster logs``: the cluster's own event log from the state store, then what the backend logs in AWS
(``cluster_logs(context, since, lines)`` of each backend), as one time-ordered stream."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterable

from fmcluster.backends.protocol import LogLine
from fmcluster.connection import aws
from fmcluster.extras import MissingExtra
from fmcluster.state.store import StateStore
from fmcluster.verbs.lifecycle.common import open_cluster


def render(line: LogLine) -> str:
    stamp = datetime.datetime.fromtimestamp(line.at, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp}  {line.source}  {line.text}"


def fmcluster_events(store: object, name: str, region: str, limit: int) -> list[LogLine]:
    rows = store.events(name, region, limit=limit)  # type: ignore[attr-defined]
    return [LogLine(at, "fmcluster", " ".join(p for p in (resource, event, detail.replace("\n", " | ")) if p))
            for at, resource, event, detail in rows]


@aws.read_only()
def stream(name: str, follow: bool, lines: int, emit: Callable[[LogLine], None],
           note: Callable[[str], None], interval: float = 5.0) -> None:
    """Print what is logged so far; with ``follow``, keep polling until Ctrl-C."""
    store = StateStore(readonly=True)
    session = open_cluster(store, name)
    record = session.record
    try:
        backend = session.backend
    except MissingExtra as exc:  # fmcluster's own log needs no backend: show it, and say what the rest needs
        backend = None
        note(f"only fmcluster's own events: the backend's logs need {exc.hint}")
    seen: set[LogLine] = set()
    since: float | None = None
    notes_said: set[str] = set()
    while True:
        own = fmcluster_events(store, name, record.region, limit=lines if since is None else 10_000)
        backend, notes = backend.cluster_logs(session.context, since, lines) if backend else ([], [])
        for text in notes:
            if text not in notes_said:
                note(text)
                notes_said.add(text)
        fresh = sorted(line for line in _merge(own, backend) if line not in seen and (since is None or
                                                                                      line.at >= since - 1))
        for line in fresh:
            emit(line)
            seen.add(line)
        if fresh:
            since = max(since or 0.0, fresh[-1].at)
        elif since is None:
            since = time.time()
        if not follow:
            return
        time.sleep(interval)


def _merge(*groups: Iterable[LogLine]) -> list[LogLine]:
    return [line for group in groups for line in group]
