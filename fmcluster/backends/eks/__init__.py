"""Amazon EKS: the backend object the registry holds. Light: its profile and spec rules are read by any command
on any install; the rest of its parts load on first use, the lifecycle (``backend``: boto3 and the Kubernetes
client of the kubernetes extra) too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fmcluster.backends.eks.profile import PROFILE
from fmcluster.backends.eks.spec_rules import RULES
from fmcluster.backends.lazy import LoadsLifecycle
from fmcluster.backends.protocol import Capability

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.protocol import BurnInRequest, GuardCall, Lifecycle, SmokeRequest, SmokeSink
    from fmcluster.checks import CheckResult
    from fmcluster.preflight.common import BackendChecks
    from fmcluster.render.documents import RenderedDocuments
    from fmcluster.spec import LoadedSpec
    from fmcluster.spec.models import Spec


class EksBackend(LoadsLifecycle):
    profile = PROFILE
    spec_rules = RULES
    capabilities = Capability.KUBERNETES_API

    def load_lifecycle(self) -> Lifecycle:
        from fmcluster.backends.eks.backend import EksLifecycle

        return EksLifecycle()

    @property
    def checks(self) -> BackendChecks:
        from fmcluster.backends.eks.preflight import CHECKS

        return CHECKS

    def render(self, spec: Spec, spec_file: str = "spec.yaml", subnet_id: str | None = None) -> RenderedDocuments:
        from fmcluster.backends.eks.render import render

        return render(spec, spec_file, subnet_id=subnet_id)

    def validate(self, loaded: LoadedSpec, rendered: RenderedDocuments, region: str, online: bool,
                 zone: str | None) -> list[CheckResult]:
        from fmcluster.backends.eks.validate import checks

        return checks(loaded, rendered, region, online, zone)

    def tagged_clusters(self, region: str) -> list[tuple[str, str]]:
        from fmcluster.backends.eks.listing import tagged_clusters

        return tagged_clusters(region)

    def smoke(self, context: BackendContext, request: SmokeRequest, sink: SmokeSink) -> dict[str, Any]:
        # On the light object: the EKS smoke names the extra it needs only once the options and the queue are
        # found good, in its own words, and --print needs none.
        from fmcluster.backends.eks import smoke

        return smoke.run(self.profile, context, request, sink)

    def smoke_manifest(self, spec: Spec, request: SmokeRequest) -> dict[str, Any]:
        from fmcluster.backends.eks import smoke

        return smoke.manifest(spec, request)

    def burn_in(self, context: BackendContext, request: BurnInRequest, sink: SmokeSink) -> dict[str, Any]:
        # On the light object, as smoke: the request is checked (level, queue, floor) before the extra is needed.
        from fmcluster.backends.eks import burn_in

        return burn_in.run(self.profile, context, request, sink)

    def guard_calls(self, spec: Spec, on_limit: str, fires_at: str) -> list[GuardCall]:
        from fmcluster.backends.eks.guard import guard_calls

        return guard_calls(spec, on_limit, fires_at)

    def guard_unfinished(self, report: dict[str, Any]) -> str | None:
        return None  # the stop is the node groups' scaling: the queues' running nodes show all of it
