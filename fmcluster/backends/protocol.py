"""The one interface every backend implements: :class:`Backend`. The verbs talk to a backend only through it
(SkyPilot's ``sky/provision/<cloud>/`` has the same shape), and the layers below the backends (spec, preflight,
validate, render) get the part they need handed in by the registry or the calling verb.

A backend is a light object (its package's ``__init__``: profile, spec rules, capabilities; nothing beyond the
standard library and fmcluster's own light layers), so that ``status``, ``spec`` and ``plan`` run on a light
install. Its :class:`Lifecycle` part, which needs boto3 and the backend's extra, is loaded on first use
(:class:`fmcluster.backends.lazy.LoadsLifecycle`).

Backends never prompt and never print: what needs the user's answer (ParallelCluster's fleet stop) comes back
as a :class:`Question`, which the lifecycle asks; what the user should know goes to the context's ``warn``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fmcluster.aws.discovery import Discovered
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.profile import BackendProfile
    from fmcluster.checks import CheckResult
    from fmcluster.engine import Resource, ResourceChange
    from fmcluster.preflight.common import BackendChecks
    from fmcluster.render.documents import RenderedDocuments
    from fmcluster.spec import LoadedSpec
    from fmcluster.spec.backend_rules import BackendSpecRules
    from fmcluster.spec.models import Spec

# One vocabulary on every backend; ``backend_status`` keeps the raw one.
STATUSES = ("CREATING", "ACTIVE", "UPDATING", "DELETING", "FAILED", "NOT_FOUND")


class Capability(enum.Flag):
    """What a backend does that not every backend does; each backend declares its set once
    (``Backend.capabilities``), and generic code asks ``Capability.X in backend.capabilities``."""

    NONE = 0
    # The cluster runs a node of its own besides the queues' (the head or login node), which the spec's head_node
    # describes; a backend whose scheduler runs on a managed control plane has none.
    HEAD_NODE = enum.auto()
    # Its clusters are reached through a Kubernetes API (`fmcluster kubeconfig`), not by ssh to a login node.
    KUBERNETES_API = enum.auto()
    # Its ``discover`` scans for every kind of resource fmcluster makes itself, anchor or not: the backend that
    # finds what is left of a cluster whose anchor AWS no longer holds (exactly one backend has it).
    FINDS_EVERYTHING = enum.auto()


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


@dataclass(frozen=True)
class SmokeRequest:
    """What ``fmcluster smoke`` asks of the backend: the command's options as given (None: not given). Each backend
    refuses, with a UsageError, the options that are not its own (``--host`` on EKS, ``--image`` on Slurm)."""

    queue: str | None
    nodes: int | None
    timeout_min: float
    host: str | None = None  # HOST[:PORT] of a Slurm login host: skips the AWS look-up
    user: str | None = None
    identity: str | None = None
    nccl_tests: str | None = None  # all_reduce_perf on a Slurm cluster's nodes
    image: str | None = None  # the nccl-tests image on a Kubernetes cluster


@dataclass(frozen=True)
class BurnInRequest:
    """What ``fmcluster burn-in`` asks of the backend: the queue (None: the first with accelerators), the level
    (``quick``, ``standard`` or ``long``: fmcluster/catalog/burn_in_levels.py; None: the queue's ``burn_in`` in the
    spec), and how long each job may take. :func:`fmcluster.backends.burn_in.choice.choose` reads it."""

    queue: str | None
    level: str | None = None
    timeout_min: float = 30.0  # each job's
    image: str | None = None  # the check image on a Kubernetes cluster
    host: str | None = None  # a Slurm login host, HOST[:PORT], as smoke's
    user: str | None = None
    identity: str | None = None
    nccl_tests: str | None = None  # all_reduce_perf on a Slurm cluster's nodes


# A progress line's sink: (what it shows now, seconds since the wait began).
Tick = Callable[[str, float], None]


@dataclass(frozen=True)
class SmokeSink:
    """Where a smoke test's progress goes while it runs (backends never print): a line to note, a warning, and a
    status line for a wait (``with sink.ticker(title) as tick: tick(text, elapsed)``)."""

    note: Callable[[str], None]
    warning: Callable[[str], None]
    ticker: Callable[[str], AbstractContextManager[Tick]]


@dataclass(frozen=True)
class GuardCall:
    """One AWS call the budget guard makes when it fires, as data: EventBridge Scheduler sends it as a universal
    target ("Using universal targets", EventBridge Scheduler user guide): ``Target.Arn``
    ``arn:aws:scheduler:::aws-sdk:<service>:<action>``, ``Target.Input`` the request's parameters as JSON, named as
    in the API's reference (botocore's member names). The guard's role may make ``iam_action`` on
    ``resource_arns`` and nothing else. Values may be engine references (``${kind.key.arn}``: the ARN AWS issues
    when the node group is made) or hold ``{account}``, the account's id, filled when the role is made."""

    name: str  # the schedule's name within the cluster's schedule group: [0-9a-zA-Z-_.]{1,64}
    service: str  # the SDK's service id, lower case: eks, pcs, dynamodb
    action: str  # the API action in lowerCamelCase: updateNodegroupConfig
    input: dict[str, Any]
    resource_arns: tuple[str, ...]
    iam_action: str  # eks:UpdateNodegroupConfig
    does: str  # one line for people: what the call does to which part

    @property
    def target_arn(self) -> str:
        return f"arn:aws:scheduler:::aws-sdk:{self.service}:{self.action}"


class Lifecycle(Protocol):
    """The part of a backend that talks to AWS (boto3, and the backend's extra): loaded on first use. Every
    method that needs the cluster takes a :class:`BackendContext`, never the command's session."""

    def check_requirements(self) -> None:
        """Raise when something the backend needs on this machine is missing (ParallelCluster: Node.js)."""
        ...

    def resources(self, context: BackendContext, options: dict[str, Any] | None = None) -> list[Resource]:
        """The spec's resources, each with its rendered document (the graph is wired from them)."""
        ...

    def discover(self, context: BackendContext) -> list[Discovered]:
        """Everything in the region tagged for the cluster (every list paginated)."""
        ...

    def describe(self, context: BackendContext) -> dict[str, Any]:
        """Live status in the shape of DESIGN §3: ``status`` from :data:`STATUSES`, ``backend_status``,
        ``queues``, ``slurm_endpoint``, ``instances`` (id, queue, type, state, launch time), and ``problems``
        (what AWS reports wrong with parts whose status looks fine)."""
        ...

    def scales(self, path: str) -> bool:
        """Whether ``scale`` may change an attribute path: node counts, and what a count change needs."""
        ...

    def scale_data(self, data: dict[str, Any]) -> dict[str, Any]:
        """The recorded spec's data, with new node counts, as ``scale`` loads it: the backend relaxes the fields
        it fixed at creation that the new counts could make invalid (it holds them to the old values in
        :meth:`scaled`)."""
        ...

    def scale_own_group(self, data: dict[str, Any], name: str, count: Any) -> bool:
        """Set the node count of ``name``, a node group the backend runs besides the queues (EKS's ``system``), in
        the recorded spec's ``data``; False when the backend has no such group of that name (``count``: an int, or
        a NodeRange for QUEUE=MIN:MAX)."""
        ...

    def scaled(self, old: Spec, new: Spec) -> Spec:
        """The spec ``scale`` applies: ``new`` with what the backend fixed at creation kept from ``old``; a
        UsageError when the new counts do not fit what was fixed."""
        ...

    def questions(self, context: BackendContext, changes: list[ResourceChange]) -> list[Question]:
        """What applying ``changes`` needs the user to agree to beyond the plan."""
        ...

    def waypoints(self, context: BackendContext, changes: list[ResourceChange]) -> list[tuple[str, Spec]]:
        """The specs to converge to, in order, before the spec itself, when AWS makes ``changes`` only in steps
        (EKS: one Kubernetes minor version at a time), each with a label for the one confirmation; [] when one
        walk reaches the spec."""
        ...

    def find_cluster_id(self, context: BackendContext) -> str | None:
        """The ``fmcluster:cluster-id`` of the cluster's anchor (PCS cluster, ParallelCluster stack) in AWS,
        when it exists: how a record that was lost, or a teammate's cluster, is adopted."""
        ...

    def login_node(self, context: BackendContext) -> LoginNode | None:
        """The node users log in to (in whatever state it is), or None when there is none."""
        ...

    def kube_access(self, context: BackendContext) -> KubeEndpoint | None:
        """How to reach the cluster's Kubernetes API; None for a backend without one (or a cluster whose API is
        not up)."""
        ...

    def cluster_logs(self, context: BackendContext, since: float | None,
                     lines: int) -> tuple[list[LogLine], list[str]]:
        """What the backend logs in AWS for the cluster (the last ``lines`` per source, or what came after
        ``since``), and notes on what it could not read and why."""
        ...


class Backend(Lifecycle, Protocol):
    """Every part a backend provides: its light facts and the parts the layers below it take from it, then its
    :class:`Lifecycle` (each of whose methods loads it on first use). The registry
    (:mod:`fmcluster.backends.registry`) holds one per name."""

    def lifecycle(self) -> Lifecycle:
        """The lifecycle part, loaded now: exit 2 naming the extra when the backend needs one that is not
        installed (a command that works on a cluster asks this first)."""
        ...

    @property
    def name(self) -> str:
        """The spec's ``backend:`` value."""
        ...

    @property
    def profile(self) -> BackendProfile:
        """The light facts ``status`` and ``connect`` read for any backend, installed extra or not."""
        ...

    @property
    def capabilities(self) -> Capability:
        ...

    @property
    def spec_rules(self) -> BackendSpecRules:
        """The load-time rules and defaults of the spec that differ by backend."""
        ...

    @property
    def checks(self) -> BackendChecks:
        """What ``preflight`` asks of the backend (its account checks)."""
        ...

    def render(self, spec: Spec, spec_file: str = "spec.yaml", subnet_id: str | None = None) -> RenderedDocuments:
        """The spec's documents (pure: no AWS call)."""
        ...

    def validate(self, loaded: LoadedSpec, rendered: RenderedDocuments, region: str, online: bool,
                 zone: str | None) -> list[CheckResult]:
        """``fmcluster validate``'s checks of the rendered documents by the rules of the service that takes them."""
        ...

    def forget_default_clients(self) -> None:
        """Drop the AWS clients the backend's own library made from boto3's default session and keeps, so that the
        next ones get the command's current patience (ParallelCluster's AWSApi); nothing for a backend whose library
        keeps none. The registry hands it to the connection layer (``keep_default_clients``)."""
        ...

    def tagged_clusters(self, region: str) -> list[tuple[str, str]]:
        """(name, common status) of each cluster of this backend that ``region`` holds by its ``fmcluster:cluster``
        tag. boto3 only: it needs no extra, so a teammate's cluster is listed on any install."""
        ...

    def smoke(self, context: BackendContext, request: SmokeRequest, sink: SmokeSink) -> dict[str, Any]:
        """``fmcluster smoke``: run the backend's smoke job on the cluster, wait for it, judge its output, and
        leave nothing running (a timeout, Ctrl-C, SIGTERM or SIGHUP cancel it); the report of docs/smoke-json.md.
        On the light object: it names the extra it needs itself, when it gets that far."""
        ...

    def burn_in(self, context: BackendContext, request: BurnInRequest, sink: SmokeSink) -> dict[str, Any]:
        """``fmcluster burn-in``: the per-node checks on the queue's idle nodes (never a node running a job), judged
        by :mod:`fmcluster.backends.burn_in.judge`, then the NCCL rounds of :mod:`fmcluster.backends.burn_in.rounds`
        over the nodes that passed; every job it made deleted whatever happens. The report of docs/burn-in-json.md.
        Bad input (level, queue, a type without a floor at a level that runs NCCL, a cluster not ready) is a
        UsageError before anything is submitted."""
        ...

    def guard_calls(self, spec: Spec, on_limit: str, fires_at: str) -> list[GuardCall]:
        """The calls that stop this cluster's compute for ``budget.on_limit`` (``stop``: every queue to zero
        nodes; ``destroy-compute``: the queues' node groups deleted), one per call, from the spec alone (no AWS call,
        no extra); ``fires_at`` is the guard's moment (ISO 8601 UTC), for a request that records when it was made.
        What a backend cannot do is refused at load time (``spec_rules.on_limit_problem``), never here."""
        ...

    def guard_unfinished(self, report: dict[str, Any]) -> str | None:
        """Once the guard's moment has passed: what ``describe``'s report shows of a stop not (yet) done beyond the
        queues' running nodes, in words (ParallelCluster: a compute fleet not STOPPED, which a queue with no node
        running does not show); None when the report shows nothing more."""
        ...

    def smoke_manifest(self, spec: Spec, request: SmokeRequest) -> dict[str, Any]:
        """``fmcluster smoke --print``: the job document ``smoke`` would submit, from the spec alone (no AWS call,
        no extra); a UsageError for a backend whose job is no document (a Slurm batch script)."""
        ...
