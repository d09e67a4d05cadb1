"""The state file itself: open it safely, check it, migrate it, keep it private, and explain every failure.

``state.db`` is SQLite in WAL mode. Its schema carries a version (``PRAGMA user_version``):

* 0 — before versions: ``clusters``, ``resources``, ``events`` and a ``locks`` table;
* 1 — the ``locks`` table is gone (locks are files, see :mod:`fmcluster.state.locks`); ``events`` has an index
  and keeps the newest :data:`EVENTS_KEPT` events per cluster;
* 2 — ``clusters`` keeps the cluster's id (its ownership tag) and where it lives (``endpoint_url``);
  ``intents`` holds the idempotency token of each create or update in flight.

Older files are migrated forward when a command that writes opens them; a file from a newer fmcluster is
refused. A damaged, truncated, foreign or unreadable file is one :class:`StateError` that names the file
and says what to do, never a traceback. The directory is made 0700 and the files 0600 (group and other
bits are taken off existing ones too): the state holds cluster specs and resource ids.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.request import pathname2url

from fmcluster.errors import FmclusterError

SCHEMA_VERSION = 2
# Newest events kept per cluster (and region); older ones are deleted as new ones arrive.
EVENTS_KEPT = 1000
BUSY_TIMEOUT_S = 30

# Columns each table must have (every version since 0 has them; later versions may add more).
TABLES = {
    "clusters": ("name", "region", "backend", "spec", "spec_path", "status", "created_at", "updated_at"),
    "resources": ("cluster", "region", "kind", "key", "id", "status", "outputs", "updated_at"),
    "events": ("seq", "cluster", "region", "at", "resource", "event", "detail"),
}

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
CREATE INDEX IF NOT EXISTS events_by_cluster ON events (cluster, region, seq);
CREATE TABLE IF NOT EXISTS intents (
    cluster TEXT NOT NULL, region TEXT NOT NULL, resource TEXT NOT NULL, operation TEXT NOT NULL,
    digest TEXT NOT NULL, token TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (cluster, region, resource));
"""

PRUNE_EVENTS = ("DELETE FROM events WHERE cluster=:cluster AND region=:region AND seq <= ("
                "SELECT seq FROM events WHERE cluster=:cluster AND region=:region "
                "ORDER BY seq DESC LIMIT 1 OFFSET :keep)")


class StateError(FmclusterError):
    """The state file or its directory cannot be used; the message names it and says what to do."""

    exit_code = 1


def _damaged(path: Path, reason: str) -> StateError:
    return StateError(
        f"the state file {path} is damaged or not fmcluster's ({reason}), so fmcluster cannot use it.\n"
        f"Move it aside (mv {path} {path}.broken) and re-run; a new one is made. The clusters it recorded still "
        "exist in AWS, tagged fmcluster:cluster=<name>.")


def explain(path: Path, exc: BaseException) -> StateError:
    """One :class:`StateError` for an sqlite or OS error on the state file at ``path``."""
    message = str(exc) or type(exc).__name__
    lower = message.lower()
    if isinstance(exc, OSError):
        message = exc.strerror or message
    if any(word in lower for word in ("not a database", "malformed", "no such table", "no such column",
                                      "has no column", "corrupt")):
        return _damaged(path, message)
    if "readonly" in lower or "read-only" in lower:
        return StateError(f"the state file {path} is read-only ({message}), and this command records what it "
                          f"does. Make it and its directory writable (chmod u+w {path} {path.parent}), or set "
                          "FMCLUSTER_HOME to a directory you can write.")
    if "locked" in lower or "busy" in lower:
        return StateError(f"the state file {path} stayed locked by another fmcluster command for "
                          f"{BUSY_TIMEOUT_S} s ({message}); try again when it has finished.")
    if "full" in lower:
        return StateError(f"cannot write the state file {path}: {message}. Free some disk space and re-run.")
    return StateError(f"cannot use the state file {path} ({message}). Check that you can read and write it and "
                      f"its directory {path.parent}, or set FMCLUSTER_HOME to another directory.")


@contextmanager
def translated(path: Path) -> Iterator[None]:
    """Turn sqlite and OS errors inside the block into :class:`StateError`."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise explain(path, exc) from None


def open_database(path: Path, readonly: bool) -> sqlite3.Connection:
    """A checked connection to the state file; read-only ones never write (a missing file reads as empty)."""
    if readonly:
        return _open_readonly(path)
    private_directory(path.parent)
    with translated(path):
        if not path.exists():
            _create(path)
        _refuse_empty(path)  # before SQLite sees it: it would take an empty file for a new database
        _make_private(path)
        if not os.access(path, os.R_OK):
            raise StateError(f"cannot use the state file {path} (you cannot read it). Check its permissions, or set "
                             "FMCLUSTER_HOME to another directory.")
        # SQLite would quietly open a write-protected file read-only and fail at the first write, after the
        # command has already changed AWS: refuse before anything happens.
        if not os.access(path, os.W_OK):
            raise explain(path, sqlite3.OperationalError("attempt to write a readonly database"))
        connection = _connect(str(path), uri=False)
        try:
            connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
            connection.execute("PRAGMA journal_mode=WAL")
            _check(connection, path)
            _migrate(connection, path)
        except BaseException:
            connection.close()
            raise
    return connection


def _connect(target: str, uri: bool) -> sqlite3.Connection:
    return sqlite3.connect(target, uri=uri, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)


def _open_readonly(path: Path) -> sqlite3.Connection:
    with translated(path):
        if path.parent.exists() and not path.parent.is_dir():
            raise StateError(f"the state directory {path.parent} is not a directory. Move it aside, or set "
                             "FMCLUSTER_HOME to another directory.")
        if not path.exists():
            connection = _connect(":memory:", uri=False)
            connection.executescript(SCHEMA)
            return connection
        _refuse_empty(path)
        _make_private(path.parent)
        _make_private(path)
        uri = f"file:{pathname2url(str(path.resolve()))}?mode=ro"
        connection = _connect(uri, uri=True)
        try:
            _check(connection, path)
        except StateError as exc:
            # WAL needs a -shm file it can map; a read-only directory cannot hold a new one. With nothing able
            # to write there, reading the file as immutable is safe.
            connection.close()
            if "read-only" not in str(exc):
                raise
            connection = _connect(uri + "&immutable=1", uri=True)
            _check(connection, path)
    return connection


def _check(connection: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not a whole fmcluster state file of a version this fmcluster knows."""
    with translated(path):
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StateError(f"the state file {path} was written by a newer fmcluster (state schema {version}; "
                             f"this one knows up to {SCHEMA_VERSION}). Upgrade fmcluster "
                             "(pip install -U fmcluster) to use it.")
        verdict = connection.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise _damaged(path, verdict)
        present = {name: tuple(row[1] for row in connection.execute(f"PRAGMA table_info({name})"))
                   for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if version == 0 and not set(TABLES) & set(present):
        return  # a blank SQLite file: nothing to lose, the schema is made by _migrate
    problems = []
    for table, columns in TABLES.items():
        missing = [column for column in columns if column not in present.get(table, ())]
        if table not in present:
            problems.append(f"table {table} is missing")
        elif missing:
            problems.append(f"table {table} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                            f"(it has {', '.join(present[table])})")
    if problems:
        raise _damaged(path, "; ".join(problems))


def _to_v1(connection: sqlite3.Connection) -> None:
    """Locks became files; events get an index and a cap per cluster. Also makes a blank file whole."""
    connection.execute("DROP TABLE IF EXISTS locks")
    for statement in SCHEMA.split(";"):
        if statement.strip():
            connection.execute(statement)
    for cluster, region in connection.execute("SELECT DISTINCT cluster, region FROM events").fetchall():
        connection.execute(PRUNE_EVENTS, {"cluster": cluster, "region": region, "keep": EVENTS_KEPT})


def _to_v2(connection: sqlite3.Connection) -> None:
    """Clusters keep their id and endpoint; intents (idempotency tokens) get their table."""
    present = {row[1] for row in connection.execute("PRAGMA table_info(clusters)")}
    for column in ("cluster_id", "endpoint_url"):
        if column not in present:  # a file made at version 1 or before (a new file has them from SCHEMA)
            connection.execute(f"ALTER TABLE clusters ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
    for statement in SCHEMA.split(";"):
        if statement.strip():
            connection.execute(statement)


# MIGRATIONS[n] takes a file from version n to n + 1; SCHEMA_VERSION is how many there are. A new version is
# one function appended here (and its tables and columns added to SCHEMA; TABLES lists what every version has).
MIGRATIONS = [_to_v1, _to_v2]
assert len(MIGRATIONS) == SCHEMA_VERSION


def _refuse_empty(path: Path) -> None:
    """fmcluster never leaves an empty state file (see :func:`_create`), so one is damage, not a new file."""
    if path.stat().st_size == 0:
        raise _damaged(path, "it is empty: 0 bytes")


def _migrate(connection: sqlite3.Connection, path: Path) -> None:
    """Bring the file forward to SCHEMA_VERSION in one transaction (all steps, or none)."""
    with translated(path):
        if connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        connection.execute("BEGIN IMMEDIATE")
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]  # another command may have done it
            for step in MIGRATIONS[version:]:
                step(connection)
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")


def _create(path: Path) -> None:
    """Make a new state file atomically: built under a temporary name with mode 0600, then linked into
    place, so ``state.db`` never exists half-made (and an empty one always means damage)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    try:
        connection = _connect(str(temporary), uri=False)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(SCHEMA)
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        finally:
            connection.close()
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another command made it first: use theirs
    finally:
        for leftover in (temporary, Path(f"{temporary}-wal"), Path(f"{temporary}-shm")):
            leftover.unlink(missing_ok=True)


def private_directory(directory: Path) -> None:
    """Create ``directory`` 0700, or take group and other access off an existing one that is ours."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
    except OSError as exc:
        raise StateError(f"cannot create the state directory {directory} ({exc.strerror or exc}). Set "
                         "FMCLUSTER_HOME to a directory you can write.") from None
    if not stat.S_ISDIR(info.st_mode):
        raise StateError(f"the state directory {directory} is not a directory. Move it aside, or set "
                         "FMCLUSTER_HOME to another directory.")
    _make_private(directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise StateError(f"the state directory {directory} is not writable, and this command records what it "
                         f"does. Make it writable (chmod u+w {directory}), or set FMCLUSTER_HOME to a directory "
                         "you can write.")


def _make_private(path: Path) -> None:
    """Take group and other access off ``path`` (the state directory, or the state file and its WAL files),
    keeping the owner's bits: a read-only file stays read-only. Only what this user owns is touched, and
    never a shared sticky directory such as /tmp, even when FMCLUSTER_HOME points at it."""
    for item in (path,) if path.is_dir() else (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            info = item.stat()
        except FileNotFoundError:
            continue
        if info.st_uid == os.geteuid() and info.st_mode & 0o077 and not info.st_mode & stat.S_ISVTX:
            try:
                os.chmod(item, stat.S_IMODE(info.st_mode) & 0o700)
            except OSError:  # a read-only file system: reading still works, and there is nothing to fix there
                pass
