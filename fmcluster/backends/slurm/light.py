"""What the light objects of the two Slurm backends share: the smoke test, one batch job over ssh to the login or
head node (:mod:`fmcluster.backends.slurm.smoke`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from fmcluster.backends.lazy import LoadsLifecycle
from fmcluster.errors import UsageError

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.protocol import Backend, BurnInRequest, SmokeRequest, SmokeSink
    from fmcluster.spec.models import Spec


class SlurmBackend(LoadsLifecycle):
    """A backend whose scheduler is Slurm, reached by ssh."""

    def smoke(self, context: BackendContext, request: SmokeRequest, sink: SmokeSink) -> dict[str, Any]:
        from fmcluster.backends.slurm import smoke

        # Each subclass is a whole Backend (the registry's type check says so); this base alone is not.
        return smoke.run(cast("Backend", self), context, request, sink)

    def smoke_manifest(self, spec: Spec, request: SmokeRequest) -> dict[str, Any]:
        from fmcluster.backends.slurm import smoke

        return smoke.manifest(spec, request)

    def burn_in(self, context: BackendContext, request: BurnInRequest, sink: SmokeSink) -> dict[str, Any]:
        # The Slurm side of the gate (a check job, nodes held in DRAIN with a burn-in reason) is built on its own
        # branch; until it lands the command says so rather than half-run.
        raise UsageError(f"burn-in on Slurm clusters: not available yet for {context.name}; `fmcluster smoke "
                         f"{context.name}` runs the GPU, EFA and all-reduce checks as one Slurm job")
