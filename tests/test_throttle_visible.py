"""Throttling is visible: when botocore retries a throttled call, fmcluster's progress view says so.

The sandbox throttles a share of calls (its seeded fault); fmcluster's real clients make the calls, and the
listener wired to botocore's ``needs-retry`` event (fmcluster/aws.py) reports each retry. End to end, the
installed ``create`` prints those retries on its progress lines.
"""

from __future__ import annotations

import io

from fmcluster import aws

try:
    from lifecycle_fixture import PcsCli, _ok, cli_fixture
except ImportError:  # tests/ imported as a package
    from tests.lifecycle_fixture import PcsCli, _ok, cli_fixture

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

    from fmcluster.progress import ProgressView

    out = io.StringIO()
    with ProgressView("Creating demo", ["security_group:cluster"], console=Console(file=out, width=200)) as view:
        assert view._unsubscribe is not None
        listeners = list(aws._retry_listeners)
        assert view.throttled in listeners
        view.throttled("pcs.CreateCluster", "ThrottlingException", 4, 11)
    assert "throttled by AWS (ThrottlingException on pcs.CreateCluster), retrying (attempt 4 of 11)" in out.getvalue()
    assert view.throttled not in aws._retry_listeners


def test_create_under_throttling_says_so(cli, sandbox):
    sandbox.faults({"throttle_rate": {"*": 0.3}, "seed": 11})
    # Backed-off retries at a 30 % throttle rate take ~100 s here, near the fixture's 120 s hang guard; the guard
    # is for hangs, so this create gets a wider one.
    created = _ok(cli.run("create", str(cli.spec), "--yes", timeout=300))
    assert "throttled by AWS (" in created.stderr and "retrying (attempt" in created.stderr, created.stderr
    sandbox.faults({"reset": True})
    _ok(cli.destroy())
    cli.assert_nothing_left()
