"""Where a cluster record says its cluster lives, and what fmcluster tells a command pointed elsewhere."""

from __future__ import annotations

import pytest

from fmcluster.connection import aws
from fmcluster.state.store import ClusterRecord
from fmcluster.verbs.lifecycle.common import ClusterNotFound
from fmcluster.verbs.lifecycle.status import check_reachable


def _record(where: str) -> ClusterRecord:
    return ClusterRecord(name="demo", region="us-east-1", backend="eks", spec="", spec_path=None, status="ACTIVE",
                         created_at=0.0, updated_at=0.0, endpoint_url=where)


@pytest.fixture
def pointed_at(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "")  # restored afterwards: configure() sets it

    def point(url: str) -> None:
        aws.configure(None, None, url)

    yield point
    aws.configure(None, None, None)


def test_a_record_of_a_gone_local_sandbox_says_how_to_reach_and_forget_it(pointed_at):
    """A record made through `fmcluster sandbox env` keeps the sandbox's URL; a sandbox that came back on another
    port cannot reach it, so the refusal names the port to start one on and how to forget the record there."""
    pointed_at("https://127.0.0.1:40000")
    with pytest.raises(ClusterNotFound) as refused:
        check_reachable(_record("https://127.0.0.1:8787"))
    message = str(refused.value)
    assert "`fmcluster sandbox start --port 8787`" in message
    assert "`fmcluster destroy demo --yes` forgets the cluster" in message


def test_a_record_of_another_endpoint_names_only_that_endpoint(pointed_at):
    pointed_at("https://127.0.0.1:40000")
    with pytest.raises(ClusterNotFound) as refused:
        check_reachable(_record("https://aws.example.internal:443"))
    assert str(refused.value) == ("cluster demo lives at https://aws.example.internal:443: add "
                                  "`--endpoint-url https://aws.example.internal:443`")
