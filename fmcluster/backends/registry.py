"""The backends by name: the one place that maps a name to a backend object (:class:`Backend`).

Adding a backend means a folder under ``fmcluster/backends/`` (its ``__init__`` with the light backend object,
``profile.py``, ``spec_rules.py``, and the parts its object loads on first use: ``backend.py`` with its
lifecycle, ``listing.py``, ``preflight.py``, ``validate.py``, ``render.py``), one line in :data:`_BUILT_IN`
below, its name in the spec's ``backend`` values (:data:`fmcluster.spec.field_types.Backend`), and its templates.

Importing this module hands each backend's spec rules to the spec layer, its stand-ins to validate and how to drop
the clients its library keeps to the connection, which sit below the backends and never import them
(:func:`fmcluster.spec.backend_rules.register`, :func:`fmcluster.validate.stand_ins.register`,
:func:`fmcluster.connection.aws.keep_default_clients`): the command line and the tests import it first.
Building the backend objects loads neither boto3 nor a backend's extra (their lifecycle loads on first use).
"""

from __future__ import annotations

from fmcluster.backends.eks import EksBackend
from fmcluster.backends.parallelcluster import ParallelClusterBackend
from fmcluster.backends.pcs import PcsBackend
from fmcluster.backends.profile import BackendProfile
from fmcluster.backends.protocol import Backend, Capability
from fmcluster.connection import aws
from fmcluster.errors import UsageError
from fmcluster.render.documents import RenderedDocuments
from fmcluster.spec import backend_rules as spec_backends
from fmcluster.spec.models import Spec
from fmcluster.validate import stand_ins

# The backends, in the order the docs and `schema` list them (the first is the spec's default).
_BUILT_IN: tuple[Backend, ...] = (ParallelClusterBackend(), PcsBackend(), EksBackend())

_BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> None:
    """Add ``backend`` under its name (after those already known), and hand its spec rules to the spec layer, its
    stand-ins to validate and its ``forget_default_clients`` to the connection."""
    _BACKENDS[backend.name] = backend
    spec_backends.register(backend.name, backend.spec_rules,
                           runs_head_node=Capability.HEAD_NODE in backend.capabilities)
    stand_ins.register(backend.name, backend.profile.stand_ins)
    aws.keep_default_clients(backend.name, backend.forget_default_clients)


def unregister(name: str) -> None:
    """Forget backend ``name`` (a test's backend, once the test is done)."""
    _BACKENDS.pop(name, None)
    spec_backends.unregister(name)
    stand_ins.unregister(name)
    aws.stop_keeping_default_clients(name)


for _backend in _BUILT_IN:
    register(_backend)


def names() -> tuple[str, ...]:
    """The spec's `backend:` values, in the order the docs and `schema` list them."""
    return tuple(_BACKENDS)


def check_name(name: str) -> str:
    """``name`` when it is a backend; a UsageError naming the known ones otherwise."""
    if name not in _BACKENDS:
        raise UsageError(f"unknown backend {name!r}: the backends are {', '.join(_BACKENDS)}")
    return name


def get(name: str) -> Backend:
    """Backend ``name``. Light: its lifecycle (boto3, the backend's extra) loads on its first lifecycle call, and
    exits 2 naming the extra when the backend needs one that is not installed."""
    return _BACKENDS[check_name(name)]


def backends() -> list[Backend]:
    """Every backend, in :func:`names` order."""
    return list(_BACKENDS.values())


def profile(name: str) -> BackendProfile:
    """The light facts about backend ``name``."""
    return get(name).profile


def profiles() -> list[BackendProfile]:
    """Every backend's profile, in :func:`names` order."""
    return [backend.profile for backend in _BACKENDS.values()]


def render(spec: Spec, spec_file: str = "spec.yaml", subnet_id: str | None = None) -> RenderedDocuments:
    """The spec's documents, by its backend's ``render``."""
    return get(spec.backend).render(spec, spec_file, subnet_id=subnet_id)
