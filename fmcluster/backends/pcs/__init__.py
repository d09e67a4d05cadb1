"""AWS PCS: the backend object the registry holds. Light: its profile and spec rules are read by any command on
any install; the rest of its parts load on first use, the lifecycle (``backend``: boto3 alone) too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fmcluster.backends.pcs.profile import PROFILE
from fmcluster.backends.pcs.spec_rules import RULES
from fmcluster.backends.protocol import Capability
from fmcluster.backends.slurm.light import SlurmBackend

if TYPE_CHECKING:
    from fmcluster.backends.protocol import GuardCall, Lifecycle
    from fmcluster.checks import CheckResult
    from fmcluster.preflight.common import BackendChecks
    from fmcluster.render.documents import RenderedDocuments
    from fmcluster.spec import LoadedSpec
    from fmcluster.spec.models import Spec


class PcsBackend(SlurmBackend):
    profile = PROFILE
    spec_rules = RULES
    capabilities = Capability.HEAD_NODE | Capability.FINDS_EVERYTHING

    def load_lifecycle(self) -> Lifecycle:
        from fmcluster.backends.pcs.backend import PcsLifecycle

        return PcsLifecycle()

    @property
    def checks(self) -> BackendChecks:
        from fmcluster.backends.pcs.preflight import CHECKS

        return CHECKS

    def render(self, spec: Spec, spec_file: str = "spec.yaml", subnet_id: str | None = None) -> RenderedDocuments:
        from fmcluster.backends.pcs.render import render

        return render(spec, spec_file, subnet_id=subnet_id)

    def validate(self, loaded: LoadedSpec, rendered: RenderedDocuments, region: str, online: bool,
                 zone: str | None) -> list[CheckResult]:
        from fmcluster.backends.pcs.validate import checks

        return checks(loaded, rendered, region, online, zone)

    def tagged_clusters(self, region: str) -> list[tuple[str, str]]:
        from fmcluster.backends.pcs.listing import tagged_clusters

        return tagged_clusters(region)

    def guard_calls(self, spec: Spec, on_limit: str, fires_at: str) -> list[GuardCall]:
        from fmcluster.backends.pcs.guard import guard_calls

        return guard_calls(spec, on_limit, fires_at)

    def guard_unfinished(self, report: dict[str, Any]) -> str | None:
        return None  # the stop is the node groups' scaling: the queues' running nodes show all of it
