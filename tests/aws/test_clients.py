"""A command makes one boto3 client per service, region and patience (fmcluster/connection/aws.py): making one loads
the service's model and opens its own connections. Pointing the command elsewhere (``configure``) starts over, so no
call goes to the endpoint it was pointed at before."""

from __future__ import annotations

from fmcluster.connection import aws


def test_one_client_per_service_region_and_patience_until_the_target_changes(monkeypatch):
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    monkeypatch.setenv("AWS_ENDPOINT_URL", "")  # configure() sets it
    aws.configure(None, "us-east-1", "http://127.0.0.1:9")
    ec2 = aws.client("ec2", "us-east-1")
    assert aws.client("ec2", "us-east-1") is ec2
    assert aws.client("ec2", "us-east-1", aws.READING) is not ec2
    assert aws.client("ec2", "us-west-2") is not ec2
    assert aws.client("eks", "us-east-1") is not ec2
    aws.configure(None, "us-east-1", "http://127.0.0.1:10")
    moved = aws.client("ec2", "us-east-1")
    assert moved is not ec2 and moved.meta.endpoint_url == "http://127.0.0.1:10"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "")
    aws.configure(None, None, None)  # no client pointed at the test's endpoints is left for the next test
