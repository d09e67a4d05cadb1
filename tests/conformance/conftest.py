"""The conformance suite: each AWS rule the sandbox enforces, exercised as a plain boto3 client would.

No fmcluster code runs here: only boto3 against the session's sandbox (``tests/fixtures/sandbox.py``). Each
test's docstring names the AWS page the rule comes from; ``docs/sandbox-fidelity.md`` maps every rule to
its test. PCS tests work in their own Region so the Clusters quota they meet is theirs alone.
"""

from __future__ import annotations

import pytest
from fixtures.pcs_world import Pcs


@pytest.fixture
def world(sandbox):
    """A PCS user in us-east-2 who leaves nothing behind; faults and quotas are reset by tests/conftest.py."""
    pcs = Pcs(sandbox)
    pcs.delete_everything()
    yield pcs
    sandbox.faults({"reset": True})
    pcs.delete_everything()
