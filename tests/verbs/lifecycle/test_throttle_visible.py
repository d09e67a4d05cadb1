"""Throttling is visible: when botocore retries a throttled call, fmcluster's progress view says so.

The sandbox throttles a share of calls (its seeded fault); fmcluster's real clients make the calls, and the
listener wired to botocore's ``needs-retry`` event (fmcluster/connection/aws.py) reports each retry. End to end, the
installed ``create`` prints those retries on its progress lines.
"""

from __future__ import annotations

import io

from fixtures.lifecycle import PcsCli, _ok, cli_fixture

from fmcluster.connection import aws

cli = cli_fixture(PcsCli)


def test_throttled_retries_reach_the_listener(sandbox, sandbox_env, monkeypatch):
    sandbox.faults({"throttle_rate": {"ec2": 0.5}, "seed": 3})
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test
    aws.configure(None, None, sandbox.endpoint_url)
    seen: list[tuple[str, str, int, int | None]] = []
    unsubscribe = aws.on_throttled_retry(lambda *event: seen.append(event))
    try:
        ec2 = aws.client("ec2", "us-east-1")
        for _ in range(8):
            ec2.describe_vpcs()  # every call still succeeds: botocore retried the throttled attempts
    finally:
        unsubscribe()
        sandbox.faults({"reset": True})
    assert seen, "the sandbox throttled half of the calls; none was reported"
    for operation, code, attempt, maximum in seen:
        assert operation == "ec2.DescribeVpcs"
        assert code in aws.THROTTLING_CODES
        assert attempt >= 2 and (maximum is None or attempt <= maximum)
    count = len(seen)
    ec2.describe_vpcs()
    assert len(seen) == count, "after unsubscribing, nothing more is reported"


def test_progress_view_prints_the_retry():
    from rich.console import Console

    from fmcluster.output.progress import ProgressView

    out = io.StringIO()
    with ProgressView("Creating demo", ["security_group:cluster"], console=Console(file=out, width=200)) as view:
        assert view._unsubscribe is not None
        listeners = list(aws._retry_listeners)
        assert view.throttled in listeners
        view.throttled("pcs.CreateCluster", "ThrottlingException", 4, 11)
    assert "throttled by AWS (ThrottlingException on pcs.CreateCluster), retrying (attempt 4 of 11)" in out.getvalue()
    assert view.throttled not in aws._retry_listeners


def test_create_under_throttling_says_so(cli, sandbox):
    """One deterministic throttled create and destroy: PCS throttles 5 % of its calls from seed 96, whose draws
    (random.Random(96)) throttle PCS calls 8, 15, 26, 44 and 66 and no other of the first 80: past the preflight's
    few reads (the progress view, which reports retries, starts after them), within the create's PCS calls, and
    without the long back-off of a sustained throttle. The long runs at 20 % and 30 % of every service's calls are
    in bench/throttled_lifecycle.py."""
    sandbox.faults({"throttle_rate": {"pcs": 0.05}, "seed": 96})
    created = _ok(cli.create())
    assert "throttled by AWS (ThrottlingException on pcs." in created.stderr, created.stderr
    assert "retrying (attempt 2" in created.stderr, created.stderr
    inventory = cli.inventory()
    assert len(inventory["clusters"]) == 1 and len(inventory["security_groups"]) == 1, inventory
    assert sorted(g["name"] for g in inventory["node_groups"]) == ["burst", "gpu", "login"], inventory["node_groups"]
    _ok(cli.destroy())  # under the same throttle
    sandbox.faults({"reset": True})
    cli.assert_nothing_left()
