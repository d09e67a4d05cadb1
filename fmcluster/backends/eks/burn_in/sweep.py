"""``fmcluster burn-in`` on EKS, against the cluster's Kubernetes API (the kubernetes extra).

1. The queue's Ready nodes (``fmcluster.io/queue``); a node where a pod that is not a DaemonSet's holds GPUs or EFA
   devices is running a job: ``busy``, skipped and said, never checked.
2. One check MPIJob over the idle nodes (:func:`.jobs.check_manifest`), its launcher's log read back into each node's
   tool outputs (:mod:`.frames`) and judged (:func:`fmcluster.backends.burn_in.judge.judge`).
3. At a level that runs NCCL, the rounds (:func:`fmcluster.backends.burn_in.rounds.run`) over the nodes that passed:
   each round's runs are MPIJobs pinned to their nodes, submitted side by side.

Every job goes through smoke's :func:`~fmcluster.backends.eks.smoke.submit.submit_and_wait`, which deletes it
whatever happens; the runs of a round wait in threads, and an interrupt of the main thread (Ctrl-C, SIGTERM, SIGHUP:
:func:`~fmcluster.backends.smoke.termination.ends_like_ctrl_c`) deletes every job of the round before it ends.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from fmcluster.backends.burn_in import judge as judging
from fmcluster.backends.burn_in import pairs, report, rounds
from fmcluster.backends.burn_in.choice import Choice
from fmcluster.backends.eks.burn_in import frames, jobs
from fmcluster.backends.eks.kubernetes.access import KubeApi
from fmcluster.backends.eks.nodes import quotas
from fmcluster.backends.eks.smoke import mpijob, submit
from fmcluster.backends.eks.software import device_plugins
from fmcluster.backends.eks.software.network_topology import LAYER_LABEL
from fmcluster.backends.protocol import SmokeSink
from fmcluster.backends.smoke import nccl
from fmcluster.backends.smoke.checks import Check, Expectations
from fmcluster.backends.smoke.termination import ends_like_ctrl_c
from fmcluster.catalog.burn_in_levels import Level
from fmcluster.engine.waiting import Stop, pause
from fmcluster.errors import UsageError
from fmcluster.spec.models import Spec

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.protocol import Tick

HELD = (quotas.NVIDIA_GPU, quotas.EFA)
#: A burn-in job's pods are pinned to Ready nodes it chose idle: one the scheduler finds no place for this long will not
#: be placed by waiting (fewer GPUs or EFA devices advertised than the type has, huge pages the node lacks, a taint
#: not tolerated), so the job ends then, not at its timeout, and its nodes fail check ``job`` with the scheduler's
#: reason. Long enough for a node that has just turned Ready to pull and start its device plugins, whose devices
#: the pods ask for (a false failure here would reboot or replace a good node).
UNPLACEABLE_S = 600.0


def run(context: BackendContext, spec: Spec, choice: Choice, timeout_min: float, image: str | None,
        sink: SmokeSink) -> dict[str, Any]:
    """``fmcluster burn-in``: every Ready node of the queue that runs no job."""
    api = KubeApi.of(context.ctx, context.name)
    if api is None:
        raise UsageError(f"the Kubernetes API of {context.name} is not up in {context.region}: the cluster is not "
                         f"ready; `fmcluster status {context.name}` shows what exists")
    queue = choice.expect.queue.name
    paths = ready_nodes(api, queue)
    if not paths:
        raise UsageError(f"queue {queue} of {context.name} has no Ready node to burn in; `fmcluster status "
                         f"{context.name}` shows its nodes")
    return sweep(api, context.name, spec, choice, paths, timeout_min * 60, image, sink)


def sweep(api: KubeApi, cluster: str, spec: Spec, choice: Choice, paths: dict[str, tuple[str, ...]],
          timeout_s: float, image: str | None, sink: SmokeSink, stop: Stop | None = None,
          partners: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """The checks and rounds over the given nodes (each with its network layers, :func:`ready_nodes`): the command
    passes the queue's Ready nodes, the gate at ``create`` only those it still holds, with the walk's ``stop`` (it
    runs in a thread Ctrl-C does not reach: the stop ends its waits, and its jobs are deleted).

    ``partners``: nodes of the queue that passed before (the gate's released ones). When a single node passes its
    own checks, an all-reduce needs a second: the nearest idle partner joins its rounds (it is judged by nothing
    else, and its verdict stands), so a lone new node, a replacement or a rebooted one, is never released without
    an all-reduce over EFA."""
    expect, level = choice.expect, choice.level
    queue = expect.queue.name
    nodes = sorted(paths)
    _delete_leftovers(api, queue, sink)
    busy = _busy(api, nodes)
    for node, why in busy.items():
        sink.note(f"{node} is running a job ({why}): skipped")
    idle = tuple(n for n in nodes if n not in busy)
    if not idle:
        raise UsageError(f"every node of queue {queue} is running a job; burn-in never runs beside one: run it "
                         "when some are idle")
    with ends_like_ctrl_c():
        verdicts, unanswered = _checks(api, spec, expect, level, idle, timeout_s, image, sink, stop)
        serials = itertools.count(1)

        def measure(runs: list[rounds.Run]) -> dict[rounds.Run, float | None]:
            return _round(api, spec, expect, level, runs, serials, timeout_s, image, sink, stop)

        passed = [v.node for v in verdicts if v.passed]
        partner = _partner(api, passed[0], paths, partners) if len(passed) == 1 and partners else None
        placed = dict(paths) | ({partner: partners[partner]} if partner and partners else {})
        result, note = rounds.after_checks(passed + ([partner] if partner else []), level, choice.pair_floor_gb_s,
                                           measure, placed)
        if partner and result is not None:
            note = f"{passed[0]}, the one node that passed its own checks, with {partner}, which passed before"
    return report.build(cluster, expect, level, verdicts, busy, unanswered, result, note,
                        {"scheduler": spec.kubernetes.scheduler})


def _partner(api: KubeApi, node: str, paths: Mapping[str, tuple[str, ...]],
             partners: Mapping[str, tuple[str, ...]]) -> str | None:
    """The idle partner nearest ``node`` in the network (:func:`pairs.nearest`; ties: the first by name), or None
    when every partner runs a job."""
    candidates = sorted(n for n in partners if n != node)
    busy = _busy(api, candidates)
    return pairs.nearest(node, [n for n in candidates if n not in busy], {**partners, node: paths.get(node, ())})


def ready_nodes(api: KubeApi, queue: str) -> dict[str, tuple[str, ...]]:
    """The queue's Ready nodes, each with its place in the network: the network nodes EKS labels it with, from the
    top layer down (``topology.k8s.aws/network-node-layer-1`` … ``-N``, EKS user guide "Place distributed AI/ML
    workloads with network topology labels"; none on a type without EC2 topology)."""
    from lightkube.resources.core_v1 import Node

    found = api.call(f"listing the nodes of queue {queue}",
                     lambda: list(api.client.list(Node, labels={device_plugins.QUEUE_LABEL: queue})))
    ready = {}
    for node in found:
        conditions = {c.type: c.status for c in (node.status.conditions or [])} if node.status else {}
        if conditions.get("Ready") == "True" and not (node.spec and node.spec.unschedulable) and node.metadata \
                and node.metadata.name:
            labels = node.metadata.labels or {}
            layers = (labels.get(LAYER_LABEL.format(layer), "") for layer in itertools.count(1))
            ready[node.metadata.name] = tuple(itertools.takewhile(bool, layers))
    return ready


def _delete_leftovers(api: KubeApi, queue: str, sink: SmokeSink) -> None:
    """Burn-in's own MPIJobs of ``queue`` left by a run killed outright (SIGKILL: no cleanup ran), which would hold the
    nodes this run checks. Each job's name is found again by a rerun only for the check job, so every one labelled
    for the queue goes; another queue's are left alone: ``create`` gates its queues side by side, and one gate's
    start deleted the jobs another had just submitted (chaos kill-eks, seed 5102: "reading MPIJob …: 404")."""
    rtype = api.resource_type(mpijob.API_VERSION, mpijob.KIND)
    if rtype is None:
        return
    found: list[Any] = api.call("listing burn-in's MPIJobs", lambda: list(api.client.list(
        rtype, namespace="*", labels={jobs.BURN_IN_LABEL: "true", device_plugins.QUEUE_LABEL: queue})))
    for item in found:
        meta = getattr(item, "metadata", None)
        name, namespace = getattr(meta, "name", None), getattr(meta, "namespace", None)
        if name and namespace:
            sink.note(f"deleting MPIJob {namespace}/{name}, left by an earlier burn-in")
            api.call(f"deleting MPIJob {name}", functools.partial(api.client.delete, rtype, name,
                                                                  namespace=namespace))


def _busy(api: KubeApi, nodes: list[str]) -> dict[str, str]:
    """Node -> the pod holding its GPUs or EFA devices: a pod not a DaemonSet's (device plugins and exporters run on
    every node and hold none), Pending or Running, bound there, not burn-in's own."""
    from lightkube.resources.core_v1 import Pod

    pods = api.call("listing the pods on the queue's nodes", lambda: list(api.client.list(Pod, namespace="*")))
    busy: dict[str, str] = {}
    for pod in pods:
        node = pod.spec.nodeName if pod.spec else None
        meta = pod.metadata
        if node is None or node not in nodes or node in busy or meta is None or pod.spec is None or \
                (pod.status and pod.status.phase not in ("Pending", "Running")):
            continue
        if any(o.kind == "DaemonSet" for o in (meta.ownerReferences or [])) or \
                (meta.labels or {}).get(jobs.BURN_IN_LABEL):
            continue
        held = sorted({name for c in pod.spec.containers for name in HELD
                       for amounts in ((c.resources.requests or {}) if c.resources else {},
                                       (c.resources.limits or {}) if c.resources else {}) if name in amounts})
        if held:
            busy[node] = f"pod {meta.namespace}/{meta.name} holds {', '.join(held)}"
    return busy


def _checks(api: KubeApi, spec: Spec, expect: Expectations, level: Level, nodes: tuple[str, ...], timeout_s: float,
            image: str | None, sink: SmokeSink,
            stop: Stop | None = None) -> tuple[list[judging.NodeVerdict], dict[str, str]]:
    job = jobs.check_job(spec, expect, nodes, image)
    manifest = jobs.check_manifest(spec, expect, level, job, nodes, int(timeout_s))
    outcome = submit.submit_and_wait(api, job, manifest, time.monotonic() + timeout_s, sink, _domain(spec, job),
                                     UNPLACEABLE_S, stop)
    if not outcome.submitted:
        raise UsageError(f"the burn-in check job could not be submitted: {outcome.detail}")
    outputs, broken = frames.read(outcome.log, outcome.hosts)
    verdicts: list[judging.NodeVerdict] = []
    unanswered: dict[str, str] = {}
    for node in nodes:
        if node not in outputs:
            unanswered[node] = f"{outcome.state}: {outcome.detail}"
            continue
        verdict = judging.judge(outputs[node], expect, level)
        checks = tuple(Check(c.name, c.status, broken[(node, c.name)], c.found, c.expected, c.extra)
                       if (node, c.name) in broken else c for c in verdict.checks)
        verdicts.append(judging.NodeVerdict(node, checks))
    if unanswered:
        sink.warning(f"MPIJob {job.name} {outcome.state}: no output from {', '.join(unanswered)} ({outcome.detail})")
    return verdicts, unanswered


def _round(api: KubeApi, spec: Spec, expect: Expectations, level: Level, runs: list[rounds.Run],
           serials: Iterator[int], timeout_s: float, image: str | None,
           sink: SmokeSink, stop: Stop | None = None) -> dict[rounds.Run, float | None]:
    """One round: each run an MPIJob pinned to its nodes, side by side; each run's peak bus bandwidth (None when it
    did not finish)."""
    planned = []
    for nodes in runs:
        job = jobs.nccl_job(spec, expect, nodes, image, next(serials))
        planned.append((nodes, job, jobs.nccl_manifest(spec, level, job, nodes, int(timeout_s))))
    sink.note("all-reduce round: " + "; ".join(" + ".join(nodes) for nodes, _, _ in planned))
    deadline = time.monotonic() + timeout_s
    quiet = SmokeSink(note=lambda message: None, warning=sink.warning, ticker=silent)
    pool = ThreadPoolExecutor(max_workers=len(planned))
    try:
        futures = {nodes: pool.submit(submit.submit_and_wait, api, job, manifest, deadline, quiet,
                                      _domain(spec, job), UNPLACEABLE_S, stop) for nodes, job, manifest in planned}
        with sink.ticker(f"{len(planned)} all-reduce run(s)") as tick:
            started = time.monotonic()
            while not all(f.done() for f in futures.values()):
                tick(f"{sum(f.done() for f in futures.values())} of {len(futures)} done", time.monotonic() - started)
                pause(0.2, stop)
        return {nodes: _busbw(future.result()) for nodes, future in futures.items()}
    except BaseException:
        # Ctrl-C, a signal or the stop in this thread: the runs' own threads may still be waiting, so their jobs go
        # now
        _delete_all(api, [job for _, job, _ in planned])
        raise
    finally:
        pool.shutdown(wait=True)


def _domain(spec: Spec, job: mpijob.SmokeJob) -> dict[str, Any] | None:
    """The job's own ComputeDomain on an UltraServer queue, whose workers each claim one of its IMEX channels (as
    smoke's job: "a ComputeDomain per workload job", AWS's P6e-GB200 page); made before the job, deleted with it."""
    return mpijob.compute_domain(spec, job) if job.compute_domain else None


def _busbw(outcome: submit.Outcome) -> float | None:
    if outcome.state != "SUCCEEDED":
        return None
    result = nccl.parse(outcome.log)
    if result.wrong_results or result.out_of_bounds:
        return None
    return result.peak_busbw_gb_s


def _delete_all(api: KubeApi, planned: list[mpijob.SmokeJob]) -> None:
    rtype = api.resource_type(mpijob.API_VERSION, mpijob.KIND)
    for job in planned:
        with contextlib.suppress(Exception):  # the interrupt is what the user sees; a leftover is named by smoke
            if rtype is not None:
                submit.delete(api, rtype, job)


@contextlib.contextmanager
def silent(title: str) -> Iterator[Tick]:
    yield lambda text, elapsed: None
