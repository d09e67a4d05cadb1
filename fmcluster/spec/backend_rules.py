"""What the spec's rules ask of the backend a spec names, so that no rule here names a backend itself.

Each backend answers in ``fmcluster/backends/<name>/spec_rules.py`` with a ``RULES`` instance of a subclass of
:class:`BackendSpecRules`. The spec sits below the backends and never imports them: the backend registry
(:mod:`fmcluster.backends.registry`) hands each backend's rules in through :func:`register` when it is imported
(the command line and the tests import it first).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fmcluster.spec.positions import Path_

if TYPE_CHECKING:
    import ipaddress

    from fmcluster.pricing.parts import CostPart
    from fmcluster.spec.models import Queue, Spec

Report = Callable[[Path_, str], None]


@dataclass(frozen=True)
class TagBudget:
    """How many of the spec's tags fit on one resource once fmcluster and the backend have added theirs."""

    own: tuple[str, ...]  # the tags fmcluster puts on each resource, which do not count against the user's
    budget: int
    why: str  # the limit and who takes the rest, for the message


class BackendSpecRules(ABC):
    """The load-time rules and the few defaults that differ by backend. Each method is called from the one
    generic rule that needs it; :meth:`check` holds the rules only one backend has."""

    # The nodes' OS when the spec names none (the default image's).
    default_os: str
    # How messages name the images the backend boots when the spec names none.
    stock_images: str

    def controller(self, spec: Spec | None) -> CostPart | None:
        """The managed controller AWS bills by the hour while the cluster exists (EKS's control plane, PCS's
        controller), with its rate or why it has none; None where the scheduler runs on a node of the cluster.
        ``spec`` is None for a cluster found in AWS without one."""
        return None

    def system_nodes(self, spec: Spec) -> tuple[str, int] | None:
        """The instance type and count of the nodes the backend runs for cluster software besides the queues
        (EKS's ``system`` node group), all On-Demand; None where it runs none."""
        return None

    def repair_note(self, queue: Queue) -> str | None:
        """What ``plan`` says the backend does about the queue's unhealthy nodes (queues[].auto_repair), where it
        has something to say beyond the field's own description."""
        return None

    def burn_in_gate_note(self, queue: Queue) -> str | None:
        """How ``create`` holds the queue's new nodes until they pass their burn-in (queues[].burn_in), or None where
        the backend's ``create`` does not gate them (``fmcluster burn-in`` then runs the checks on demand)."""
        return None

    def on_limit_problem(self, on_limit: str) -> str | None:
        """Why the budget guard cannot do ``on_limit`` (``budget.on_limit``) on this backend, or None."""
        return None

    @abstractmethod
    def compute_resource_name(self, queue: Queue) -> str:
        """What the backend calls the queue's group of nodes (a compute resource, a node group)."""

    @abstractmethod
    def check(self, spec: Spec, error: Report, warn: Report) -> None:
        """The rules only this backend has: its name patterns and limits, Slurm, access, health checks."""

    @abstractmethod
    def tag_budget(self) -> TagBudget:
        """How many of the spec's tags fit, and why."""

    def ssh_cidr_problem(self, cidr: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str | None:
        """Why the SSH source network ``cidr`` (parsed: ``network``) cannot be used on this backend, or None."""
        return None

    def family_problem(self, family: str) -> str | None:
        """Why nodes cannot boot AWS's published image ``family`` at all here (it carries another backend's
        software), or None."""
        return None

    @abstractmethod
    def build_advice(self, family: str, source: str) -> str:
        """How to build a bootable image on AWS's published ``family`` (``source``: where AWS publishes it)."""

    @abstractmethod
    def nodes_without_internet(self, path: Path_, message: str, remedy: str, error: Report, warn: Report) -> None:
        """Report a queue whose nodes could not reach the internet: an error where the backend then fails."""


def refuse_section(spec: Spec, section: str, backend: str, error: Report) -> None:
    """Refuse every field the spec sets in ``section``, a section only ``backend`` reads."""
    for name in sorted(getattr(spec, section).model_fields_set):
        error((section, name), f"{section}.{name} is for the {backend} backend")


@dataclass(frozen=True)
class _Registered:
    rules: BackendSpecRules
    runs_head_node: bool


_REGISTERED: dict[str, _Registered] = {}


def register(backend: str, rules: BackendSpecRules, *, runs_head_node: bool) -> None:
    """Hand in the rules of backend ``backend``, and whether its cluster runs a node of its own besides the queues'
    (the head or login node, which the spec's head_node describes): the backend's HEAD_NODE capability."""
    _REGISTERED[backend] = _Registered(rules, runs_head_node)


def unregister(backend: str) -> None:
    _REGISTERED.pop(backend, None)


def _registered(backend: str) -> _Registered:
    try:
        return _REGISTERED[backend]
    except KeyError:
        raise LookupError(f"no spec rules for backend {backend!r}: the backends hand theirs in when "
                          "fmcluster.backends.registry is imported") from None


def backend_rules(backend: str) -> BackendSpecRules:
    """The rules of backend ``backend`` (a name the spec's model already accepted)."""
    return _registered(backend).rules


def runs_head_node(backend: str) -> bool:
    """Whether a cluster of backend ``backend`` runs a node of its own besides the queues' (the spec's head_node)."""
    return _registered(backend).runs_head_node
