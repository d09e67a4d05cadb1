"""What every backend shares around the :class:`~fmcluster.backends.protocol.Backend` protocol: the defaults of
the optional lifecycle methods, and the light backend object that loads its lifecycle part on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fmcluster.backends.protocol import Capability, Lifecycle
from fmcluster.extras import require

if TYPE_CHECKING:
    from fmcluster.aws.discovery import Discovered
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.profile import BackendProfile
    from fmcluster.backends.protocol import KubeEndpoint, LoginNode, LogLine, Question
    from fmcluster.engine import Resource, ResourceChange
    from fmcluster.spec.backend_rules import BackendSpecRules
    from fmcluster.spec.models import Spec


class LifecycleDefaults(Lifecycle):
    """The lifecycle methods a backend may leave out, with what they mean when it does."""

    def scale_data(self, data: dict[str, Any]) -> dict[str, Any]:
        return data

    def scale_own_group(self, data: dict[str, Any], name: str, count: Any) -> bool:
        return False

    def scaled(self, old: Spec, new: Spec) -> Spec:
        return new

    def questions(self, context: BackendContext, changes: list[ResourceChange]) -> list[Question]:
        return []

    def waypoints(self, context: BackendContext, changes: list[ResourceChange]) -> list[tuple[str, Spec]]:
        return []

    def kube_access(self, context: BackendContext) -> KubeEndpoint | None:
        return None


class LoadsLifecycle:
    """A backend's light object: ``profile``, ``spec_rules`` and ``capabilities`` are plain attributes, and
    each lifecycle method loads :meth:`load_lifecycle` (boto3, the backend's extra) on first use. A subclass
    implements :meth:`load_lifecycle` with a static import inside its own package, and the light parts."""

    profile: BackendProfile
    spec_rules: BackendSpecRules
    capabilities: Capability = Capability.NONE
    _lifecycle: Lifecycle | None = None

    @property
    def name(self) -> str:
        return self.profile.name

    def load_lifecycle(self) -> Lifecycle:
        raise NotImplementedError

    def lifecycle(self) -> Lifecycle:
        """The lifecycle part; exit 2 naming the extra when the backend needs one that is not installed."""
        if self._lifecycle is None:
            if self.profile.extra:
                display = self.profile.display
                article = "an" if display[:1] in "AEIOU" else "a"  # an EKS, a PCS, a ParallelCluster
                require(self.profile.extra, f"{article} {display} cluster")
            self._lifecycle = self.load_lifecycle()
        return self._lifecycle

    def forget_default_clients(self) -> None:
        """Most backends' libraries keep no clients of boto3's default session: nothing to forget."""

    def check_requirements(self) -> None:
        self.lifecycle().check_requirements()

    def resources(self, context: BackendContext, options: dict[str, Any] | None = None) -> list[Resource]:
        return self.lifecycle().resources(context, options)

    def discover(self, context: BackendContext) -> list[Discovered]:
        return self.lifecycle().discover(context)

    def describe(self, context: BackendContext) -> dict[str, Any]:
        return self.lifecycle().describe(context)

    def scales(self, path: str) -> bool:
        return self.lifecycle().scales(path)

    def scale_data(self, data: dict[str, Any]) -> dict[str, Any]:
        return self.lifecycle().scale_data(data)

    def scale_own_group(self, data: dict[str, Any], name: str, count: Any) -> bool:
        return self.lifecycle().scale_own_group(data, name, count)

    def scaled(self, old: Spec, new: Spec) -> Spec:
        return self.lifecycle().scaled(old, new)

    def questions(self, context: BackendContext, changes: list[ResourceChange]) -> list[Question]:
        return self.lifecycle().questions(context, changes)

    def waypoints(self, context: BackendContext, changes: list[ResourceChange]) -> list[tuple[str, Spec]]:
        return self.lifecycle().waypoints(context, changes)

    def find_cluster_id(self, context: BackendContext) -> str | None:
        return self.lifecycle().find_cluster_id(context)

    def login_node(self, context: BackendContext) -> LoginNode | None:
        return self.lifecycle().login_node(context)

    def kube_access(self, context: BackendContext) -> KubeEndpoint | None:
        return self.lifecycle().kube_access(context)

    def cluster_logs(self, context: BackendContext, since: float | None,
                     lines: int) -> tuple[list[LogLine], list[str]]:
        return self.lifecycle().cluster_logs(context, since, lines)
