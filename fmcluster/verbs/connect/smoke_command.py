"""``fmcluster smoke NAME``: the smoke test the cluster's backend runs — a Slurm job over ssh
(:mod:`fmcluster.verbs.connect.smoke`) or, on a Kubernetes cluster, an MPIJob through its scheduler
(:mod:`fmcluster.verbs.connect.smoke_eks`). Both report as docs/smoke-json.md says."""

from __future__ import annotations

from typing import Any

import yaml

from fmcluster import extras
from fmcluster.backends import registry
from fmcluster.backends.protocol import Capability
from fmcluster.errors import UsageError
from fmcluster.verbs.connect import mpijob, smoke
from fmcluster.verbs.connect.resolve import recorded


def run(name: str, queue: str | None, nodes: int | None, host: str | None, user: str | None,
        identity: str | None, timeout_min: float, nccl_tests: str | None = None,
        image: str | None = None) -> dict[str, Any]:
    """Smoke-test cluster NAME: a Slurm job over ssh, or on a Kubernetes cluster an MPIJob through its scheduler."""
    session, spec = recorded(name)
    if Capability.KUBERNETES_API in registry.get(spec.backend).capabilities:
        for option, value in (("--host", host), ("--user", user), ("--identity", identity),
                              ("--nccl-tests", nccl_tests)):
            if value:
                raise UsageError(f"{option} is for Slurm clusters, reached over ssh; {name} runs its smoke test as "
                                 "an MPIJob through its Kubernetes API (--image names the nccl-tests image)")
        expect = smoke.expectations(spec, queue or mpijob.default_queue(spec), nodes)
        backend = registry.profile(spec.backend)
        if backend.extra:  # the Kubernetes API client; --print and the Slurm backends run without it
            extras.require(backend.extra, f"smoke on {backend.display} cluster {name}")
        from fmcluster.verbs.connect import smoke_eks

        return smoke_eks.run(session, spec, expect, timeout_min, image)
    if image:
        raise UsageError(f"--image is for Kubernetes clusters; {name} runs its smoke test as a Slurm job on the "
                         "nodes' own software (--nccl-tests names all_reduce_perf there)")
    return smoke.run(name, queue, nodes, host, user, identity, timeout_min, nccl_tests)


def manifest_text(name: str, queue: str | None, nodes: int | None, timeout_min: float,
                  image: str | None = None) -> str:
    """The YAML of what ``smoke NAME`` would submit to a Kubernetes cluster, from the recorded spec alone."""
    _, spec = recorded(name)
    if Capability.KUBERNETES_API not in registry.get(spec.backend).capabilities:
        raise UsageError(f"--print shows the MPIJob a Kubernetes cluster's smoke test submits; {name} runs a Slurm "
                         "job over ssh (fmcluster/scripts/smoke_job.sh)")
    expect = smoke.expectations(spec, queue or mpijob.default_queue(spec), nodes)
    job = mpijob.smoke_job(spec, expect.queue, expect.nodes, image)
    return yaml.dump(mpijob.manifest(spec, job, int(timeout_min * 60)), Dumper=_BlockDumper, sort_keys=False)


def _block_strings(dumper: Any, value: str) -> Any:
    # The launcher's script reads as a script (a literal block), not as one long escaped line.
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


class _BlockDumper(yaml.SafeDumper):
    pass


_BlockDumper.add_representer(str, _block_strings)
