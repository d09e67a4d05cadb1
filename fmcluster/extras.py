"""Optional parts of fmcluster and the pip extra that brings each one.

``pip install fmcluster`` runs PCS, ``plan``, ``render``, ``schema`` and offline ``validate``. ParallelCluster's
Python API (with its CDK tree) and the sandbox (its own distribution, with moto) are extras. Every code path
that needs one calls :func:`require` first, so a missing extra is one line naming what to install, exit 2, never
an ImportError.
"""

from __future__ import annotations

import importlib.util

from fmcluster.errors import UsageError

# extra → (the modules it provides, what it is for)
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "parallelcluster": (("pcluster",), "aws-parallelcluster 3.16.1"),
    "sandbox": (("fmcluster_sandbox", "moto", "werkzeug", "cryptography"), "fmcluster-sandbox, with moto's server"),
    "kubernetes": (("lightkube", "kubernetes_validate", "jsonschema"),
                   "lightkube for the Kubernetes API, kubernetes-validate and jsonschema for manifests"),
}


class MissingExtra(UsageError):
    """The command needs an extra that is not installed."""

    def __init__(self, extra: str, needed_for: str):
        self.extra = extra
        self.hint = f"the {extra} extra ({EXTRAS[extra][1]}): {install_hint(extra)}"
        super().__init__(f"{needed_for} needs {self.hint}")


def available(extra: str) -> bool:
    modules, _ = EXTRAS[extra]
    return all(importlib.util.find_spec(module) is not None for module in modules)


def require(extra: str, needed_for: str) -> None:
    """Raise :class:`MissingExtra` (exit 2, one line) unless *extra* is installed."""
    if not available(extra):
        raise MissingExtra(extra, needed_for)


# The sandbox is its own distribution and not on PyPI: it installs from the sandbox/ folder of a checkout.
_FROM_CHECKOUT = {"sandbox": "pip install 'fmcluster[sandbox]' ./sandbox (from the fmcluster checkout)"}


def install_hint(extra: str) -> str:
    return _FROM_CHECKOUT.get(extra, f"pip install 'fmcluster[{extra}]'")
