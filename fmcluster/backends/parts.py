"""Each backend's folder holds modules of fixed names, one per job: ``profile``, ``backend``, ``spec_rules``,
``preflight``, ``validate``, ``render``. Code below the backends (the spec, preflight, validate, render) reaches a
part here by the backend's name and the part's, not by import: the backends import that code, so importing them back
would tie the two into one tangle. Each such module says which attribute it expects of the part."""

from __future__ import annotations

import importlib
from types import ModuleType


def backend_part(backend: str, part: str) -> ModuleType:
    """``fmcluster.backends.<backend>.<part>`` (``backend`` is a name the spec's model already accepted)."""
    return importlib.import_module(f"fmcluster.backends.{backend}.{part}")
