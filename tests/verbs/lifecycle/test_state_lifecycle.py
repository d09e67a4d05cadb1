"""End-to-end against the sandbox (PCS): what issue 16 found in the state and lock handling, through the
installed command.

* ``scale NAME gpu=0`` on a static queue is refused with exit 2 before any change, and ``status`` and
  ``destroy`` keep working after it;
* a live lock holder is named, and ``--force-unlock`` takes the lock over with a warning;
* ``status NAME`` works on a read-only state file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from fixtures.lifecycle import PcsCli, _fmcluster, _ok, cli_fixture
from fixtures.unprivileged import demote

cli = cli_fixture(PcsCli)

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from fmcluster.state import locks
    locks.acquire(Path(sys.argv[1]), sys.argv[2], "us-east-1", "fmcluster create stuck.yaml")
    print("held", flush=True)
    time.sleep(600)
""")


def test_scale_to_zero_static_nodes_is_refused_and_the_cluster_stays_manageable(cli):
    _ok(cli.create_here())  # set-up in this process; the refusal's exit 2 and the destroy are the installed command
    before = cli.status()
    refused = _ok(cli.run("scale", cli.name, "gpu=0", "--yes"), code=2)
    assert "QUEUE=0:MAX" in refused.stderr, refused.stderr
    after = cli.status()
    assert {q["name"]: (q["min"], q["max"]) for q in after["queues"]} == \
        {q["name"]: (q["min"], q["max"]) for q in before["queues"]}
    assert after.get("problem") is None
    listing = _ok(cli.run_in_process("status", "--json"))
    assert cli.name in listing.stdout
    # the way the refusal points to works: the queue scales to zero as a dynamic queue
    _ok(cli.run_in_process("scale", cli.name, "gpu=0:1", "--yes"))
    assert {q["name"]: (q["min"], q["max"]) for q in cli.status()["queues"]}["gpu"] == (0, 1)
    _ok(cli.destroy())
    cli.assert_nothing_left()


def test_force_unlock_takes_the_lock_from_a_stuck_command(cli):
    _ok(cli.create_here())  # set-up; the refused and the forced destroy are the installed command's
    stuck = subprocess.Popen([sys.executable, "-c", HOLDER, str(cli.home / "locks"), cli.name],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert stuck.stdout.readline().strip() == "held", stuck.stderr.read()
        refused = _ok(cli.destroy(), code=1)
        assert f"pid {stuck.pid}" in refused.stderr and "fmcluster create stuck.yaml" in refused.stderr
        assert "--force-unlock" in refused.stderr
        assert len(cli.inventory()["clusters"]) == 1, "a refused destroy deletes nothing"
        forced = _ok(cli.run("destroy", cli.name, "--yes", "--force-unlock"))
        assert "--force-unlock: taking the lock" in forced.stderr and f"pid {stuck.pid}" in forced.stderr
    finally:
        stuck.kill()
        stuck.wait(timeout=30)
    cli.assert_nothing_left()


def test_status_works_on_a_read_only_state_file(cli):
    _ok(cli.create_here())  # set-up; the status of an unprivileged user on the read-only file is a subprocess
    db = cli.home / "state.db"
    os.chmod(db, 0o400)
    try:
        result = subprocess.run([*_fmcluster(), "status", cli.name, "--json"], env=cli.env, capture_output=True,
                                text=True, timeout=120, stdin=subprocess.DEVNULL, preexec_fn=demote())
        _ok(result)
        assert '"status": "ACTIVE"' in result.stdout
    finally:
        os.chmod(db, 0o600)
    _ok(cli.destroy_here())
    cli.assert_nothing_left()
