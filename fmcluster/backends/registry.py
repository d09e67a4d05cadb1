"""The backends by name: the one place that lists them. Adding a backend means a folder under
``fmcluster/backends/`` (``profile.py`` with its :class:`BackendProfile`, ``backend.py`` with its
:class:`Backend`, and the parts that code below the backends reaches by name through
:mod:`fmcluster.backend_parts`: ``spec_rules.py``, ``preflight.py``, ``validate.py``, ``render.py``), an entry
in each function below, and its templates.

``profile`` is light (nothing beyond the standard library); ``tagged_clusters`` needs boto3 alone; ``backend``
loads the lifecycle class, with boto3 and, for ParallelCluster, its extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fmcluster.errors import UsageError
from fmcluster.extras import require

if TYPE_CHECKING:
    from fmcluster.backends.base import Backend
    from fmcluster.backends.profile import BackendProfile

# The spec's `backend:` values, in the order the docs and `schema` list them (the first is the default).
NAMES: tuple[str, ...] = ("parallelcluster", "pcs")


def check_name(name: str) -> str:
    """``name`` when it is a backend; a UsageError naming the known ones otherwise."""
    if name not in NAMES:
        raise UsageError(f"unknown backend {name!r}: the backends are {', '.join(NAMES)}")
    return name


def profile(name: str) -> BackendProfile:
    """The light facts about backend ``name``."""
    if check_name(name) == "pcs":
        from fmcluster.backends.pcs.profile import PROFILE as PCS

        return PCS
    from fmcluster.backends.parallelcluster.profile import PROFILE as PARALLELCLUSTER

    return PARALLELCLUSTER


def profiles() -> list[BackendProfile]:
    """Every backend's profile, in :data:`NAMES` order."""
    return [profile(name) for name in NAMES]


def backend(name: str) -> Backend:
    """A lifecycle instance of backend ``name``; exit 2 naming the extra when the backend needs one that is
    not installed."""
    found = profile(name)
    if found.extra:
        require(found.extra, f"a {found.display} cluster")
    if name == "pcs":
        from fmcluster.backends.pcs.backend import PcsBackend

        return PcsBackend()
    from fmcluster.backends.parallelcluster.backend import ParallelClusterBackend

    return ParallelClusterBackend()


def tagged_clusters(name: str, region: str) -> list[tuple[str, str]]:
    """(name, common status) of each cluster of backend ``name`` that ``region`` holds by its
    ``fmcluster:cluster`` tag. boto3 only: it needs no extra, so a teammate's cluster is listed on any install."""
    if check_name(name) == "pcs":
        from fmcluster.backends.pcs.listing import tagged_clusters as pcs_clusters

        return pcs_clusters(region)
    from fmcluster.backends.parallelcluster.listing import tagged_clusters as parallelcluster_clusters

    return parallelcluster_clusters(region)
