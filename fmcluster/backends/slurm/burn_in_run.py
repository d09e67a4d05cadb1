"""``fmcluster burn-in`` on a Slurm cluster (PCS and ParallelCluster both call :func:`run`), over ssh to the login
node as ``smoke`` is: the queue's idle nodes held in a maintenance reservation (:mod:`.burn_in_hold`), the per-node
checks as one job in it and the all-reduce rounds as jobs of side-by-side runs (:mod:`.burn_in`), paired by the
network's shape where Slurm's topology holds it (:mod:`.topology_read`), judged by the judge and rounds every backend
shares (:mod:`fmcluster.backends.burn_in`), then the failed nodes drained with a reason
that names their check and figure and the rest let go. The queue's partition has the queue's name."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

from fmcluster.backends.burn_in import judge as judging
from fmcluster.backends.burn_in import report, rounds
from fmcluster.backends.burn_in.choice import choose
from fmcluster.backends.slurm import batch, burn_in, burn_in_hold, smoke, topology_read
from fmcluster.errors import UsageError

HOLD_JOBS = 12

if TYPE_CHECKING:
    from fmcluster.backends.burn_in.choice import Choice
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.protocol import Backend, BurnInRequest, SmokeSink


def run(backend: Backend, context: BackendContext, request: BurnInRequest, sink: SmokeSink) -> dict[str, Any]:
    if request.image:
        raise UsageError(f"--image is for Kubernetes clusters; {context.name} runs its burn-in as Slurm jobs on the "
                         "nodes' own software (--nccl-tests names all_reduce_perf there)")
    spec = context.require_spec()
    choice = choose(spec, request.queue, request.level)
    ssh = smoke.target(backend, context, request)
    partition = choice.expect.queue.name
    job_minutes = max(1, math.ceil(request.timeout_min))
    # How long the reservation lasts if nothing removes it (fmcluster killed outright): the check job and the rounds
    # of a large queue (pairs, crossings, ⌈log2 N⌉ + 1 narrowing rounds), each at most one job's time.
    hold_minutes = job_minutes * HOLD_JOBS
    sink.note(f"{ssh.via}: holding the idle nodes of partition {partition} in reservation "
              f"{burn_in_hold.reservation_name(partition)}")
    try:
        with burn_in_hold.hold(ssh, partition, hold_minutes) as held:
            if not held.nodes:
                raise UsageError(f"partition {partition} of {context.name} has no idle node to burn in ("
                                 + (f"busy: {', '.join(held.busy)}; " if held.busy else "")
                                 + (", ".join(f"{n} {s}" for n, s in held.unavailable.items()) or "no node") + ")")
            return _checked(context.name, held, choice, request, job_minutes, sink)
    except batch.SlurmError as exc:
        raise UsageError(f"burn-in of {context.name}: {exc}") from None


def _checked(name: str, held: burn_in_hold.Hold, choice: Choice, request: BurnInRequest, job_minutes: int,
             sink: SmokeSink) -> dict[str, Any]:
    expect, level = choice.expect, choice.level
    busy = {node: "a job runs there" for node in held.busy}
    for node, why in busy.items():
        sink.note(f"{node}: {why}: skipped")
    sink.note(f"checking {len(held.nodes)} node(s) at level {level}")
    with sink.ticker("check job") as tick:
        outputs = burn_in.check_nodes(held, level, tools=judging.checks_run(expect, level),
                                      on_poll=lambda state, t: tick(state.state, t))
    answered = {o.node: o for o in outputs}
    verdicts = [judging.judge(answered[node], expect, level) for node in held.nodes if node in answered]
    unanswered = {node: "no output from its step" for node in held.nodes if node not in answered}
    serials = itertools.count(1)

    def measure(runs: list[rounds.Run]) -> dict[rounds.Run, float | None]:
        sink.note(f"all-reduce round {next(serials)}: " + "; ".join(" + ".join(r) for r in runs))
        return burn_in.measure(held, runs, level, expect.accelerators or 1, nccl_tests=request.nccl_tests,
                               run_minutes=job_minutes)

    passed = [v.node for v in verdicts if v.passed]
    paths = topology_read.node_paths(held.remote, passed) if len(passed) >= 2 else {}
    if paths:
        sink.note(f"pairing by Slurm's topology: {len(paths)} of {len(passed)} node(s) placed in the network")
    nccl, note = rounds.after_checks(passed, level, choice.pair_floor_gb_s, measure, paths)
    result = report.build(name, expect, level, verdicts, busy, unanswered, nccl, note,
                          {"unavailable": dict(held.unavailable)})
    failed = {n["node"]: "; ".join(f"{c['name']}: {c['detail']}" for c in n["checks"] if c["status"] not in
                                   ("passed", "skipped")) for n in result["nodes"] if n["state"] == "failed"}
    burn_in_hold.release(held, [n["node"] for n in result["nodes"] if n["state"] == "passed"], failed)
    if failed:
        sink.note(f"drained {len(failed)} node(s) with reason `{burn_in_hold.REASON_PREFIX.strip()} …` "
                  "(`sinfo -R`; `scontrol update NodeName=… State=RESUME` after a repair)")
    return result
