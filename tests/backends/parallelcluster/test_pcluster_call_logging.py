"""pcluster's per-call log handler made a boto3 Session on every AWS call
(fmcluster/backends/parallelcluster/call_logging.py): inside :func:`api.pcluster` a call makes none, and with INFO
logging on, the line pcluster writes is still written, region and all."""

from __future__ import annotations

import logging

import boto3
import pytest
from fixtures.pcluster import reset_pcluster_clients

from fmcluster.backends.parallelcluster import api
from fmcluster.connection import aws

P5 = [{"Name": "instance-type", "Values": ["p5.48xlarge"]}]


@pytest.fixture
def pcluster_on_the_sandbox(sandbox, sandbox_env, monkeypatch):
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, "us-east-1", sandbox.endpoint_url)
    for key, value in sandbox.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    reset_pcluster_clients()
    yield
    reset_pcluster_clients()


def _sessions_made(monkeypatch) -> list[None]:
    made: list[None] = []
    original = boto3.session.Session.__init__

    def counting(self, *args, **kwargs):
        made.append(None)
        original(self, *args, **kwargs)

    monkeypatch.setattr(boto3.session.Session, "__init__", counting)
    return made


def test_a_call_through_pcluster_makes_no_session_of_its_own(pcluster_on_the_sandbox, monkeypatch):
    with api.pcluster() as pc:
        from pcluster.aws.aws_api import AWSApi

        ec2 = AWSApi.instance().ec2
        ec2.describe_instance_type_offerings(P5)  # the client is made here, once
        made = _sessions_made(monkeypatch)
        for _ in range(3):
            ec2.describe_instance_type_offerings(P5)
        assert pc is not None and made == []


def test_with_info_logging_on_the_line_is_still_written(pcluster_on_the_sandbox, caplog):
    with api.pcluster():
        from pcluster.aws.aws_api import AWSApi

        logging.disable(logging.NOTSET)  # api.pcluster turns pcluster's logging down; a user's --debug would not
        with caplog.at_level(logging.INFO, logger="pcluster.aws.common"):
            AWSApi.instance().ec2.describe_instance_type_offerings(P5)
    lines = [r.getMessage() for r in caplog.records if r.name == "pcluster.aws.common"]
    assert any(line.startswith("Executing boto3 call: region=us-east-1, service=ec2, operation="
                               "DescribeInstanceTypeOfferings") for line in lines), lines
