"""The backends by name: the one place that lists them. Adding a backend means a folder under
``fmcluster/backends/`` (``profile.py`` with its :class:`BackendProfile`, ``backend.py`` with its
:class:`Backend`, ``listing.py`` with its ``tagged_clusters``, and the parts that code below the backends reaches
by name through :mod:`fmcluster.backends.parts`: ``spec_rules.py``, ``preflight.py``, ``validate.py``,
``render.py``), its name in :data:`NAMES` and its class in ``_BACKEND_CLASSES``, and its templates.

``profile`` is light (nothing beyond the standard library); ``tagged_clusters`` needs boto3 alone; ``backend``
loads the lifecycle class, with boto3 and the backend's extra (ParallelCluster's, EKS's Kubernetes client).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fmcluster.errors import UsageError
from fmcluster.extras import require

if TYPE_CHECKING:
    from fmcluster.backends.base import Backend
    from fmcluster.backends.profile import BackendProfile

# The spec's `backend:` values, in the order the docs and `schema` list them (the first is the default).
NAMES: tuple[str, ...] = ("parallelcluster", "pcs", "eks")
# Each backend's lifecycle class, in its ``backend`` module.
_BACKEND_CLASSES = {"parallelcluster": "ParallelClusterBackend", "pcs": "PcsBackend", "eks": "EksBackend"}


def check_name(name: str) -> str:
    """``name`` when it is a backend; a UsageError naming the known ones otherwise."""
    if name not in NAMES:
        raise UsageError(f"unknown backend {name!r}: the backends are {', '.join(NAMES)}")
    return name


def _module(name: str, part: str) -> Any:
    return importlib.import_module(f"fmcluster.backends.{check_name(name)}.{part}")


def profile(name: str) -> BackendProfile:
    """The light facts about backend ``name``."""
    return _module(name, "profile").PROFILE


def profiles() -> list[BackendProfile]:
    """Every backend's profile, in :data:`NAMES` order."""
    return [profile(name) for name in NAMES]


def backend(name: str) -> Backend:
    """A lifecycle instance of backend ``name``; exit 2 naming the extra when the backend needs one that is
    not installed."""
    found = profile(name)
    if found.extra:
        article = "an" if found.display[:1] in "AEIOU" else "a"  # an EKS, a PCS, a ParallelCluster
        require(found.extra, f"{article} {found.display} cluster")
    return getattr(_module(name, "backend"), _BACKEND_CLASSES[name])()


def tagged_clusters(name: str, region: str) -> list[tuple[str, str]]:
    """(name, common status) of each cluster of backend ``name`` that ``region`` holds by its
    ``fmcluster:cluster`` tag. boto3 only: it needs no extra, so a teammate's cluster is listed on any install."""
    return _module(name, "listing").tagged_clusters(region)
