"""What the light objects of the two Slurm backends share: the smoke test, one batch job over ssh to the login or
head node (:mod:`fmcluster.backends.slurm.smoke`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from fmcluster.backends.lazy import LoadsLifecycle

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
        from fmcluster.backends.slurm import burn_in_run

        return burn_in_run.run(cast("Backend", self), context, request, sink)
