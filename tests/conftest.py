"""Shared fixtures: one sandbox (local AWS endpoint) per test process, over real HTTPS. Under pytest-xdist
each worker is its own process with its own temporary directory, so each starts its own sandbox on its own port
with its own home. The suite's tiers (markers e2e and slow) and its order come from ``tiers.py``."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import fixtures.tiers as tiers
import pytest
from fixtures.pcluster import reset_pcluster_clients
from fixtures.sandbox import Sandbox, start_sandbox, stop_sandbox

# The backends hand their spec rules to the spec layer (below them) when the registry is imported, as the command
# line does first: tests that load a spec without the command line need it too.
import fmcluster.backends.registry  # noqa: F401


def pytest_configure(config: pytest.Config) -> None:
    """Tests press Ctrl-C on the installed command (send it SIGINT) and expect what a terminal's foreground command
    does. A suite started in the background by a non-interactive shell (a CI script's ``pytest &``, or such a script
    run that way) starts with SIGINT ignored; Python keeps a SIGINT it starts with ignored, and every process the suite
    starts (xdist workers, their commands) inherits it, so the signal would do nothing: a watch never ends, a create
    runs to the end. Python's own handler, as in the foreground: exec resets a handled signal to the default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tiers.apply(items)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests of one ``xdist_group`` share one cluster made by the first of them; spread over workers they fail far
    from the cause. pytest-xdist sends a group to one worker by an "@group" suffix on the node id: without it, fail."""
    if (getattr(item.config.option, "loadgroup", False) and item.get_closest_marker("xdist_group")
            and "@" not in item.nodeid):
        pytest.fail("pytest-xdist did not group this xdist_group test (no @group on its node id): this pytest and "
                    "pytest-xdist do not work together, see pyproject.toml", pytrace=False)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    """The session's sandbox: ``.endpoint_url``, ``.ca_bundle``, ``.env``, ``.client()``, ``.faults()``."""
    proc, sbx = start_sandbox(tmp_path_factory.mktemp("fmcluster-home"))
    try:
        yield sbx
    finally:
        stop_sandbox(proc)


@pytest.fixture(autouse=True)
def _reset_sandbox_faults(request: pytest.FixtureRequest):
    """After each test that used the sandbox, restore default faults and any quota it changed."""
    yield
    if "sandbox" in request.fixturenames:
        request.getfixturevalue("sandbox").reset_between_tests()


@pytest.fixture
def sandbox_env(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Point this process's environment (boto3, fmcluster in-process) at the sandbox. pcluster.lib keeps its
    boto3 clients in a process-wide singleton: one made by an earlier in-process test (offline, without
    credentials) would otherwise be used here, and is forgotten again afterwards."""
    for key, value in sandbox.env.items():
        monkeypatch.setenv(key, value)
    reset_pcluster_clients()
    yield sandbox.env
    reset_pcluster_clients()
