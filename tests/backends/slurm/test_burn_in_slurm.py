"""The Slurm side of the burn-in gate (issue 37 items 1 and 5) on a real one-host Slurm (tests/fixtures/slurm.py,
Debian's slurm-wlm 22.05.8): the maintenance reservation, the check job, the all-reduce job, release and drain.

The fixture's ssh sessions put a directory of fake tools first on PATH; the jobs they submit export it. A test fills
it with fakes that print the real captures of tests/data/burn-in/ and tests/data/nccl-tests/ byte for byte, or leaves
it empty (this machine has no nvidia-smi, dcgmi, fi_info, neuron-ls or all_reduce_perf). What a fake writes to
which stream and its exit code are the test's choice, not a claim about the real tool: the point is that the job
carries each stream and the code home unchanged and per node."""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fixtures.slurm import running

from fmcluster.aws.login import SshTarget
from fmcluster.backends.burn_in.node_outputs import NodeOutputs, ToolRun
from fmcluster.backends.slurm import batch, burn_in, burn_in_hold
from fmcluster.backends.smoke.termination import Terminated

DATA = Path(__file__).resolve().parents[2] / "data"
CAPTURES = DATA / "burn-in"
PARTITION = "gpu"
RESERVATION = "fmcluster-burn-in-gpu"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm")
    tools = root / "tools"
    tools.mkdir()
    with running(root, PARTITION, tools_dir=tools, nodes=2) as slurm:
        yield slurm


@pytest.fixture
def tools(slurm):
    """The fake tools' directory, emptied after each test."""
    directory = slurm.root / "tools"
    yield directory
    for path in directory.iterdir():
        path.unlink()


@pytest.fixture
def remote(slurm) -> batch.Remote:
    return batch.Remote(SshTarget("burn-in", "127.0.0.1", slurm.user, slurm.ssh_port, str(slurm.identity)))


def _fake(tools: Path, name: str, body: str) -> None:
    path = tools / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _scontrol(slurm, *args: str, check: bool = True) -> str:
    env = {**os.environ, "SLURM_CONF": str(slurm.slurm_conf)}
    return subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True, check=check).stdout


def _sbatch(slurm, *args: str) -> str:
    env = {**os.environ, "SLURM_CONF": str(slurm.slurm_conf)}
    out = subprocess.run(["sbatch", "--parsable", f"--partition={PARTITION}", "--output=/dev/null", *args],
                         env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().split(";")[0]


def _job(slurm, job_id: str) -> dict[str, str]:
    text = _scontrol(slurm, "show", "job", "-o", job_id)
    return dict(item.split("=", 1) for item in text.split() if "=" in item)


def _until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _output_files(jobs: set[str]) -> list[Path]:
    home = Path(os.path.expanduser("~"))  # the fixture's ssh user is this process's user
    return [path for job in jobs for path in home.glob(f"fmcluster-burn-in*-{job}.out") if path.exists()]


def _reservations(slurm) -> str:
    return _scontrol(slurm, "show", "reservation", check=False)


def _per_node(first: Path, second: Path, then: str = "") -> str:
    """A fake's body that prints ``first`` on fmcnode1 and ``second`` on fmcnode2 (the nodes share this host)."""
    return (f'if [ "$SLURMD_NODENAME" = fmcnode1 ]; then cat {first}; else cat {second}; fi\n' + then)


def test_the_check_job_brings_home_each_nodes_tools_output_and_held_nodes_take_no_other_job(slurm, tools, remote):
    # Exit codes and streams: the test's choice (module docstring). The nodes print different captures where there
    # are two, so a record landing under the wrong node shows; both print dcgmi's 2.4 kB of JSON at once, more than
    # one srun I/O message (1,024 bytes, burn_in_job.sh). dcgmi records how it was called.
    _fake(tools, "nvidia-smi", _per_node(CAPTURES / "nvidia-smi-L-8x-a100.txt",
                                         CAPTURES / "nvidia-smi-L-2x-a100-pod.txt"))
    _fake(tools, "dcgmi", f'echo "$@" > {tools / "dcgmi.args"}\n'
                          f'cat {CAPTURES / "dcgm-3.1.0-nvidia-real-output.json"}\n')
    _fake(tools, "fi_info", '[ "$SLURMD_NODENAME" = fmcnode1 ] && '
                            f'exec cat {CAPTURES / "fi_info-p4de.24xlarge-4-devices.txt"}\n'
                            f'cat {CAPTURES / "fi_info-no-efa.txt"} >&2\nexit 1\n')
    _fake(tools, "neuron-ls", f"cat {CAPTURES / 'neuron-ls-trn2n.48xlarge-show-all-procs.txt'}\n"
                              f"cat {CAPTURES / 'neuron-ls-trn2n.48xlarge.txt'} >&2\nexit 3\n")
    _fake(tools, "all_reduce_perf", _per_node(DATA / "nccl-tests" / "aws-samples-2x-p5.48xlarge.txt",
                                              DATA / "nccl-tests" / "aws-samples-2x-p4de.24xlarge.txt"))
    with burn_in_hold.hold(remote, PARTITION, minutes=10) as held:
        assert held.nodes == ("fmcnode1", "fmcnode2") and held.busy == () and held.reservation == RESERVATION
        shown = _reservations(slurm)
        assert f"ReservationName={RESERVATION}" in shown and "Nodes=fmcnode[1-2]" in shown, shown
        assert re.search(r"Flags=\S*MAINT", shown) and f"Users={slurm.user}" in shown, shown
        # a job that does not ask for the reservation (its own user's, even) waits while the nodes are held
        outsider = _sbatch(slurm, "--wrap", "true")
        _until(lambda: "Reserved_for_maintenance" in _job(slurm, outsider).get("Reason", ""))
        assert _job(slurm, outsider)["JobState"] == "PENDING"

        jobs: set[str] = set()
        outputs = burn_in.check_nodes(held, "standard", poll_interval=0.3, on_poll=lambda s, t: jobs.add(s.job_id))
        # Debian's slurm-wlm lists mpi/pmix but this machine has no libpmix2 for it to load: the cluster's
        # MpiDefault (none) starts the fake
        figures = burn_in.measure(held, [("fmcnode1",), ("fmcnode2",)], "standard", ranks_per_node=1, mpi=None,
                                  poll_interval=0.3, on_poll=lambda s, t: jobs.add(s.job_id))
        assert _job(slurm, outsider)["JobState"] == "PENDING"  # still waiting after both jobs ran
        burn_in_hold.release(held, passed=["fmcnode1", "fmcnode2"], failed={})
        # released by release itself, not by the block's end: the reservation is gone and the waiting job runs
        assert "ReservationName" not in _reservations(slurm)
        _until(lambda: _job(slurm, outsider)["JobState"] in ("RUNNING", "COMPLETED"))
    neuron = ToolRun(3, (CAPTURES / "neuron-ls-trn2n.48xlarge-show-all-procs.txt").read_text(),
                     (CAPTURES / "neuron-ls-trn2n.48xlarge.txt").read_text())
    assert outputs == [
        NodeOutputs("fmcnode1", {
            "gpus": ToolRun(0, (CAPTURES / "nvidia-smi-L-8x-a100.txt").read_text(), ""),
            "neuron": neuron,
            "efa": ToolRun(0, (CAPTURES / "fi_info-p4de.24xlarge-4-devices.txt").read_text(), ""),
            "dcgm": ToolRun(0, (CAPTURES / "dcgm-3.1.0-nvidia-real-output.json").read_text(), ""),
        }),
        NodeOutputs("fmcnode2", {
            "gpus": ToolRun(0, (CAPTURES / "nvidia-smi-L-2x-a100-pod.txt").read_text(), ""),
            "neuron": neuron,
            "efa": ToolRun(1, "", (CAPTURES / "fi_info-no-efa.txt").read_text()),
            "dcgm": ToolRun(0, (CAPTURES / "dcgm-3.1.0-nvidia-real-output.json").read_text(), ""),
        }),
    ]
    # standard runs DCGM level 2 (issue 37: "standard (DCGM level 2, ...)")
    assert (tools / "dcgmi.args").read_text() == "diag -r 2 -j\n"
    # each capture's best bus bandwidth, its last row (aws-samples/awsome-distributed-training nccl-tests README):
    # 2x p5.48xlarge at 16 GiB, in place, 487.26 GB/s; 2x p4de.24xlarge at 2 GiB, 78.33 GB/s
    assert figures == {("fmcnode1",): 487.26, ("fmcnode2",): 78.33}
    assert len(jobs) == 2 and not _output_files(jobs)  # read, then removed


def test_without_the_tools_each_check_is_not_installed(slurm, tools, remote):
    with burn_in_hold.hold(remote, PARTITION, minutes=10) as held:
        outputs = burn_in.check_nodes(held, "quick", poll_interval=0.3)
        burn_in_hold.release(held, passed=held.nodes, failed={})
    absent = ToolRun(None, "", "")
    assert outputs == [NodeOutputs(node, {"gpus": absent, "neuron": absent, "efa": absent, "dcgm": absent})
                       for node in ("fmcnode1", "fmcnode2")]
    assert "ReservationName" not in _reservations(slurm)


def test_a_failed_node_is_drained_with_its_reason_and_resumes_when_told(slurm, remote):
    _scontrol(slurm, "create", "reservation", f"ReservationName={RESERVATION}", "StartTime=now", "Duration=5",
              "Users=root", "Flags=MAINT", "Nodes=fmcnode1")  # as a killed run leaves it: removed first
    with burn_in_hold.hold(remote, PARTITION, minutes=10) as held:
        assert held.nodes == ("fmcnode1", "fmcnode2")
        # fmcnode2 gets no verdict: it never joins unjudged
        burn_in_hold.release(held, passed=[], failed={"fmcnode1": "dcgm level 2: GPU 3 failed Memory"})
        assert "ReservationName" not in _reservations(slurm)
    try:
        nodes = {name: _scontrol(slurm, "show", "node", "-o", name) for name in ("fmcnode1", "fmcnode2")}
        for node in nodes.values():
            assert re.search(r"State=\S*DRAIN", node), node
        assert "Reason=fmcluster burn-in: dcgm level 2: GPU 3 failed Memory [" in nodes["fmcnode1"]
        assert "Reason=fmcluster burn-in: no verdict [" in nodes["fmcnode2"]
        sinfo = subprocess.run(["sinfo", "-R", "-h", "-o", "%N|%E"], capture_output=True, text=True,
                               env={**os.environ, "SLURM_CONF": str(slurm.slurm_conf)}).stdout
        assert "fmcnode1|fmcluster burn-in: dcgm level 2: GPU 3 failed Memory" in sinfo, sinfo
    finally:
        burn_in_hold.resume(remote, ["fmcnode1", "fmcnode2"])
    for name in ("fmcnode1", "fmcnode2"):
        node = _scontrol(slurm, "show", "node", "-o", name)
        assert "DRAIN" not in re.search(r"State=(\S+)", node).group(1), node


def test_a_busy_node_is_never_held(slurm, remote):
    job = _sbatch(slurm, "--nodelist=fmcnode1", "--wrap", "sleep 60")
    try:
        _until(lambda: _job(slurm, job)["JobState"] == "RUNNING")
        with burn_in_hold.hold(remote, PARTITION, minutes=10) as held:
            assert held.nodes == ("fmcnode2",) and held.busy == ("fmcnode1",)
            shown = _reservations(slurm)
            assert "Nodes=fmcnode2 " in shown, shown
        assert _job(slurm, job)["JobState"] == "RUNNING"  # untouched
    finally:
        subprocess.run(["scancel", job], env={**os.environ, "SLURM_CONF": str(slurm.slurm_conf)})
    _until(lambda: re.search(r"State=IDLE ", _scontrol(slurm, "show", "node", "-o", "fmcnode1")) is not None)


@pytest.mark.parametrize("how", ["error", "SIGTERM"])
def test_the_hold_is_removed_whatever_ends_the_block(slurm, remote, how):
    with pytest.raises(RuntimeError if how == "error" else Terminated):
        with burn_in_hold.hold(remote, PARTITION, minutes=10) as held:
            assert held.nodes == ("fmcnode1", "fmcnode2")
            assert f"ReservationName={RESERVATION}" in _reservations(slurm)
            if how == "error":
                raise RuntimeError("the judge broke")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert "ReservationName" not in _reservations(slurm)
    assert "DRAIN" not in _scontrol(slurm, "show", "node", "-o")  # let go unjudged, not drained


def test_sigterm_during_the_check_job_cancels_it_and_removes_the_hold(slurm, tools, remote):
    _fake(tools, "nvidia-smi", "sleep 60\n")  # the job is still running when the signal comes
    jobs: list[str] = []

    def signal_once_running(state: batch.JobState, elapsed: float) -> None:
        jobs.append(state.job_id)
        if state.state == "RUNNING" and _output_files({state.job_id}):  # the script has started
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Terminated):
        with burn_in_hold.hold(remote, PARTITION, minutes=10) as held:
            burn_in.check_nodes(held, "quick", on_poll=signal_once_running, poll_interval=0.3)
    assert _job(slurm, jobs[-1])["JobState"] == "CANCELLED" and not _output_files(set(jobs))
    assert "ReservationName" not in _reservations(slurm)


def test_records_cut_short_or_without_their_end_count_as_no_answer():
    line = "FMCLUSTER-BURN-IN n1 gpus 0 4 YWJjZA== 0 "  # "abcd": 4 bytes
    assert burn_in.parse_records(f"{line}\nFMCLUSTER-BURN-IN-END n1 1\n") == [
        NodeOutputs("n1", {"gpus": ToolRun(0, "abcd", "")})]
    assert burn_in.parse_records(f"{line}\n") == []  # no END line: the node never finished
    cut = "FMCLUSTER-BURN-IN n1 gpus 0 5 YWJjZA== 0 "  # says 5 bytes, carries 4
    assert burn_in.parse_records(f"{cut}\nFMCLUSTER-BURN-IN-END n1 1\n") == []
    assert burn_in.parse_records(f"{line}\nFMCLUSTER-BURN-IN-END n1 2\n") == []  # a record missing


def test_a_run_without_all_reduce_perf_or_cut_short_has_no_figure():
    table = (DATA / "nccl-tests" / "aws-samples-2x-p5.48xlarge.txt").read_bytes()
    whole = f"FMCLUSTER-NCCL-RUN 0 0 {len(table)} {base64.b64encode(table).decode()}"
    assert burn_in.parse_nccl_runs(whole, 1) == [table.decode()]
    assert burn_in.parse_nccl_runs("FMCLUSTER-NCCL-ABSENT all_reduce_perf not found on n1\n", 2) == [None, None]
    assert burn_in.parse_nccl_runs(whole.replace(" 0 0 ", " 0 1 ", 1), 1) == [None]  # the run failed
    assert burn_in.parse_nccl_runs(whole[:-8], 1) == [None]  # cut short


def test_a_drain_reason_fits_slurmdbds_column():
    assert burn_in_hold.drain_reason("efa: 3 of\n4 devices") == "fmcluster burn-in: efa: 3 of 4 devices"
    long = burn_in_hold.drain_reason("dcgm: " + "é" * 300)
    assert long.startswith("fmcluster burn-in: dcgm: é") and long.endswith("...")
    assert len(long.encode()) <= 255  # MySQL tinytext (burn_in_hold's docstring)
