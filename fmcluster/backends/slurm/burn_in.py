"""The burn-in gate's jobs on a Slurm cluster (issue 37; PCS and ParallelCluster), run inside the hold of
:mod:`fmcluster.backends.slurm.burn_in_hold`:

* :func:`check_nodes`: one batch job, one task per held node, runs the per-node tools of
  :data:`~fmcluster.backends.burn_in.node_outputs.TOOLS` (``fmcluster/scripts/burn_in_job.sh``) and brings each
  tool's exit code, stdout and stderr home as :class:`~fmcluster.backends.burn_in.node_outputs.NodeOutputs`, for the
  judge every backend shares;
* :func:`measure`: all_reduce_perf on several node sets side by side (``fmcluster/scripts/burn_in_nccl.sh``), each
  set's bus bandwidth, for the floors and the narrowing of :mod:`fmcluster.backends.burn_in.narrow`.

The seam for a Slurm backend's ``burn_in``::

    with burn_in_hold.hold(ssh, queue, minutes) as held:          # held.nodes, held.busy, held.unavailable
        outputs = burn_in.check_nodes(held, level)                 # list[NodeOutputs], one per node that answered
        figures = burn_in.measure(held, runs, level, ranks)        # {run: GB/s or None}
        burn_in_hold.release(held, passed, {node: "check: figure"})  # drain the failed, let the rest go
"""

from __future__ import annotations

import base64
import binascii
import math
import shlex
from collections.abc import Callable, Iterable, Sequence
from importlib import resources

from fmcluster.backends.burn_in import judge
from fmcluster.backends.burn_in.node_outputs import TOOLS, NodeOutputs, ToolRun
from fmcluster.backends.slurm import batch
from fmcluster.backends.slurm.burn_in_hold import Hold
from fmcluster.backends.smoke import nccl
from fmcluster.backends.smoke.termination import Terminated
from fmcluster.catalog.burn_in_levels import NCCL_ITERS, Level

Run = tuple[str, ...]
Poll = Callable[[batch.JobState, float], None]
# How long the per-node tools may take together, by level: DCGM's own durations (catalog/burn_in_levels.py: level 1
# "seconds", level 2 "approximately two minutes", level 3 "approximately 15 minutes") with room for the rest.
CHECK_MINUTES: dict[Level, int] = {"quick": 5, "standard": 10, "long": 30}
# Cheap queries first, so a DCGM run that overruns the time cannot cost them their answers.
_ORDER = ("gpus", "neuron", "efa", "dcgm")
_RECORD = "FMCLUSTER-BURN-IN"
_END = "FMCLUSTER-BURN-IN-END"


def tool_commands(level: Level, tools: Iterable[str] = TOOLS) -> dict[str, str]:
    """The command each check runs at ``level``, in the order the job runs them (``dcgmi diag -r`` gets the level's
    DCGM run level: :func:`fmcluster.backends.burn_in.judge.command`)."""
    chosen = set(tools)
    unknown = chosen - set(TOOLS)
    if unknown:
        raise ValueError(f"unknown burn-in check(s): {', '.join(sorted(unknown))}; the checks: {', '.join(TOOLS)}")
    names = [n for n in _ORDER if n in chosen] + sorted(chosen - set(_ORDER))
    return {n: judge.command(n, level) for n in names}


def check_nodes(hold: Hold, level: Level, *, tools: Iterable[str] = TOOLS, check_minutes: int | None = None,
                gpus_per_node: int | None = None, on_poll: Poll | None = None,
                poll_interval: float = 5.0) -> list[NodeOutputs]:
    """Run the per-node checks on every held node in one job in the hold's reservation; one NodeOutputs per node
    that answered (a node that did not, or whose records came back cut short, has none: the judge fails it).
    ``gpus_per_node`` asks Slurm for the GPUs (``--gpus-per-node``) where it hands them out as GRES, so the tools
    see them. Ctrl-C and SIGTERM cancel the job; a job over its time is cancelled and raises SlurmError."""
    if not hold.nodes:
        return []
    commands = tool_commands(level, tools)
    seconds = 60 * (check_minutes or CHECK_MINUTES[level])
    environment = {"FMC_TOOL_NAMES": " ".join(commands), "FMC_CHECK_SECONDS": str(seconds),
                   **{f"FMC_TOOL_{name}": command for name, command in commands.items()}}
    # the tools' time, the step's minute of slack (burn_in_job.sh), then the collection, a few seconds per node
    minutes = math.ceil(seconds / 60) + 3 + math.ceil(len(hold.nodes) / 30)
    output = _run_job(hold, "burn_in_job.sh", "fmcluster-burn-in", hold.nodes, minutes, environment,
                      gpus_per_node, on_poll, poll_interval)
    return parse_records(output)


def measure(hold: Hold, runs: Sequence[Run], level: Level, ranks_per_node: int, *,
            nccl_tests: str | None = None, mpi: str | None = "pmix", run_minutes: int = 10,
            gpus_per_node: int | None = None,
            on_poll: Poll | None = None, poll_interval: float = 5.0) -> dict[Run, float | None]:
    """all_reduce_perf on each run's nodes, the runs side by side in one job in the hold's reservation: each run's
    peak bus bandwidth in GB/s (the plateau of large messages, the figure the catalog's floors are measured as), or
    None when the run did not finish, failed, or printed no table. Runs share no node and use held nodes only.
    ``mpi``: srun's ``--mpi``, PMIx as AWS's nccl-tests job starts all_reduce_perf on Slurm (``srun --mpi=pmix``,
    with ``--gpus-per-node=8`` "for AWS ParallelCluster": aws-samples/awsome-distributed-training
    ``micro-benchmarks/nccl-tests/slurm/nccl-tests-container.sbatch``, commit 01b6b78f); None leaves it to the
    cluster's ``MpiDefault``."""
    runs = [tuple(run) for run in runs]
    used: list[str] = [node for run in runs for node in run]
    if len(used) != len(set(used)):
        raise ValueError("runs measured side by side must not share a node")
    strangers = set(used) - set(hold.nodes)
    if strangers:
        raise ValueError(f"not held by this burn-in: {', '.join(sorted(strangers))}")
    if not runs:
        return {}
    environment = {"FMC_RUNS": " ".join(":".join(run) for run in runs), "FMC_RANKS_PER_NODE": str(ranks_per_node),
                   "FMC_NCCL_ITERS": str(max(1, NCCL_ITERS[level])), "FMC_STEP_MINUTES": str(run_minutes)}
    if nccl_tests:
        environment["FMC_NCCL_TESTS"] = nccl_tests
    if mpi:
        environment["FMC_MPI"] = mpi
    output = _run_job(hold, "burn_in_nccl.sh", "fmcluster-burn-in-nccl", tuple(sorted(used)), run_minutes + 2,
                      environment, gpus_per_node, on_poll, poll_interval)
    texts = parse_nccl_runs(output, len(runs))
    return {run: _bandwidth(texts[i]) for i, run in enumerate(runs)}


def parse_records(output: str) -> list[NodeOutputs]:
    """The job's records as NodeOutputs, in node order. A node's records count only when its END line came and
    every record is whole (its byte counts match); anything else in the output is ignored."""
    runs: dict[str, dict[str, ToolRun]] = {}
    broken: set[str] = set()
    ended: dict[str, int] = {}
    for line in output.splitlines():
        fields = line.split(" ")
        if fields[0] == _END and len(fields) == 3 and fields[2].isdigit():
            ended[fields[1]] = int(fields[2])
        elif fields[0] == _RECORD and len(fields) == 8:
            node, tool = fields[1], fields[2]
            run = _tool_run(fields[3:])
            if run is None:
                broken.add(node)
            else:
                runs.setdefault(node, {})[tool] = run
    return [NodeOutputs(node, runs.get(node, {})) for node, count in sorted(ended.items())
            if node not in broken and len(runs.get(node, {})) == count]


def parse_nccl_runs(output: str, count: int) -> list[str | None]:
    """Each run's all_reduce_perf output by index, None where the run failed or its record is missing or cut."""
    texts: list[str | None] = [None] * count
    for line in output.splitlines():
        fields = line.split(" ")
        if fields[0] != "FMCLUSTER-NCCL-RUN" or len(fields) != 5 or not fields[1].isdigit():
            continue
        index = int(fields[1])
        text = _decode(fields[3], fields[4])
        if index < count and fields[2] == "0" and text is not None:
            texts[index] = text
    return texts


def _bandwidth(text: str | None) -> float | None:
    return None if text is None else nccl.parse(text).peak_busbw_gb_s


def _tool_run(fields: list[str]) -> ToolRun | None:
    code, out_len, out_b64, err_len, err_b64 = fields
    stdout, stderr = _decode(out_len, out_b64), _decode(err_len, err_b64)
    if stdout is None or stderr is None or not (code == "absent" or code.isdigit()):
        return None
    return ToolRun(None if code == "absent" else int(code), stdout, stderr)


def _decode(length: str, data: str) -> str | None:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not length.isdigit() or len(raw) != int(length):
        return None
    return raw.decode("utf-8", errors="replace")


def _script(name: str) -> str:
    return resources.files("fmcluster").joinpath("scripts").joinpath(name).read_text()


def _run_job(hold: Hold, script: str, job_name: str, nodes: tuple[str, ...], minutes: int,
             environment: dict[str, str], gpus_per_node: int | None, on_poll: Poll | None,
             poll_interval: float) -> str:
    """Submit ``script`` over ``nodes`` in the hold's reservation, wait, and return its output (its file removed)."""
    remote = hold.remote
    home = hold.home
    output_path = f"{home}/{job_name}-%j.out"
    options = [f"--job-name={job_name}", f"--partition={hold.partition}", f"--reservation={hold.reservation}",
               f"--nodelist={','.join(nodes)}", f"--nodes={len(nodes)}", "--ntasks-per-node=1", "--exclusive",
               f"--time={minutes}", f"--chdir={home}", f"--output={output_path}"]
    if gpus_per_node:
        options.append(f"--gpus-per-node={gpus_per_node}")
    job_id = batch.submit(remote, _script(script), options, environment, what=f"the {job_name} job")
    path = output_path.replace("%j", job_id)
    # SIGTERM and SIGHUP already raise Terminated here, from burn_in_hold.hold, whose handler also ignores a repeated
    # signal while the job is cancelled and the reservation removed (a handler of its own here would not).
    try:
        job = batch.wait(remote, job_id, minutes * 60 + 60, on_poll or (lambda state, elapsed: None),
                         interval=poll_interval)
    except (KeyboardInterrupt, Terminated):
        batch.cancel(remote, job_id)
        remote.run(f"rm -f {shlex.quote(path)}")
        raise
    text = batch.collect(remote, path, job, hold.partition, hold.reservation)
    remote.run(f"rm -f {shlex.quote(path)}")
    return text

