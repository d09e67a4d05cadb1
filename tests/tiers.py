"""The suite's tiers and the order the two xdist workers take it in; applied by ``conftest.py`` at collection.

``e2e``: the test drives the installed ``fmcluster`` end to end against the sandbox (every test that uses a
lifecycle ``cli`` fixture, see ``lifecycle_fixture.cli_fixture``, plus the files and tests listed here).
``slow``: the test waits on something slow that is not an end-to-end run (retries, an emulated stack deletion).
``pytest -m "not e2e"`` is the quick tier; plain ``pytest`` still runs everything.

Files are kept whole here so that individual test files need no marks of their own.
"""

from __future__ import annotations

import pytest

# file -> why every test in it is end to end (besides those using a lifecycle ``cli`` fixture)
E2E_FILES: dict[str, str] = {
    "test_validate_examples.py": "runs ParallelCluster's full validators on every shipped example in the sandbox",
    "test_sandbox_cli.py": "starts, stops and queries `fmcluster sandbox` servers of its own",
}

# nodeid fragment -> why the test is end to end (it makes its own Cli instead of using a ``cli_fixture``)
E2E_TESTS: dict[str, str] = {
    "test_lifecycle_storage.py::": "creates a PCS cluster with Lustre through the installed command",
    "test_lifecycle_parallelcluster_lustre.py::": "creates a ParallelCluster stack with Lustre through the command",
    "test_instance_mix.py::test_pcs_creates_a_mixed_queue_in_its_own_subnet": "creates a PCS cluster",
    "test_instance_mix.py::test_parallelcluster_validators_accept_the_mix_in_the_sandbox": "runs the installed "
    "validate against the sandbox",
    "test_network_created.py::test_pcs_policies_and_groups_attach_diff_and_outlive_destroy": "creates, diffs and "
    "destroys a PCS cluster",
    "test_cluster_access.py::test_sandbox_flag_before_or_after_the_command": "runs the installed command with "
    "--sandbox against the sandbox",
    "test_smoke_eks_ends.py::test_a_signal_deletes_the_job_and_exits_like_ctrl_c": "runs the installed fmcluster "
    "smoke against the sandbox and signals it",
    "test_smoke_slurm_signals.py::": "starts a real one-host Slurm, runs the installed fmcluster smoke on it and "
    "signals it",
}

# nodeid fragment -> why the test is slow (waits on something slow that is not an end-to-end run)
SLOW_TESTS: dict[str, str] = {
    "test_packaging.py::": "builds the wheels and pip-installs a fresh light environment from the index",
    "test_smoke_slurm.py::": "starts a real one-host Slurm (slurmctld, slurmd, munge, sshd) and runs a job",
}

# The files that take longest (the end-to-end ones first), handed out first so that the two workers finish together
# instead of one starting a long file at the end.
# How it was ordered (2026-12-06, branch ci-time): the order of the last full measurement, `bench/suite_durations.py
# REPORT.xml` on the JUnit report of a clean-clone `.ci/run` at 8b140b0 on the 2-core machine
# (`PYTEST_ADDOPTS=--junitxml=REPORT.xml`; 2,426 s of worker time, pytest 1,232 s; the longest, test_lifecycle_eks
# 234 s, test_lifecycle_pcs 213 s, test_lifecycle_parallelcluster 172 s, test_lifecycle_eks_kill 160 s,
# test_converge 159 s), with the files added or grown since placed by their own time: test_eks_webhook_teardown_order
# ~50 s, test_smoke_eks_ends ~35 s (~30 s after ci-time), test_network_follows_capacity ~31 s, test_packaging +28 s,
# test_eks_system_row ~23 s, test_lifecycle_storage +12 s (the figures measured for the merges up to fb00879).
# The clean-clone run of 2026-12-06 07:58 was too slow under other engineers' load to finish in time: re-measure
# the same way (with --junitxml) on a quiet machine and paste suite_durations.py's list here.
LONGEST_FIRST: list[str] = [
    "test_lifecycle_eks.py",
    "test_lifecycle_pcs.py",
    "test_lifecycle_parallelcluster.py",
    "test_lifecycle_eks_kill.py",
    "test_converge.py",
    "test_ownership.py",
    "test_cluster_access.py",
    "test_schema_walk.py",
    "test_eks_kube.py",
    "test_lifecycle_hardware.py",
    "test_state_lifecycle.py",
    "test_lifecycle_reservation_group.py",
    "test_diff_waits_for_aws.py",
    "test_network_created.py",
    "test_lifecycle_ultraserver.py",
    "test_packaging.py",
    "test_state_file.py",
    "test_smoke_slurm.py",
    "test_throttle_visible.py",
    "test_sandbox_pcluster.py",
    "test_sandbox_eks.py",
    "test_eks_webhook_teardown_order.py",
    "test_lifecycle_storage.py",
    "test_openzfs_home.py",
    "test_network_follows_capacity.py",
    "test_smoke_eks_ends.py",
    "test_spec_errors.py",
    "test_hostile_files.py",
    "test_eks_updates.py",
    "test_eks_system_row.py",
    "test_cli_offline.py",
]

E2E_FIXTURE_ATTR = "fmcluster_e2e"


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]


def uses_e2e_fixture(item: pytest.Item) -> bool:
    """Whether a fixture the test requests was made by ``cli_fixture`` (it runs the installed command)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(getattr(defs[-1].func, E2E_FIXTURE_ATTR, False)
               for defs in info.name2fixturedefs.values() if defs)


def apply(items: list[pytest.Item]) -> None:
    """Mark e2e and slow tests, and put the longest files first (stable: the order inside a file stays)."""
    for item in items:
        name = _file(item)
        if (name in E2E_FILES or uses_e2e_fixture(item)
                or any(fragment in item.nodeid for fragment in E2E_TESTS)):
            item.add_marker(pytest.mark.e2e)
        if any(fragment in item.nodeid for fragment in SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_file(item), len(rank)))
