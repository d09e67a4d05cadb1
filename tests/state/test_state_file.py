"""The state file under faults, through fmcluster's entry point (in this process; the installed command where a
test is about it): a corrupt, truncated, empty, foreign-schema, newer, unreadable or read-only ``state.db`` (or an
unusable state directory) is one clear error that names the file and says what to do, exit 1, no traceback, for
every command that uses the state. Reading commands work on a file they cannot write. Modes, schema versions and
migration, event pruning, degraded records and the validation of what ``scale`` would save are checked here too;
none of this needs AWS (an unreachable endpoint proves that no call was made)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fixtures.in_process import run_in_process
from fixtures.unprivileged import demote

from fmcluster.spec.stored import InvalidRecord, record_cluster, stored_spec_problem
from fmcluster.state import db as statedb
from fmcluster.state.store import EVENTS_KEPT, StateStore

FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")
ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD = 120
# Nothing listens here: a command that reached for AWS would fail with a connection error, not a state error.
NOWHERE = "http://127.0.0.1:9"

PCS_SPEC = {"name": "demo-pcs", "region": "us-east-1", "backend": "pcs",
            "queues": [{"name": "gpu", "instance_type": "p5.4xlarge", "nodes": 1},
                       {"name": "burst", "instance_type": "p5.4xlarge", "nodes": {"min": 0, "max": 2}}]}
PC_SPEC = {"name": "demo-pc", "region": "us-east-1", "backend": "parallelcluster",
           "queues": [{"name": "gpu", "instance_type": "p5.4xlarge", "nodes": {"min": 0, "max": 2}, "efa": False}]}

# The schema of state files written before versions (fmcluster 0.1 before this change): version 0.
LEGACY_SCHEMA = """
CREATE TABLE clusters (
    name TEXT NOT NULL, region TEXT NOT NULL, backend TEXT NOT NULL, spec TEXT NOT NULL,
    spec_path TEXT, status TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (name, region));
CREATE TABLE resources (
    cluster TEXT NOT NULL, region TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,
    id TEXT, status TEXT NOT NULL, outputs TEXT NOT NULL DEFAULT '{}', updated_at REAL NOT NULL,
    PRIMARY KEY (cluster, region, kind, key));
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster TEXT NOT NULL, region TEXT NOT NULL, at REAL NOT NULL,
    resource TEXT NOT NULL, event TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '');
CREATE TABLE locks (
    cluster TEXT NOT NULL, region TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL,
    command TEXT NOT NULL, acquired_at REAL NOT NULL, PRIMARY KEY (cluster, region));
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_EC2_METADATA_DISABLED": "true", "NO_COLOR": "1", "COLUMNS": "250",
                "FMCLUSTER_HOME": str(home)})
    return env


def run_cli(home: Path, *args: str, as_user: bool = False, installed: bool = False) -> subprocess.CompletedProcess[str]:
    """In this process (fixtures/in_process.py) unless the test is about the installed command (``installed``) or
    runs as another user (``as_user``: only a child can drop root)."""
    if not (installed or as_user):
        return run_in_process(["--endpoint-url", NOWHERE, *args], _env(home), cwd=home.parent)
    return subprocess.run([FMCLUSTER, "--endpoint-url", NOWHERE, *args], capture_output=True, text=True,
                          env=_env(home), cwd=home.parent, timeout=HANG_GUARD, stdin=subprocess.DEVNULL,
                          preexec_fn=demote() if as_user else None)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _spec_text(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def seeded_home(tmp_path: Path) -> Path:
    """A state home with two valid cluster records (no AWS needed: records are data)."""
    home = tmp_path / "state"
    store = StateStore(home / "state.db")
    for data in (PCS_SPEC, PC_SPEC):
        record_cluster(store, data["name"], "us-east-1", data["backend"], _spec_text(data), None, "ACTIVE")
        store.log_event(data["name"], "us-east-1", "cluster", "done", "")
    store.close()
    return home


# --- faults of the file: every command that uses the state says so clearly ---------------------------------

def _truncate(db: Path) -> None:
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])


def _sql(db: Path, statement: str) -> None:
    connection = sqlite3.connect(db)
    connection.execute(statement)
    connection.commit()
    connection.close()


FAULTS = {
    "corrupt": (lambda db: db.write_bytes(os.urandom(8192)), "damaged or not fmcluster's"),
    "text-file": (lambda db: db.write_text("name: not a database\n" * 50), "file is not a database"),
    "truncated": (_truncate, "damaged or not fmcluster's"),
    "empty": (lambda db: db.write_bytes(b""), "it is empty: 0 bytes"),
    "missing-table": (lambda db: _sql(db, "DROP TABLE clusters"), "table clusters is missing"),
    "wrong-schema": (lambda db: _sql(db, "ALTER TABLE resources RENAME COLUMN outputs TO data"),
                     "table resources lacks column outputs"),
    "newer-version": (lambda db: _sql(db, "PRAGMA user_version=99"), "written by a newer fmcluster"),
}
COMMANDS = {
    "status": ("status",),
    "status-json": ("status", "--json"),
    "status-name": ("status", "demo-pcs"),
    "status-refresh": ("status", "demo-pcs", "--refresh"),
    "scale": ("scale", "demo-pcs", "burst=0:1", "--yes"),
    "destroy": ("destroy", "demo-pcs", "--yes"),
    "create": ("create", str(ROOT / "configs" / "quickstart-pcs.yaml"), "--yes", "--skip-preflight"),
}


# Through the installed command (its exit status, no traceback), a reader and a writer; the rest run in-process.
INSTALLED = {("corrupt", "create"), ("newer-version", "status-json")}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_broken_state_file_is_one_clear_error(tmp_path: Path, fault: str, command: str) -> None:
    home = seeded_home(tmp_path)
    db = home / "state.db"
    damage, fragment = FAULTS[fault]
    damage(db)
    for sidecar in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        sidecar.unlink(missing_ok=True)
    before = db.read_bytes()
    result = run_cli(home, *COMMANDS[command], installed=(fault, command) in INSTALLED)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stderr
    text = _flat(result.stderr)
    assert str(db) in text, text
    assert fragment in text, text
    assert ("Move it aside" in text) or ("Upgrade fmcluster" in text), text
    assert db.read_bytes() == before, "a broken state file must be left as it was, for the user to look at"


def test_missing_state_file_reads_as_no_clusters(tmp_path: Path) -> None:
    home = tmp_path / "state"
    listing = run_cli(home, "status", "--json", installed=True)
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout) == []
    assert not (home / "state.db").exists(), "a reading command must not create the state file"
    unknown = run_cli(home, "status", "nope", installed=True)
    assert unknown.returncode == 1 and "no cluster named 'nope'" in unknown.stderr, unknown.stderr
    assert "Traceback" not in unknown.stderr


# --- permissions: the same faults a user meets without root -------------------------------------------------

def test_read_only_state_file_still_serves_status(tmp_path: Path) -> None:
    home = seeded_home(tmp_path)
    db = home / "state.db"
    os.chmod(db, 0o400)
    listing = run_cli(home, "status", "--json", as_user=True)
    assert listing.returncode == 0, listing.stderr
    assert {row["name"] for row in json.loads(listing.stdout)} == {"demo-pcs", "demo-pc"}
    changing = run_cli(home, "scale", "demo-pcs", "burst=0:1", "--yes", as_user=True)
    assert "Traceback" not in changing.stderr, changing.stderr
    assert changing.returncode == 1, changing.stderr
    assert f"the state file {db} is read-only" in _flat(changing.stderr), changing.stderr
    assert "chmod u+w" in changing.stderr


@pytest.mark.parametrize("with_wal_files", [False, True])
def test_read_only_state_directory_still_serves_status(tmp_path: Path, with_wal_files: bool) -> None:
    home = seeded_home(tmp_path)
    if with_wal_files:
        StateStore(home / "state.db", readonly=True).clusters()  # leaves -shm/-wal behind? either way it must work
    else:
        for sidecar in home.glob("state.db-*"):
            sidecar.unlink()
    os.chmod(home, 0o500)
    try:
        listing = run_cli(home, "status", "--json", as_user=True)
        assert listing.returncode == 0, listing.stderr
        assert len(json.loads(listing.stdout)) == 2
        changing = run_cli(home, "destroy", "demo-pcs", "--yes", as_user=True)
        assert "Traceback" not in changing.stderr, changing.stderr
        assert changing.returncode == 1, changing.stderr
        assert str(home) in _flat(changing.stderr) and "not writable" in changing.stderr, changing.stderr
    finally:
        os.chmod(home, 0o700)


@pytest.mark.parametrize("command", ["status", "status-name", "destroy", "scale"])
def test_unreadable_state_file(tmp_path: Path, command: str) -> None:
    home = seeded_home(tmp_path)
    db = home / "state.db"
    os.chmod(db, 0o000)
    result = run_cli(home, *COMMANDS[command], as_user=True)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stderr
    assert f"cannot use the state file {db}" in _flat(result.stderr), result.stderr
    assert "FMCLUSTER_HOME" in result.stderr


def test_state_directory_that_is_a_file(tmp_path: Path) -> None:
    home = tmp_path / "state"
    home.write_text("not a directory\n")
    for command in ("status", "destroy", "create"):
        result = run_cli(home, *COMMANDS[command])
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode == 1, (command, result.stderr)
        assert str(home) in _flat(result.stderr), result.stderr


def test_state_is_private(tmp_path: Path) -> None:
    home = seeded_home(tmp_path)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "state.db").stat().st_mode) == 0o600
    # an existing, world-readable state (as fmcluster 0.1 left it) is closed by the next command
    os.chmod(home, 0o755)
    os.chmod(home / "state.db", 0o644)
    assert run_cli(home, "status").returncode == 0
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for item in home.glob("state.db*"):
        assert stat.S_IMODE(item.stat().st_mode) == 0o600, item


# --- schema versions --------------------------------------------------------------------------------------------

def _legacy_home(tmp_path: Path, events: int) -> Path:
    home = tmp_path / "legacy"
    home.mkdir()
    connection = sqlite3.connect(home / "state.db")
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(LEGACY_SCHEMA)
    now = time.time()
    connection.execute("INSERT INTO clusters VALUES (?,?,?,?,?,?,?,?)",
                       ("demo-pcs", "us-east-1", "pcs", _spec_text(PCS_SPEC), None, "ACTIVE", now, now))
    connection.execute("INSERT INTO locks VALUES (?,?,?,?,?,?)", ("demo-pcs", "us-east-1", 1, "elsewhere",
                                                                  "fmcluster create x", now))
    connection.executemany("INSERT INTO events (cluster, region, at, resource, event, detail) VALUES (?,?,?,?,?,?)",
                           [("demo-pcs", "us-east-1", now + i, "cluster", "progress", str(i)) for i in range(events)])
    connection.commit()
    connection.close()
    return home


def _version_and_tables(db: Path) -> tuple[int, set[str]]:
    connection = sqlite3.connect(db)
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
    finally:
        connection.close()
    return version, tables


def test_new_state_file_carries_its_schema_version(tmp_path: Path) -> None:
    home = seeded_home(tmp_path)
    version, tables = _version_and_tables(home / "state.db")
    assert version == statedb.SCHEMA_VERSION == 2
    assert {"clusters", "resources", "events", "events_by_cluster", "intents"} <= tables
    assert "locks" not in tables


def test_legacy_state_file_is_read_as_is_and_migrated_by_a_writer(tmp_path: Path) -> None:
    home = _legacy_home(tmp_path, events=EVENTS_KEPT + 150)
    db = home / "state.db"
    # reading does not migrate (it cannot write), yet works
    listing = run_cli(home, "status", "--json")
    assert listing.returncode == 0, listing.stderr
    assert [row["name"] for row in json.loads(listing.stdout)] == ["demo-pcs"]
    assert _version_and_tables(db)[0] == 0
    # the first command that writes migrates: the stale sqlite lock (pid 1 "elsewhere") is gone with its table
    StateStore(db).close()
    version, tables = _version_and_tables(db)
    assert version == 2 and "locks" not in tables and {"events_by_cluster", "intents"} <= tables
    store = StateStore(db, readonly=True)
    events = store.events("demo-pcs", "us-east-1", limit=10 * EVENTS_KEPT)
    assert len(events) == EVENTS_KEPT
    assert events[-1][3] == str(EVENTS_KEPT + 149), "the newest events are the ones kept"
    assert store.cluster("demo-pcs", "us-east-1").status == "ACTIVE"


def test_events_are_pruned_to_the_newest_per_cluster(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    for i in range(EVENTS_KEPT + 20):
        store.log_event("a", "us-east-1", "cluster", "progress", str(i))
    store.log_event("b", "us-east-1", "cluster", "done", "")
    events = store.events("a", "us-east-1", limit=10 * EVENTS_KEPT)
    assert len(events) == EVENTS_KEPT
    assert (events[0][3], events[-1][3]) == ("20", str(EVENTS_KEPT + 19))
    assert len(store.events("b", "us-east-1")) == 1


# --- records: validated before they are saved, degraded (not fatal) when they no longer validate ---------------

def test_a_spec_that_does_not_validate_is_never_saved(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    bad = dict(PCS_SPEC, queues=[dict(PCS_SPEC["queues"][0], nodes=0)])
    with pytest.raises(InvalidRecord) as caught:
        record_cluster(store, "demo-pcs", "us-east-1", "pcs", _spec_text(bad), None, "ACTIVE")
    assert "queues[0].nodes" in str(caught.value)
    assert store.clusters() == []


def _write_raw_record(home: Path, name: str, spec_text: str) -> None:
    """A record as an older fmcluster (or a hand edit) could have left it: written around the validation."""
    connection = sqlite3.connect(home / "state.db")
    now = time.time()
    connection.execute("INSERT INTO clusters (name, region, backend, spec, spec_path, status, created_at, updated_at) "
                       "VALUES (?,?,?,?,?,?,?,?)", (name, "us-east-1", "pcs", spec_text, None, "ACTIVE", now, now))
    connection.execute("INSERT INTO resources (cluster, region, kind, key, id, status, outputs, updated_at) VALUES "
                       "(?,?,?,?,?,?,?,?)", (name, "us-east-1", "pcs_cluster", "cluster", "pcs_abc123", "ACTIVE",
                                             "{}", now))
    connection.commit()
    connection.close()


DEGRADED = {
    "nodes-zero": (_spec_text(dict(PCS_SPEC, name="bad-zero", queues=[dict(PCS_SPEC["queues"][0], nodes=0)])),
                   "queues[0].nodes"),
    "not-yaml": ("name: [unclosed\n", "YAML syntax error"),
    "not-a-mapping": ("- just\n- a list\n", "top level must be a mapping"),
    "alias-bomb": ("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                   "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                   "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n", "alias bomb"),
}


@pytest.mark.parametrize("case", sorted(DEGRADED))
def test_degraded_record_is_shown_with_its_reason(tmp_path: Path, case: str) -> None:
    home = seeded_home(tmp_path)
    text, reason = DEGRADED[case]
    _write_raw_record(home, "broken", text)
    record = StateStore(home / "state.db", readonly=True).cluster("broken")
    assert record is not None, "a record whose spec no longer validates still loads"
    problem = stored_spec_problem(record.spec)
    assert problem is not None and reason in problem

    listing = run_cli(home, "status", "--json")
    assert listing.returncode == 0, listing.stderr
    rows = {row["name"]: row for row in json.loads(listing.stdout)}
    assert set(rows) == {"broken", "demo-pc", "demo-pcs"}
    assert reason in rows["broken"]["problem"]
    assert rows["demo-pcs"]["problem"] is None and rows["demo-pcs"]["queues"] == ["gpu", "burst"]

    table = run_cli(home, "status")
    assert table.returncode == 0, table.stderr
    assert "Traceback" not in table.stderr
    assert "cluster broken: its recorded spec does not validate" in _flat(table.stderr), table.stderr

    # One cluster's status asks AWS (what it holds needs no spec); here AWS is unreachable, so it shows what the
    # state recorded, and says so.
    one = run_cli(home, "status", "broken", "--json")
    assert one.returncode == 0, one.stderr
    assert "Traceback" not in one.stderr
    shown = json.loads(one.stdout)
    assert shown["name"] == "broken" and reason in shown["problem"] and shown["drift"] is None
    assert any(p.startswith("not read from AWS") and NOWHERE in p for p in shown["problems"]), shown["problems"]


# --- scale: the new spec goes through the spec's rules, before any AWS call -----------------------------------

# (id, (cluster, QUEUE=…), message fragment): each would save a spec that no longer validates
SCALE_REFUSALS = [
    ("pcs-static-zero", ("demo-pcs", "gpu=0"), "QUEUE=0:MAX"),
    ("pcs-dynamic-zero", ("demo-pcs", "burst=0:0"), "queues[1].nodes.max"),
    ("pcs-negative", ("demo-pcs", "burst=-1:2"), "queues[1].nodes.min"),
    ("pc-too-many", ("demo-pc", "gpu=100000"), "less than or equal to 2048"),
    ("pc-static-zero", ("demo-pc", "gpu=0"), "QUEUE=0:MAX"),
    ("pc-range-too-many", ("demo-pc", "gpu=5:100000"), "queues[0].nodes.max"),
]


@pytest.mark.parametrize(("counts", "fragment"), [c[1:] for c in SCALE_REFUSALS], ids=[c[0] for c in SCALE_REFUSALS])
def test_scale_refuses_what_would_not_validate(tmp_path: Path, counts: tuple[str, str], fragment: str) -> None:
    home = seeded_home(tmp_path)
    db = home / "state.db"
    before = StateStore(db, readonly=True).cluster(counts[0]).spec
    result = run_cli(home, "scale", *counts, "--yes")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    assert fragment in _flat(result.stderr), result.stderr
    assert "127.0.0.1:9" not in result.stderr, "refused before any AWS call"
    after = StateStore(db, readonly=True)
    assert after.cluster(counts[0]).spec == before
    assert all(stored_spec_problem(record.spec) is None for record in after.clusters())
    assert run_cli(home, "status").returncode == 0
