"""Load a spec, reading EC2's facts for instance types outside the catalog when an endpoint is reachable.

Loading stays offline; this is the step after it. When ``DescribeInstanceTypes`` taught fmcluster something new
(cached on disk, :mod:`fmcluster.catalog.hardware`), the spec is checked again, so that the rules that depend on
the hardware (EFA, architecture) see it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fmcluster.catalog.hardware import discover
from fmcluster.connection import aws
from fmcluster.spec.loader import LoadedSpec, load_spec, parse_spec
from fmcluster.spec.models import Spec


def spec_instance_types(spec: Spec) -> list[str]:
    """The compute types: their accelerators and EFA matter. A head or login type's only fact that matters is its
    architecture, which its name says (so a spec of catalog queue types costs no call)."""
    return [q.instance_type for q in spec.queues]


def load_with_instance_facts(path: str | Path, console_err: Any = None) -> LoadedSpec:
    """DescribeInstanceTypes for the types fmcluster lacks facts on (when it can ask), then ``load_spec``. The
    facts are read before the rules run, since some rules (an EFA layout) cannot pass without them."""
    spec, _ = parse_spec(path)
    result = discover(spec_instance_types(spec), aws.region_for(spec.region))
    if result.problem and console_err is not None and aws.target().endpoint_url:
        console_err.print(f"warning: could not read instance facts from EC2 ({result.problem})", markup=False,
                          highlight=False)
    return load_spec(path)
