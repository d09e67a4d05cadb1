"""End-to-end: a cluster is visible to a teammate whose state directory has never heard of it (found by its
fmcluster tags in AWS), with the same live status and cost fields, and the teammate can destroy it."""

from __future__ import annotations

import json

try:
    from lifecycle_fixture import PcsCli, _ok, cli_fixture
except ImportError:  # tests/ imported as a package
    from tests.lifecycle_fixture import PcsCli, _ok, cli_fixture

cli = cli_fixture(PcsCli)


def test_a_second_state_directory_sees_status_cost_and_can_destroy(cli, tmp_path):
    _ok(cli.create())
    mine = cli.status()
    for key in ("usd_so_far", "usd_per_hour_now", "usd_per_hour_max", "cost_by_queue", "cost_basis"):
        assert key in mine, mine
    assert mine["usd_per_hour_max"] >= mine["usd_per_hour_now"] > 0, mine

    teammate = {**cli.env, "FMCLUSTER_HOME": str(tmp_path / "teammate")}
    listed = json.loads(_ok(cli.run("status", "--json", env=teammate)).stdout)
    row = next(r for r in listed if r["name"] == cli.name)
    assert (row["backend"], row["status"], row["source"]) == ("pcs", "ACTIVE", "aws"), row
    table = _ok(cli.run("status", env=teammate))
    assert cli.name in table.stdout and "no local record" in table.stderr

    theirs = json.loads(_ok(cli.run("status", cli.name, "--json", env=teammate)).stdout)
    assert theirs["status"] == "ACTIVE"
    assert {q["name"] for q in theirs["queues"]} == {q["name"] for q in mine["queues"]}
    assert theirs["usd_per_hour_now"] == mine["usd_per_hour_now"]

    _ok(cli.run("destroy", cli.name, "--yes", env=teammate))
    cli.assert_nothing_left()
