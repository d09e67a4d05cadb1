"""``fmcluster burn-in`` on EKS: the per-node checks as one MPIJob over the queue's idle nodes, then the NCCL rounds as
MPIJobs pinned to each run's nodes (:mod:`.jobs`, run by :mod:`.sweep` through smoke's submit-wait-delete machinery,
:mod:`fmcluster.backends.eks.smoke.submit`), judged by the judge and rounds every backend shares
(:mod:`fmcluster.backends.burn_in`). This module is light: the request is checked, and refused before anything is
submitted, without the kubernetes extra."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fmcluster import extras
from fmcluster.backends.burn_in import rounds
from fmcluster.backends.smoke.checks import Expectations, expectations
from fmcluster.catalog.burn_in_levels import LEVELS, NCCL_ITERS, Level
from fmcluster.catalog.hardware import hardware
from fmcluster.catalog.nccl_floors import NoKnownFloor
from fmcluster.errors import UsageError
from fmcluster.spec.models import instance_types_of

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.profile import BackendProfile
    from fmcluster.backends.protocol import BurnInRequest, SmokeSink
    from fmcluster.spec.models import Spec


def level_of(text: str) -> Level:
    for level in LEVELS:
        if text == level:
            return level
    raise UsageError(f"unknown burn-in level {text!r}; the levels: {', '.join(LEVELS)} (`fmcluster burn-in --help` "
                     "says what each runs)")


def checked(spec: Spec, request: BurnInRequest) -> tuple[Expectations, Level]:
    """The queue's expectations and the level, or a UsageError: an unknown level or queue, a queue without NVIDIA
    GPUs (the EKS check job runs NVIDIA's tools), a type with no 2-node floor at a level that runs NCCL."""
    level = level_of(request.level)
    queue = request.queue or next((q.name for q in spec.queues if hardware(str(q.instance_type)).has_gpus), None)
    expect = expectations(spec, queue, None)
    if len(instance_types_of(expect.queue)) > 1:
        raise UsageError(f"queue {expect.queue.name} has several instance types "
                         f"({', '.join(instance_types_of(expect.queue))}): burn-in judges one type's nodes against "
                         "that type's counts and floor; not supported yet")
    if not hardware(str(expect.queue.instance_type)).has_gpus:
        raise UsageError(f"queue {expect.queue.name} ({expect.queue.instance_type}) has no NVIDIA GPUs: burn-in on "
                         "EKS runs nvidia-smi, dcgmi and nccl-tests; name a GPU queue with --queue")
    if NCCL_ITERS[level]:
        try:
            rounds.pair_floor(str(expect.queue.instance_type))
        except NoKnownFloor as exc:
            raise UsageError(f"{exc}; level {level} judges all-reduce against it. `--level quick` runs the per-node "
                             "checks alone (device counts, DCGM level 1, EFA)") from None
    return expect, level


def run(profile: BackendProfile, context: BackendContext, request: BurnInRequest, sink: SmokeSink) -> dict[str, Any]:
    spec = context.require_spec()
    expect, level = checked(spec, request)
    if profile.extra:
        extras.require(profile.extra, f"burn-in on {profile.display} cluster {context.name}")
    from fmcluster.backends.eks.burn_in import sweep

    return sweep.run(context, spec, expect, level, request.timeout_min, request.image, sink)
