"""``fmcluster smoke`` on a Slurm cluster (each Slurm backend's ``smoke`` calls :func:`run`): one
Slurm batch job submitted over ssh to the login node (:mod:`fmcluster.backends.slurm.batch`) that checks every node
of a queue — accelerators visible, the EFA provider and device count the catalog expects — and runs nccl-tests
``all_reduce_perf`` across the nodes (``fmcluster/scripts/smoke_job.sh``), judged by
:mod:`fmcluster.backends.smoke.checks`."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any

from fmcluster.aws.login import NodeNotFound, SshTarget, target_for_host, target_for_node
from fmcluster.backends.slurm import batch
from fmcluster.backends.smoke.checks import Check, Expectations, expectations, judge, report_of
from fmcluster.backends.smoke.termination import Terminated, ends_like_ctrl_c
from fmcluster.connection import aws
from fmcluster.errors import UsageError

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.protocol import Backend, BurnInRequest, SmokeRequest, SmokeSink
    from fmcluster.spec.models import Spec


def job_script() -> str:
    return resources.files("fmcluster").joinpath("scripts").joinpath("smoke_job.sh").read_text()


def job_environment(expect: Expectations, nccl_tests: str | None = None) -> dict[str, str]:
    env = {"FMC_ACCEL_KIND": expect.kind, "FMC_RANKS_PER_NODE": str(expect.accelerators or 1)}
    return env | ({"FMC_NCCL_TESTS": nccl_tests} if nccl_tests else {})


def manifest(spec: Spec, request: SmokeRequest) -> dict[str, Any]:
    """A Slurm smoke job is a batch script, not a document to print."""
    raise UsageError(f"--print shows the MPIJob a Kubernetes cluster's smoke test submits; {spec.name} runs a Slurm "
                     "job over ssh (fmcluster/scripts/smoke_job.sh)")


@aws.read_only()
def target(backend: Backend, context: BackendContext, request: SmokeRequest | BurnInRequest) -> SshTarget:
    """How to reach the cluster's login node: ``--host`` (HOST[:PORT]) skips the AWS look-up — a node reached
    through a VPN or a bastion, or any Slurm login host; otherwise the node the backend reports."""
    spec = context.require_spec()
    if request.host:
        return target_for_host(spec, request.host, request.user, request.identity)
    node = backend.login_node(context)  # loads the backend's lifecycle (and names its extra when missing)
    if node is None:
        raise NodeNotFound(f"cluster {context.name} has no running {backend.profile.login_where} in "
                           f"{context.region}; `fmcluster status {context.name}` shows what exists")
    return target_for_node(spec, context.region, node, aws.target().profile, request.user, request.identity)


def run(backend: Backend, context: BackendContext, request: SmokeRequest, sink: SmokeSink) -> dict[str, Any]:
    """Submit the smoke job to the cluster's login node, wait for it, collect and judge its output."""
    if request.image:
        raise UsageError(f"--image is for Kubernetes clusters; {context.name} runs its smoke test as a Slurm job on "
                         "the nodes' own software (--nccl-tests names all_reduce_perf there)")
    spec = context.require_spec()
    ssh = target(backend, context, request)
    expect = expectations(spec, request.queue, request.nodes)
    timeout_min = request.timeout_min
    remote = batch.Remote(ssh)
    home = remote.run('printf %s "$HOME"').stdout.strip() or "/tmp"
    output_path = f"{home}/fmcluster-smoke-%j.out"
    options = ["--job-name=fmcluster-smoke", f"--partition={expect.queue.name}", f"--nodes={expect.nodes}",
               f"--ntasks-per-node={expect.accelerators or 1}", "--exclusive", f"--time={max(1, int(timeout_min))}",
               f"--chdir={home}", f"--output={output_path}"]
    sink.note(f"{ssh.via}: submitting the smoke job to queue {expect.queue.name} ({expect.nodes} × "
              f"{expect.queue.instance_type})")
    job_id = batch.submit(remote, job_script(), options, job_environment(expect, request.nccl_tests))
    # SIGTERM and SIGHUP (a kill, a closed terminal, a CI cancel) cancel the job as Ctrl-C does; the handler stays
    # in place through scancel, so a repeated signal cannot cut it short.
    with ends_like_ctrl_c():
        try:
            with sink.ticker(f"job {job_id}") as tick:
                job = batch.wait(remote, job_id, timeout_min * 60,
                                 lambda s, t: tick(f"{s.state}" + (f" ({s.reason})" if s.reason not in
                                                                   ("", "None") else ""), t))
        except (KeyboardInterrupt, Terminated):
            batch.cancel(remote, job_id)
            raise
    path = output_path.replace("%j", job_id)
    output = batch.collect(remote, path, job, expect.queue.name)
    per_node, overall = judge(output, expect)
    return report(spec, expect, job_id, job.state, path, per_node, overall)


def report(spec: Spec, expect: Expectations, job_id: str, job_state: str, output_path: str,
           per_node: dict[str, list[Check]], overall: list[Check]) -> dict[str, Any]:
    job = Check("job", "passed" if job_state in ("COMPLETED", "GONE") else "failed",
                f"Slurm job {job_id} {job_state}")
    return report_of(spec, expect, job_id, job_state, output_path, per_node, [job, *overall])
