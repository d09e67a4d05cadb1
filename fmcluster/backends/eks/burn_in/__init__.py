"""``fmcluster burn-in`` on EKS: the per-node checks as one MPIJob over the queue's idle nodes, then the NCCL rounds as
MPIJobs pinned to each run's nodes (:mod:`.jobs`, run by :mod:`.sweep` through smoke's submit-wait-delete machinery,
:mod:`fmcluster.backends.eks.smoke.submit`), judged by the judge and rounds every backend shares
(:mod:`fmcluster.backends.burn_in`). This module is light: the request is checked, and refused before anything is
submitted, without the kubernetes extra."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fmcluster import extras
from fmcluster.backends.burn_in.choice import Choice, choose
from fmcluster.catalog.hardware import hardware
from fmcluster.errors import UsageError

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.profile import BackendProfile
    from fmcluster.backends.protocol import BurnInRequest, SmokeSink
    from fmcluster.spec.models import Spec


def checked(spec: Spec, request: BurnInRequest) -> Choice:
    """What to check (:func:`fmcluster.backends.burn_in.choice.choose`), or a UsageError; also a queue without NVIDIA
    GPUs (the EKS check job runs NVIDIA's tools), and the options that are Slurm's."""
    for option, value in (("--host", request.host), ("--user", request.user), ("--identity", request.identity),
                          ("--nccl-tests", request.nccl_tests)):
        if value:
            raise UsageError(f"{option} is for Slurm clusters, reached over ssh; {spec.name} runs its burn-in as "
                             "MPIJobs through its Kubernetes API (--image names the check image)")
    choice = choose(spec, request.queue, request.level)
    queue = choice.expect.queue
    if not hardware(str(queue.instance_type)).has_gpus:
        raise UsageError(f"queue {queue.name} ({queue.instance_type}) has no NVIDIA GPUs: burn-in on EKS runs "
                         "nvidia-smi, dcgmi and nccl-tests; name a GPU queue with --queue")
    return choice


def run(profile: BackendProfile, context: BackendContext, request: BurnInRequest, sink: SmokeSink) -> dict[str, Any]:
    spec = context.require_spec()
    choice = checked(spec, request)
    if profile.extra:
        extras.require(profile.extra, f"burn-in on {profile.display} cluster {context.name}")
    from fmcluster.backends.eks.burn_in import sweep

    return sweep.run(context, spec, choice, request.timeout_min, request.image, sink)
