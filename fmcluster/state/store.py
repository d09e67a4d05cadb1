"""What fmcluster remembers between commands: clusters, their spec (as text: reading and checking it is
:mod:`fmcluster.spec.stored`), each resource's id and status, an event log, and a per-cluster lock. SQLite in
WAL mode under the state dir (``FMCLUSTER_HOME``); the file itself (opening, checks, schema versions,
permissions, errors) is :mod:`fmcluster.state.db`, the lock is :mod:`fmcluster.state.locks`.

AWS stays the source of truth; this is the index that lets a re-run resume and ``destroy`` find things.
Commands that only read open the store read-only, so they work on a state file they cannot write.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fmcluster.state import db as statedb
from fmcluster.state import locks
from fmcluster.state.db import EVENTS_KEPT, StateError
from fmcluster.state.locks import LockHeld

__all__ = ["EVENTS_KEPT", "ClusterRecord", "LockHeld", "ResourceRecord", "StateError", "StateStore", "home"]


def home() -> Path:
    override = os.environ.get("FMCLUSTER_HOME")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_state_dir("fmcluster"))


@dataclass
class ClusterRecord:
    name: str
    region: str
    backend: str
    spec: str  # the spec's YAML, as fmcluster saved it (or an older fmcluster, or a hand edit, left it)
    spec_path: str | None
    status: str
    created_at: float
    updated_at: float
    # Tagged on everything made for this cluster (fmcluster:cluster-id): what makes a resource its own.
    cluster_id: str = ""
    # Where the cluster lives when that is not AWS itself ("sandbox:<started>", an endpoint URL).
    endpoint_url: str = ""


@dataclass
class ResourceRecord:
    kind: str
    key: str
    id: str | None
    status: str
    outputs: dict[str, Any]


# Columns since schema version 2: a read-only command on an older file (which it cannot migrate) goes without.
_NEWER_CLUSTER_COLUMNS = ("cluster_id", "endpoint_url")


class StateStore:
    """Thread-safe: the engine records from worker threads. ``readonly`` stores never write the file."""

    def __init__(self, path: Path | None = None, readonly: bool = False):
        self.path = path or home() / "state.db"
        self.readonly = readonly
        self._lock = threading.Lock()
        self._db = statedb.open_database(self.path, readonly)
        with statedb.translated(self.path):
            present = {row[1] for row in self._db.execute("PRAGMA table_info(clusters)")}
        self._columns = ", ".join((*statedb.TABLES["clusters"], *(c for c in _NEWER_CLUSTER_COLUMNS if c in present)))

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:  # a reading command reached a write: a bug, said plainly rather than as sqlite's error
            raise StateError(f"internal error: a read-only command tried to change the state file {self.path}")
        with self._lock, statedb.translated(self.path):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock, statedb.translated(self.path):
            return self._db.execute(sql, args).fetchall()

    # clusters
    def save_cluster(self, name: str, region: str, backend: str, spec: str, spec_path: str | None,
                     status: str, cluster_id: str = "", endpoint_url: str = "") -> None:
        """Record a cluster and its spec text as given: commands record through
        :func:`fmcluster.spec.stored.record_cluster`, which refuses a spec that does not validate. An empty
        ``cluster_id`` keeps the recorded one."""
        now = time.time()
        with self._tx() as db:
            db.execute(
                f"INSERT INTO clusters ({self._columns}) VALUES (?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(name, region) DO UPDATE SET backend=excluded.backend, spec=excluded.spec, "
                "spec_path=excluded.spec_path, status=excluded.status, updated_at=excluded.updated_at, "
                "cluster_id=CASE WHEN excluded.cluster_id='' THEN clusters.cluster_id ELSE excluded.cluster_id END, "
                "endpoint_url=excluded.endpoint_url",
                (name, region, backend, spec, spec_path, status, now, now, cluster_id, endpoint_url))

    def set_cluster_status(self, name: str, region: str, status: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE clusters SET status=?, updated_at=? WHERE name=? AND region=?",
                       (status, time.time(), name, region))

    def cluster(self, name: str, region: str | None = None) -> ClusterRecord | None:
        if region:
            rows = self._rows(f"SELECT {self._columns} FROM clusters WHERE name=? AND region=?", (name, region))
        else:
            rows = self._rows(f"SELECT {self._columns} FROM clusters WHERE name=? ORDER BY updated_at DESC "
                              "LIMIT 1", (name,))
        return _record(rows[0]) if rows else None

    def clusters(self) -> list[ClusterRecord]:
        return [_record(row) for row in self._rows(f"SELECT {self._columns} FROM clusters ORDER BY name")]

    def forget_cluster(self, name: str, region: str) -> None:
        with self._tx() as db:
            for table in ("clusters", "resources", "intents"):
                column = "name" if table == "clusters" else "cluster"
                db.execute(f"DELETE FROM {table} WHERE {column}=? AND region=?", (name, region))

    # resources
    def record_resource(self, cluster: str, region: str, kind: str, key: str, resource_id: str | None,
                        status: str, outputs: dict[str, Any] | None = None) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO resources (cluster, region, kind, key, id, status, outputs, updated_at) "
                "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(cluster, region, kind, key) DO UPDATE "
                "SET id=COALESCE(excluded.id, resources.id), status=excluded.status, "
                "outputs=CASE WHEN excluded.outputs='{}' THEN resources.outputs ELSE excluded.outputs END, "
                "updated_at=excluded.updated_at",
                (cluster, region, kind, key, resource_id, status, json.dumps(outputs or {}), time.time()))

    def resources(self, cluster: str, region: str) -> list[ResourceRecord]:
        rows = self._rows("SELECT kind, key, id, status, outputs FROM resources WHERE cluster=? AND region=? "
                          "ORDER BY rowid", (cluster, region))
        return [ResourceRecord(kind, key, rid, status, _outputs(outputs)) for kind, key, rid, status, outputs in rows]

    def resource(self, cluster: str, region: str, kind: str, key: str) -> ResourceRecord | None:
        rows = self._rows("SELECT kind, key, id, status, outputs FROM resources WHERE cluster=? AND region=? AND "
                          "kind=? AND key=?", (cluster, region, kind, key))
        return ResourceRecord(rows[0][0], rows[0][1], rows[0][2], rows[0][3], _outputs(rows[0][4])) if rows else None

    def forget_resource(self, cluster: str, region: str, kind: str, key: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM resources WHERE cluster=? AND region=? AND kind=? AND key=?",
                       (cluster, region, kind, key))

    # idempotency tokens
    def open_intent(self, cluster: str, region: str, resource: str, operation: str, digest: str) -> str:
        """The token for one intended request, recorded before the call: the open intent's token when this is
        the same request again (a retry after a crash), else a new one."""
        import uuid

        with self._tx() as db:
            row = db.execute("SELECT operation, digest, token FROM intents WHERE cluster=? AND region=? AND "
                             "resource=?", (cluster, region, resource)).fetchone()
            if row and row[0] == operation and row[1] == digest:
                return row[2]
            token = uuid.uuid4().hex
            db.execute("INSERT OR REPLACE INTO intents VALUES (?,?,?,?,?,?,?)",
                       (cluster, region, resource, operation, digest, token, time.time()))
            return token

    def close_intents(self, cluster: str, region: str, resource: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM intents WHERE cluster=? AND region=? AND resource=?", (cluster, region, resource))

    # events: the newest EVENTS_KEPT per cluster are kept
    def log_event(self, cluster: str, region: str, resource: str, event: str, detail: str = "") -> None:
        with self._tx() as db:
            db.execute("INSERT INTO events (cluster, region, at, resource, event, detail) VALUES (?,?,?,?,?,?)",
                       (cluster, region, time.time(), resource, event, detail))
            db.execute(statedb.PRUNE_EVENTS, {"cluster": cluster, "region": region, "keep": EVENTS_KEPT})

    def events(self, cluster: str, region: str, limit: int = 50) -> list[tuple[float, str, str, str]]:
        rows = self._rows("SELECT at, resource, event, detail FROM events WHERE cluster=? AND region=? "
                          "ORDER BY seq DESC LIMIT ?", (cluster, region, limit))
        return list(reversed(rows))

    # locks
    @contextmanager
    def locked(self, cluster: str, region: str, command: str, force: bool = False,
               warn: Callable[[str], None] | None = None) -> Iterator[None]:
        """Hold the cluster's lock (a file lock that dies with this process), or raise :class:`LockHeld`
        naming the holder. ``force`` takes it over from a live holder, calling ``warn`` first."""
        with locks.holding(self.path.parent / "locks", cluster, region, command, force, warn):
            yield


def _record(row: tuple) -> ClusterRecord:
    return ClusterRecord(*row)


def _outputs(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
