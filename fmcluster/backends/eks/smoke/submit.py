"""``fmcluster smoke`` on EKS: the nccl-tests MPIJob (:mod:`fmcluster.backends.eks.smoke.mpijob`) through the queue's
scheduler, then the launcher's log, judged as the Slurm job's output is (:func:`fmcluster.backends.smoke.checks.judge`).

The job is deleted whatever happens — a result, a refusal, the timeout, Ctrl-C, SIGTERM or SIGHUP
(:mod:`fmcluster.backends.smoke.termination`) — so a smoke test never leaves a job holding GPU nodes. A job of the same
name left by a killed run (SIGKILL) is deleted first.

A job the MPI Operator never acts on ends the wait early: the operator gives every MPIJob it reconciles a
``Created`` condition first (kubeflow/mpi-operator v2 ``mpi_job_controller.go``, ``syncHandler``: "MPIJob <ns>/<name>
is created."), so a job with no condition after :data:`OPERATOR_SILENT_S` has no operator looking at it (its
controller is down, or, in the sandbox, there is none) and waiting out the timeout would show nothing more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fmcluster.backends.eks.kubernetes.access import KubeApi, KubeApiError
from fmcluster.backends.eks.smoke import mpijob
from fmcluster.backends.eks.software.releases import MPI_OPERATOR
from fmcluster.backends.smoke.checks import Check, Expectations, judge, report_of
from fmcluster.backends.smoke.termination import ends_like_ctrl_c
from fmcluster.engine.waiting import Stop, pause
from fmcluster.errors import FmclusterError
from fmcluster.spec.models import Spec

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.protocol import SmokeSink

POLL_S = 2.0
# How long a leftover job of the same name may take to go before the new one is created.
LEFTOVER_WAIT_S = 60.0
# How long a submitted job may go without any condition from the MPI Operator (it sets Created within a second of
# seeing the job) before the wait ends with NO_OPERATOR.
OPERATOR_SILENT_S = 60.0


@dataclass
class Outcome:
    """How the job ended: its state (an MPIJob condition, TIMEOUT, REFUSED, ...), why, and the launcher's log."""

    state: str
    detail: str
    submitted: bool = True  # whether the job reached the cluster
    log: str = ""
    hosts: dict[str, str] | None = None  # worker pod name -> node name


def run(context: BackendContext, spec: Spec, expect: Expectations, timeout_min: float, image: str | None,
        sink: SmokeSink) -> dict[str, Any]:
    """Submit, wait at most ``timeout_min`` minutes, read, judge, delete: the report of docs/smoke-json.md."""
    job = mpijob.smoke_job(spec, expect.queue, expect.nodes, image)
    deadline = time.monotonic() + timeout_min * 60
    manifest = mpijob.manifest(spec, job, int(timeout_min * 60))
    domain = mpijob.compute_domain(spec, job) if job.compute_domain else None
    api = KubeApi.of(context.ctx, context.name)
    if api is None:
        outcome = Outcome("NO_API", f"the Kubernetes API of {context.name} is not up in {context.region}; "
                                    f"`fmcluster status {context.name}` shows what exists", submitted=False)
    else:
        with ends_like_ctrl_c():
            outcome = submit_and_wait(api, job, manifest, deadline, sink, domain)
    return _report(spec, expect, job, outcome)


def submit_and_wait(api: KubeApi, job: mpijob.SmokeJob, manifest: dict[str, Any], deadline: float, sink: SmokeSink,
                     domain: dict[str, Any] | None = None, unplaceable_s: float | None = None,
                     stop: Stop | None = None) -> Outcome:
    """Submit the job, wait for its end (or ``deadline``), read its launcher's log, delete it. With
    ``unplaceable_s``, a job with a pod the scheduler has found no node for that long ends ``UNSCHEDULABLE`` (for
    jobs pinned to nodes that exist, where waiting longer would not help). With ``stop`` (a job run from a walk's
    background work, which Ctrl-C cannot reach), the wait ends with :class:`Stopped` when it is set, and the job is
    deleted on the way out as it is after Ctrl-C."""
    what = f"MPIJob {job.namespace}/{job.name}"
    try:
        rtype = api.resource_type(mpijob.API_VERSION, mpijob.KIND, f"submitting {what}")
    except FmclusterError as exc:  # the API did not answer, or refused the caller
        return Outcome("FAILED", str(exc).splitlines()[0], submitted=False)
    if rtype is None:
        return Outcome("NO_MPIJOB_KIND", f"the cluster's API serves no {mpijob.KIND} ({mpijob.API_VERSION}): the MPI "
                                         "Operator is not installed", submitted=False)
    sent = False
    try:
        delete(api, rtype, job, wait_until=min(deadline, time.monotonic() + LEFTOVER_WAIT_S))
        sink.note(f"submitting {what} to queue {job.queue.name}: {job.nodes} worker(s) × {job.gpus} GPU(s), "
                  f"{job.efa} EFA device(s), image {job.image}"
                  + (f", each claiming an IMEX channel of ComputeDomain {job.compute_domain}" if domain else ""))
        sent = True  # from here on it may exist (a Ctrl-C can land after the API took it): delete it at the end
        try:
            if domain is not None:
                _make_domain(api, job, domain)
            api.call(f"submitting {what}", lambda: api.client.create(rtype(manifest), namespace=job.namespace))
        except KubeApiError as exc:
            return Outcome("REFUSED", f"the Kubernetes API refused it: {exc.code} {exc.reason}: {exc.api_message}",
                           submitted=False)
        # The operator deletes running workers when the job ends (cleanPodPolicy: Running), so where each ran is
        # read while it runs.
        placed: dict[str, str] = {}

        def while_running() -> None:
            if len(placed) < job.nodes:
                placed.update(_worker_nodes(api, job))

        with sink.ticker(what) as tick:
            state, detail = _wait(api, rtype, job, deadline, tick, while_running, unplaceable_s, stop)
        log, hosts = _launcher_log(api, job)
        return Outcome(state, detail, log=log, hosts={**placed, **hosts})
    except FmclusterError as exc:
        return Outcome("FAILED", str(exc).splitlines()[0], submitted=sent)
    finally:
        if sent:
            try:
                delete(api, rtype, job)
                if domain is not None:
                    _delete_domain(api, job)
            except FmclusterError as exc:  # the report still comes; the leftover is named
                sink.warning(f"{what} may be left on the cluster ({str(exc).splitlines()[0]}); `fmcluster smoke` "
                             f"deletes it on its next run, or: kubectl delete mpijob -n {job.namespace} {job.name}"
                             + (f"; kubectl delete computedomain -n {job.namespace} {job.compute_domain}"
                                if domain is not None else ""))


def _wait(api: KubeApi, rtype: type, job: mpijob.SmokeJob, deadline: float,
          tick: Callable[[str, float], None], while_running: Callable[[], None] = lambda: None,
          unplaceable_s: float | None = None, stop: Stop | None = None) -> tuple[str, str]:
    """Until the MPIJob Succeeded or Failed, or ``deadline``: (state, detail); ``while_running`` is called on each
    look at the job while its Running condition holds; with ``unplaceable_s`` see :func:`submit_and_wait`."""
    started = time.monotonic()
    stuck_since: float | None = None
    seen = "submitted; no status yet (the MPI Operator has not reported on it)"
    silent = True
    while True:
        live = api.call(f"reading MPIJob {job.name}", lambda: dict(api.client.get(
            rtype, job.name, namespace=job.namespace)))
        conditions = {c.get("type"): c for c in ((live.get("status") or {}).get("conditions") or [])
                      if c.get("status") == "True"}
        for final in ("Succeeded", "Failed"):
            if final in conditions:
                return final.upper(), conditions[final].get("message") or final
        if "Running" in conditions:
            while_running()
        latest = max(conditions.values(), key=lambda c: c.get("lastTransitionTime") or "", default=None)
        if latest is not None:
            seen = f"{latest.get('type')}: {latest.get('message') or latest.get('reason') or ''}".rstrip(": ")
        silent = silent and not (live.get("status") or {}).get("conditions")
        now = time.monotonic()
        if silent and now - started >= OPERATOR_SILENT_S and now < deadline:
            return "NO_OPERATOR", (f"the MPI Operator set no condition on the job in {now - started:.0f} s (it "
                                   "marks every job it reconciles Created at once): its controller is not acting "
                                   f"on MPIJobs; see kubectl -n {MPI_OPERATOR.namespace} get pods")
        if unplaceable_s is not None:
            stuck = _unschedulable(api, job)
            stuck_since = None if stuck is None else stuck_since if stuck_since is not None else now
            if stuck is not None and stuck_since is not None and now - stuck_since >= unplaceable_s:
                return "UNSCHEDULABLE", f"{stuck} for {now - stuck_since:.0f} s"
        if now >= deadline:
            return "TIMEOUT", f"no result within the timeout ({now - started:.0f} s); last seen: {seen}"
        tick(seen, now - started)
        pause(min(POLL_S, max(0.0, deadline - now)), stop)


def _pods(api: KubeApi, job: mpijob.SmokeJob, selector: str) -> list[Any]:
    from lightkube.resources.core_v1 import Pod

    labels = dict(item.split("=", 1) for item in selector.split(","))
    return list(api.call(f"listing the pods of MPIJob {job.name}",
                         lambda: list(api.client.list(Pod, namespace=job.namespace, labels=labels))))


def _unschedulable(api: KubeApi, job: mpijob.SmokeJob) -> str | None:
    """The first of the job's pods the scheduler has found no node for (its ``PodScheduled`` condition False with
    reason ``Unschedulable``, Kubernetes "Pod Lifecycle", "Pod conditions"), said with the scheduler's message."""
    for selector in (job.launcher_selector, job.worker_selector):
        for pod in _pods(api, job, selector):
            for condition in (pod.status.conditions if pod.status else None) or []:
                if condition.type == "PodScheduled" and condition.status == "False" \
                        and condition.reason == "Unschedulable":
                    return f"pod {pod.metadata.name} cannot be placed: {condition.message or 'no reason given'}"
    return None


def _worker_nodes(api: KubeApi, job: mpijob.SmokeJob) -> dict[str, str]:
    """Which node each worker pod is bound to (the log names pods by hostname)."""
    return {pod.metadata.name: pod.spec.nodeName for pod in _pods(api, job, job.worker_selector)
            if pod.metadata and pod.spec and pod.spec.nodeName}


def _launcher_log(api: KubeApi, job: mpijob.SmokeJob) -> tuple[str, dict[str, str]]:
    """The launcher pod's log, and which node each worker pod still listed ran on."""
    hosts = _worker_nodes(api, job)
    launchers = sorted(_pods(api, job, job.launcher_selector),
                       key=lambda pod: str(pod.metadata.creationTimestamp or ""))
    if not launchers:
        return "", hosts
    name = launchers[-1].metadata.name
    try:
        lines = api.call(f"reading the log of pod {job.namespace}/{name}", lambda: list(
            api.client.log(name, namespace=job.namespace, container="launcher")))
    except KubeApiError:
        return "", hosts
    return "".join(lines), hosts


def _domain_type(api: KubeApi) -> type:
    rtype = api.resource_type(mpijob.COMPUTE_DOMAIN_API_VERSION, mpijob.COMPUTE_DOMAIN_KIND, "creating the job's "
                              "ComputeDomain")
    if rtype is None:
        raise FmclusterError(f"the cluster's API serves no {mpijob.COMPUTE_DOMAIN_KIND} "
                             f"({mpijob.COMPUTE_DOMAIN_API_VERSION}): NVIDIA's DRA driver is not installed "
                             "(`fmcluster create SPEC` installs it for UltraServer queues)")
    return rtype


def _make_domain(api: KubeApi, job: mpijob.SmokeJob, domain: dict[str, Any]) -> None:
    """The job's ComputeDomain, made anew (a leftover of a killed run is deleted first: its spec is immutable)."""
    _delete_domain(api, job)
    rtype = _domain_type(api)
    api.call(f"creating ComputeDomain {job.compute_domain}",
             lambda: api.client.create(rtype(domain), namespace=job.namespace))


def _delete_domain(api: KubeApi, job: mpijob.SmokeJob) -> None:
    rtype = _domain_type(api)
    try:
        api.call(f"deleting ComputeDomain {job.compute_domain}",
                 lambda: api.client.delete(rtype, job.compute_domain, namespace=job.namespace))
    except KubeApiError as exc:
        if exc.code != 404:
            raise


def delete(api: KubeApi, rtype: type, job: mpijob.SmokeJob, wait_until: float | None = None) -> None:
    """Delete the job (its pods go with it, by the garbage collector); with ``wait_until``, until it is gone."""
    from lightkube.types import CascadeType

    try:
        api.call(f"deleting MPIJob {job.name}", lambda: api.client.delete(
            rtype, job.name, namespace=job.namespace, cascade=CascadeType.BACKGROUND))
    except KubeApiError as exc:
        if exc.code == 404:
            return
        raise
    while wait_until is not None and time.monotonic() < wait_until:
        try:
            api.call(f"reading MPIJob {job.name}", lambda: api.client.get(rtype, job.name, namespace=job.namespace))
        except KubeApiError as exc:
            if exc.code == 404:
                return
            raise
        time.sleep(POLL_S)


def _report(spec: Spec, expect: Expectations, job: mpijob.SmokeJob, outcome: Outcome) -> dict[str, Any]:
    ran = bool(outcome.log)
    if ran:
        per_node, overall = judge(outcome.log, expect)
        if outcome.hosts:  # a worker reports its pod's hostname: show the node it ran on
            per_node = {f"{outcome.hosts[pod]} ({pod})" if pod in outcome.hosts else pod: checks
                        for pod, checks in per_node.items()}
    else:
        per_node, overall = {}, []
    passed = outcome.state == "SUCCEEDED"
    what = f"MPIJob {job.namespace}/{job.name}"
    if not outcome.submitted:
        detail = f"{what} not submitted: {outcome.detail}"
    else:
        detail = f"{what} {outcome.state}" + ("" if passed else f": {outcome.detail}")
    job_check = Check("job", "passed" if passed else "failed", detail)
    result = report_of(spec, expect, job.name, outcome.state, None, per_node, [job_check, *overall])
    result.update({"scheduler": spec.kubernetes.scheduler, "image": job.image})
    if not ran:
        result["error"] = job_check.detail
    return result
