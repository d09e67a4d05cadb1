"""AWS ParallelCluster 3: the backend object the registry holds. Light: its profile and spec rules are read by
any command on any install; the rest of its parts load on first use, the lifecycle (``backend``: boto3 and pcluster,
the parallelcluster extra) too."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from fmcluster.backends.parallelcluster.profile import PROFILE
from fmcluster.backends.parallelcluster.spec_rules import RULES
from fmcluster.backends.protocol import Capability
from fmcluster.backends.slurm.light import SlurmBackend

if TYPE_CHECKING:
    from fmcluster.backends.protocol import GuardCall, Lifecycle
    from fmcluster.checks import CheckResult
    from fmcluster.preflight.common import BackendChecks
    from fmcluster.render.documents import RenderedDocuments
    from fmcluster.spec import LoadedSpec
    from fmcluster.spec.models import Spec


class ParallelClusterBackend(SlurmBackend):
    profile = PROFILE
    spec_rules = RULES
    capabilities = Capability.HEAD_NODE

    def load_lifecycle(self) -> Lifecycle:
        from fmcluster.backends.parallelcluster.backend import ParallelClusterLifecycle

        return ParallelClusterLifecycle()

    @property
    def checks(self) -> BackendChecks:
        from fmcluster.backends.parallelcluster.preflight import CHECKS

        return CHECKS

    def render(self, spec: Spec, spec_file: str = "spec.yaml", subnet_id: str | None = None) -> RenderedDocuments:
        from fmcluster.backends.parallelcluster.render import render

        return render(spec, spec_file, subnet_id=subnet_id)

    def validate(self, loaded: LoadedSpec, rendered: RenderedDocuments, region: str, online: bool,
                 zone: str | None) -> list[CheckResult]:
        from fmcluster.backends.parallelcluster.validate import checks

        return checks(loaded, rendered, region, online, zone)

    def forget_default_clients(self) -> None:
        """ParallelCluster caches its clients in one AWSApi instance: drop it. Only when it is loaded: a command on
        another backend must not import it."""
        if "pcluster.aws.aws_api" in sys.modules:
            sys.modules["pcluster.aws.aws_api"].AWSApi.reset()

    def tagged_clusters(self, region: str) -> list[tuple[str, str]]:
        from fmcluster.backends.parallelcluster.listing import tagged_clusters

        return tagged_clusters(region)

    def guard_calls(self, spec: Spec, on_limit: str, fires_at: str) -> list[GuardCall]:
        from fmcluster.backends.parallelcluster.guard import guard_calls

        return guard_calls(spec, on_limit, fires_at)

    def guard_unfinished(self, report: dict[str, Any]) -> str | None:
        from fmcluster.backends.parallelcluster.guard import fleet_unfinished

        return fleet_unfinished(report)
