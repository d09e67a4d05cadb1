"""Fixtures the lifecycle verbs' tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def in_process(sandbox, sandbox_env, tmp_path, monkeypatch):
    """fmcluster's own code in this process, pointed at the sandbox, with a state directory of its own."""
    from fmcluster.connection import aws

    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test
    aws.configure(None, None, sandbox.endpoint_url)
    return sandbox
