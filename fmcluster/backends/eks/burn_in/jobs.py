"""The MPIJobs of ``fmcluster burn-in`` on EKS: decisions here, layout in ``templates/eks/burn-in-checks.sh.j2`` (the
check job's launcher), ``templates/eks/burn-in-nccl.sh.j2`` (one all-reduce run's) and the smoke test's MPIJob
template, which both reuse (whole nodes per worker, the scheduler's queue marks) with the workers pinned to the
given nodes by a required node affinity on ``kubernetes.io/hostname``."""

from __future__ import annotations

import shlex
from typing import Any

from fmcluster.backends.burn_in.judge import checks_run, command
from fmcluster.backends.eks.burn_in import frames
from fmcluster.backends.eks.nodes.burn_in_hold import TOLERATION
from fmcluster.backends.eks.smoke import mpijob
from fmcluster.backends.smoke.checks import Expectations
from fmcluster.catalog.burn_in_levels import NCCL_ITERS, Level
from fmcluster.render.templates import render_text
from fmcluster.spec.models import Spec

BURN_IN_LABEL = "fmcluster.io/burn-in"


def check_job(spec: Spec, expect: Expectations, nodes: tuple[str, ...], image: str | None) -> mpijob.SmokeJob:
    job = mpijob.smoke_job(spec, expect.queue, len(nodes), image)
    return _renamed(job, f"fmcluster-burn-in-{expect.queue.name}")


def nccl_job(spec: Spec, expect: Expectations, nodes: tuple[str, ...], image: str | None,
             serial: int) -> mpijob.SmokeJob:
    job = mpijob.smoke_job(spec, expect.queue, len(nodes), image)
    return _renamed(job, f"fmcluster-burn-in-{expect.queue.name}-{serial}")


def _renamed(job: mpijob.SmokeJob, name: str) -> mpijob.SmokeJob:
    from dataclasses import replace

    return replace(job, name=name, compute_domain=f"{name}-imex" if job.compute_domain else None)


def check_manifest(spec: Spec, expect: Expectations, level: Level, job: mpijob.SmokeJob, nodes: tuple[str, ...],
                   timeout_s: int) -> dict[str, Any]:
    commands = [(check, " ".join(shlex.quote(part) for part in command(check, level).split()))
                for check in checks_run(expect, level)]
    script = render_text("eks/burn-in-checks.sh.j2", commands=commands, nodes=len(nodes), mpirun=mpijob.MPIRUN,
                         mark=frames.MARK, chunk=frames.CHUNK)
    # The workers stay until the job is deleted (cleanPodPolicy None): which node each ran on is read after the end.
    return mpijob.manifest(spec, job, timeout_s, script=script, hosts=nodes, purpose_label=BURN_IN_LABEL,
                           clean_pod_policy="None", tolerations=[TOLERATION])


def nccl_manifest(spec: Spec, level: Level, job: mpijob.SmokeJob, nodes: tuple[str, ...],
                  timeout_s: int) -> dict[str, Any]:
    script = render_text("eks/burn-in-nccl.sh.j2", nodes=len(nodes), ranks=job.gpus, mpirun=mpijob.MPIRUN,
                         all_reduce=mpijob.ALL_REDUCE, efa=job.efa > 0, iters=NCCL_ITERS[level])
    return mpijob.manifest(spec, job, timeout_s, script=script, hosts=nodes, purpose_label=BURN_IN_LABEL,
                           tolerations=[TOLERATION])
