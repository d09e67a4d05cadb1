"""The one interface every backend implements, and nothing more: the lifecycle verbs talk to a backend only
through it (SkyPilot's ``sky/provision/<cloud>/`` has the same shape).

Backends never prompt and never print: what needs the user's answer (ParallelCluster's fleet stop) comes back
as a :class:`Question`, which the lifecycle asks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from fmcluster.aws.discovery import Discovered

if TYPE_CHECKING:
    from fmcluster.engine import Resource, ResourceChange
    from fmcluster.spec.models import Spec
    from fmcluster.verbs.session import Session

# One vocabulary on both backends; ``backend_status`` keeps the raw one.
STATUSES = ("CREATING", "ACTIVE", "UPDATING", "DELETING", "FAILED", "NOT_FOUND")


@dataclass
class Question:
    """What a plan needs the user to agree to beyond the plan itself, and what saying yes does."""

    warning: str
    question: str
    # Options the backend applies with the plan when the answer is yes.
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoginNode:
    """Where users reach the cluster: the PCS login node or the ParallelCluster head node."""

    instance_id: str
    role: str  # "login node" (PCS) or "head node" (ParallelCluster)
    state: str | None = None  # the EC2 instance state
    public_ip: str | None = None
    private_ip: str | None = None


@dataclass(frozen=True)
class KubeEndpoint:
    """How to reach a cluster's Kubernetes API: its endpoint, the certificate authority that verifies it
    (base64 PEM, as EKS DescribeCluster gives it), and a fresh bearer token on each call of ``token``."""

    cluster: str
    region: str
    server: str
    certificate_authority: str
    token: Callable[[], str] = field(compare=False, repr=False)


@dataclass(frozen=True, order=True)
class LogLine:
    """One line of ``fmcluster logs``: fmcluster's own events and the backend's, merged by time."""

    at: float  # seconds since the epoch
    source: str  # "fmcluster", "cloudformation", or a CloudWatch log stream
    text: str


class Backend(ABC):
    name: ClassVar[str]

    @abstractmethod
    def check_requirements(self) -> None:
        """Raise when something the backend needs on this machine is missing (ParallelCluster: Node.js)."""

    @abstractmethod
    def resources(self, session: Session, options: dict[str, Any] | None = None) -> list[Resource]:
        """The spec's resources, each with its rendered document (the graph is wired from them)."""

    @abstractmethod
    def discover(self, session: Session) -> list[Discovered]:
        """Everything in the region tagged for the cluster (every list paginated)."""

    @abstractmethod
    def describe(self, session: Session) -> dict[str, Any]:
        """Live status in the shape of DESIGN §3: ``status`` from :data:`STATUSES`, ``backend_status``,
        ``queues``, ``slurm_endpoint``, ``instances`` (id, queue, type, state, launch time), and ``problems``
        (what AWS reports wrong with parts whose status looks fine)."""

    @abstractmethod
    def scales(self, path: str) -> bool:
        """Whether ``scale`` may change an attribute path: node counts, and what a count change needs."""

    def scale_data(self, data: dict[str, Any]) -> dict[str, Any]:
        """The recorded spec's data, with new node counts, as ``scale`` loads it: the backend relaxes the fields
        it fixed at creation that the new counts could make invalid (it holds them to the old values in
        :meth:`scaled`)."""
        return data

    def scale_own_group(self, data: dict[str, Any], name: str, count: Any) -> bool:
        """Set the node count of ``name``, a node group the backend runs besides the queues (EKS's ``system``), in
        the recorded spec's ``data``; False when the backend has no such group of that name (``count``: an int, or
        a NodeRange for QUEUE=MIN:MAX)."""
        return False

    def scaled(self, old: Spec, new: Spec) -> Spec:
        """The spec ``scale`` applies: ``new`` with what the backend fixed at creation kept from ``old``; a
        UsageError when the new counts do not fit what was fixed."""
        return new

    def questions(self, session: Session, changes: list[ResourceChange]) -> list[Question]:
        """What applying ``changes`` needs the user to agree to beyond the plan."""
        return []

    def waypoints(self, session: Session, changes: list[ResourceChange]) -> list[tuple[str, Spec]]:
        """The specs to converge to, in order, before the spec itself, when AWS makes ``changes`` only in steps
        (EKS: one Kubernetes minor version at a time), each with a label for the one confirmation; [] when one
        walk reaches the spec."""
        return []

    @abstractmethod
    def find_cluster_id(self, session: Session) -> str | None:
        """The ``fmcluster:cluster-id`` of the cluster's anchor (PCS cluster, ParallelCluster stack) in AWS,
        when it exists: how a record that was lost, or a teammate's cluster, is adopted."""

    @abstractmethod
    def login_node(self, session: Session) -> LoginNode | None:
        """The node users log in to (in whatever state it is), or None when there is none."""

    def kube_access(self, session: Session) -> KubeEndpoint | None:
        """How to reach the cluster's Kubernetes API; None for a backend without one (or a cluster whose API is
        not up)."""
        return None

    @abstractmethod
    def cluster_logs(self, session: Session, since: float | None, lines: int) -> tuple[list[LogLine], list[str]]:
        """What the backend logs in AWS for the cluster (the last ``lines`` per source, or what came after
        ``since``), and notes on what it could not read and why."""
