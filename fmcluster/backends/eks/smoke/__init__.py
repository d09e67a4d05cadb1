"""``fmcluster smoke`` on EKS: an nccl-tests MPIJob (:mod:`.mpijob`) through the queue's scheduler, run by
:mod:`.submit` (the Kubernetes API client of the kubernetes extra), and judged as every backend's smoke job is
(:mod:`fmcluster.backends.smoke.checks`). This module is light: ``--print`` and the refusals of options that are
not EKS's run without the extra."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fmcluster import extras
from fmcluster.backends.eks.smoke import mpijob
from fmcluster.backends.smoke.checks import expectations
from fmcluster.errors import UsageError

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.profile import BackendProfile
    from fmcluster.backends.protocol import SmokeRequest, SmokeSink
    from fmcluster.spec.models import Spec


def run(profile: BackendProfile, context: BackendContext, request: SmokeRequest, sink: SmokeSink) -> dict[str, Any]:
    """Smoke-test the cluster with an MPIJob through its scheduler: the report of docs/smoke-json.md."""
    name = context.name
    for option, value in (("--host", request.host), ("--user", request.user), ("--identity", request.identity),
                          ("--nccl-tests", request.nccl_tests)):
        if value:
            raise UsageError(f"{option} is for Slurm clusters, reached over ssh; {name} runs its smoke test as "
                             "an MPIJob through its Kubernetes API (--image names the nccl-tests image)")
    spec = context.require_spec()
    expect = expectations(spec, request.queue or mpijob.default_queue(spec), request.nodes)
    if profile.extra:  # the Kubernetes API client; --print and the Slurm backends run without it
        extras.require(profile.extra, f"smoke on {profile.display} cluster {name}")
    from fmcluster.backends.eks.smoke import submit

    return submit.run(context, spec, expect, request.timeout_min, request.image, sink)


def manifest(spec: Spec, request: SmokeRequest) -> dict[str, Any]:
    """The MPIJob ``smoke`` would submit, from the spec alone."""
    expect = expectations(spec, request.queue or mpijob.default_queue(spec), request.nodes)
    job = mpijob.smoke_job(spec, expect.queue, expect.nodes, request.image)
    return mpijob.manifest(spec, job, int(request.timeout_min * 60))
