"""Optional parts of fmcluster and the pip extra that brings each one.

``pip install fmcluster`` runs PCS, ``plan``, ``render``, ``schema`` and offline ``validate``. ParallelCluster's
Python API (with its CDK tree) and the sandbox (moto) are extras. Every code path that needs one calls
:func:`require` first, so a missing extra is one line naming what to install, exit 2, never an ImportError.
"""

from __future__ import annotations

import importlib.util

from fmcluster.errors import UsageError

# extra → (the modules it provides, what it is for)
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "parallelcluster": (("pcluster",), "aws-parallelcluster 3.16.1"),
    "sandbox": (("moto", "werkzeug", "cryptography"), "moto's server"),
}


class MissingExtra(UsageError):
    """The command needs an extra that is not installed."""

    def __init__(self, extra: str, needed_for: str):
        self.extra = extra
        self.hint = f"the {extra} extra ({EXTRAS[extra][1]}): pip install 'fmcluster[{extra}]'"
        super().__init__(f"{needed_for} needs {self.hint}")


def available(extra: str) -> bool:
    modules, _ = EXTRAS[extra]
    return all(importlib.util.find_spec(module) is not None for module in modules)


def require(extra: str, needed_for: str) -> None:
    """Raise :class:`MissingExtra` (exit 2, one line) unless *extra* is installed."""
    if not available(extra):
        raise MissingExtra(extra, needed_for)


def install_hint(extra: str) -> str:
    return f"pip install 'fmcluster[{extra}]'"
