"""Reads wait out throttling and still give up at once when nothing answers (fmcluster/connection/aws.py: ``READING``
and ``GiveUpUnanswered``). Both drive fmcluster's real botocore clients; the first against the sandbox's seeded
throttling, the second against a closed local port. The same behaviour under a sustained 20 % throttle, end to
end, is measured in bench/throttled_status.py."""

from __future__ import annotations

import socket

import pytest
from botocore.exceptions import EndpointConnectionError

from fmcluster.connection import aws
from fmcluster_sandbox.faults import Faults

# With this seed and rate, the sandbox's throttling draws (one per ec2 request) throttle the first two
# requests and answer the third: two retries, where reads used to give up after one.
SEED, RATE, THROTTLED_FIRST = 7, 0.5, 2


def _attempts(client) -> list[str]:
    """Every HTTP attempt the client sends, retries included."""
    sent: list[str] = []
    client.meta.events.register("before-send", lambda request=None, **_: sent.append(request.url))
    return sent


def test_a_read_waits_out_throttling(sandbox, sandbox_env, monkeypatch):
    draws = Faults(seed=SEED, throttle_rate={"ec2": RATE})
    assert [draws.should_throttle("ec2") for _ in range(THROTTLED_FIRST + 1)] == [True] * THROTTLED_FIRST + [False]
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test
    aws.configure(None, None, sandbox.endpoint_url)
    throttled: list[str] = []
    unsubscribe = aws.on_throttled_retry(lambda operation, code, attempt, maximum: throttled.append(code))
    sandbox.faults({"throttle_rate": {"ec2": RATE}, "seed": SEED})
    try:
        with aws.read_only():  # as status, logs and ssh read
            ec2 = aws.client("ec2", "us-east-1")
            sent = _attempts(ec2)
            vpcs = ec2.describe_vpcs()["Vpcs"]
    finally:
        unsubscribe()
        sandbox.faults({"reset": True})
    assert vpcs, "the sandbox's default VPC is in the answer"
    assert len(sent) == THROTTLED_FIRST + 1, sent
    # EC2's throttling code (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)
    assert throttled == ["RequestLimitExceeded"] * THROTTLED_FIRST


def test_a_read_gives_up_on_a_refused_connection_after_one_retry(monkeypatch):
    with socket.socket() as probe:  # a port nothing listens on: bound, then released
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(aws, "_target", aws.target())
    aws.configure(None, None, closed)
    with aws.read_only():
        ec2 = aws.client("ec2", "us-east-1")
        sent = _attempts(ec2)
        with pytest.raises(EndpointConnectionError):
            ec2.describe_vpcs()
    assert len(sent) == 2, f"a refused connection is tried twice (one retry), not {len(sent)} times"
