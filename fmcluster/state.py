"""What fmcluster remembers between commands: clusters, their spec, each resource's id and status, an
event log, and a per-cluster lock. SQLite in WAL mode under the state dir (``FMCLUSTER_HOME``).

AWS stays the source of truth; this is the index that lets a re-run resume and ``destroy`` find things.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fmcluster.errors import FmclusterError
from fmcluster.processes import pid_alive

SCHEMA = """
CREATE TABLE IF NOT EXISTS clusters (
    name TEXT NOT NULL, region TEXT NOT NULL, backend TEXT NOT NULL, spec TEXT NOT NULL,
    spec_path TEXT, status TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    cluster_id TEXT NOT NULL DEFAULT '', endpoint_url TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (name, region));
CREATE TABLE IF NOT EXISTS resources (
    cluster TEXT NOT NULL, region TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,
    id TEXT, status TEXT NOT NULL, outputs TEXT NOT NULL DEFAULT '{}', updated_at REAL NOT NULL,
    PRIMARY KEY (cluster, region, kind, key));
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster TEXT NOT NULL, region TEXT NOT NULL, at REAL NOT NULL,
    resource TEXT NOT NULL, event TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS intents (
    cluster TEXT NOT NULL, region TEXT NOT NULL, resource TEXT NOT NULL, operation TEXT NOT NULL,
    digest TEXT NOT NULL, token TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (cluster, region, resource));
CREATE TABLE IF NOT EXISTS locks (
    cluster TEXT NOT NULL, region TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL,
    command TEXT NOT NULL, acquired_at REAL NOT NULL, PRIMARY KEY (cluster, region));
"""


_CLUSTER_COLUMNS = "name, region, backend, spec, spec_path, status, created_at, updated_at, cluster_id, endpoint_url"


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
    spec: str
    spec_path: str | None
    status: str
    created_at: float
    updated_at: float
    # Tagged on everything made for this cluster (fmcluster:cluster-id): what makes a resource its own.
    cluster_id: str = ""
    # Where the cluster lives when that is not AWS itself (a sandbox, an --endpoint-url): hints repeat it.
    endpoint_url: str = ""


@dataclass
class ResourceRecord:
    kind: str
    key: str
    id: str | None
    status: str
    outputs: dict[str, Any]


class LockHeld(FmclusterError):
    exit_code = 1


class StateStore:
    """Thread-safe: the engine records from worker threads."""

    def __init__(self, path: Path | None = None):
        self.path = path or home() / "state.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.executescript(SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(clusters)")}
        for column in ("cluster_id", "endpoint_url"):
            if column not in columns:  # a state file from before these columns
                self._db.execute(f"ALTER TABLE clusters ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # clusters
    def save_cluster(self, name: str, region: str, backend: str, spec: str, spec_path: str | None,
                     status: str, cluster_id: str = "", endpoint_url: str = "") -> None:
        """Insert or update; an empty ``cluster_id`` keeps the recorded one."""
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO clusters (name, region, backend, spec, spec_path, status, created_at, updated_at, "
                "cluster_id, endpoint_url) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(name, region) DO UPDATE SET "
                "backend=excluded.backend, spec=excluded.spec, spec_path=excluded.spec_path, "
                "status=excluded.status, updated_at=excluded.updated_at, "
                "cluster_id=CASE WHEN excluded.cluster_id='' THEN clusters.cluster_id ELSE excluded.cluster_id END, "
                "endpoint_url=excluded.endpoint_url",
                (name, region, backend, spec, spec_path, status, now, now, cluster_id, endpoint_url))

    def set_cluster_status(self, name: str, region: str, status: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE clusters SET status=?, updated_at=? WHERE name=? AND region=?",
                       (status, time.time(), name, region))

    def cluster(self, name: str, region: str | None = None) -> ClusterRecord | None:
        with self._lock:
            if region:
                row = self._db.execute(f"SELECT {_CLUSTER_COLUMNS} FROM clusters WHERE name=? AND region=?",
                                       (name, region)).fetchone()
            else:
                row = self._db.execute(f"SELECT {_CLUSTER_COLUMNS} FROM clusters WHERE name=? ORDER BY updated_at "
                                       "DESC", (name,)).fetchone()
        return ClusterRecord(*row) if row else None

    def clusters(self) -> list[ClusterRecord]:
        with self._lock:
            rows = self._db.execute(f"SELECT {_CLUSTER_COLUMNS} FROM clusters ORDER BY name").fetchall()
        return [ClusterRecord(*row) for row in rows]

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
                "INSERT INTO resources VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(cluster, region, kind, key) DO UPDATE "
                "SET id=COALESCE(excluded.id, resources.id), status=excluded.status, "
                "outputs=CASE WHEN excluded.outputs='{}' THEN resources.outputs ELSE excluded.outputs END, "
                "updated_at=excluded.updated_at",
                (cluster, region, kind, key, resource_id, status, json.dumps(outputs or {}), time.time()))

    def resources(self, cluster: str, region: str) -> list[ResourceRecord]:
        with self._lock:
            rows = self._db.execute("SELECT kind, key, id, status, outputs FROM resources WHERE cluster=? AND "
                                    "region=? ORDER BY rowid", (cluster, region)).fetchall()
        return [ResourceRecord(kind, key, rid, status, json.loads(outputs)) for kind, key, rid, status, outputs in rows]

    def resource(self, cluster: str, region: str, kind: str, key: str) -> ResourceRecord | None:
        with self._lock:
            row = self._db.execute("SELECT kind, key, id, status, outputs FROM resources WHERE cluster=? AND "
                                   "region=? AND kind=? AND key=?", (cluster, region, kind, key)).fetchone()
        return ResourceRecord(row[0], row[1], row[2], row[3], json.loads(row[4])) if row else None

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

    # events
    def log_event(self, cluster: str, region: str, resource: str, event: str, detail: str = "") -> None:
        with self._tx() as db:
            db.execute("INSERT INTO events (cluster, region, at, resource, event, detail) VALUES (?,?,?,?,?,?)",
                       (cluster, region, time.time(), resource, event, detail))

    def events(self, cluster: str, region: str, limit: int = 50) -> list[tuple[float, str, str, str]]:
        with self._lock:
            rows = self._db.execute("SELECT at, resource, event, detail FROM events WHERE cluster=? AND region=? "
                                    "ORDER BY seq DESC LIMIT ?", (cluster, region, limit)).fetchall()
        return list(reversed(rows))

    # locks
    def acquire_lock(self, cluster: str, region: str, command: str) -> None:
        """Take the cluster's lock, or refuse naming the holder. A dead holder's lock is taken over."""
        host = socket.gethostname()
        with self._tx() as db:
            row = db.execute("SELECT pid, host, command, acquired_at FROM locks WHERE cluster=? AND region=?",
                             (cluster, region)).fetchone()
            if row:
                pid, holder_host, holder_command, since = row
                if pid != os.getpid() and (holder_host != host or pid_alive(pid)):
                    raise LockHeld(
                        f"cluster {cluster} is busy: `{holder_command}` (pid {pid} on {holder_host}) has held "
                        f"its lock for {int(time.time() - since)} s. Wait for it to finish, or stop it first.")
            db.execute("INSERT OR REPLACE INTO locks VALUES (?,?,?,?,?,?)",
                       (cluster, region, os.getpid(), host, command, time.time()))

    def release_lock(self, cluster: str, region: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM locks WHERE cluster=? AND region=? AND pid=?", (cluster, region, os.getpid()))

    @contextmanager
    def locked(self, cluster: str, region: str, command: str) -> Iterator[None]:
        self.acquire_lock(cluster, region, command)
        try:
            yield
        finally:
            self.release_lock(cluster, region)

