"""The four lifecycle verbs — create, scale, status, destroy — over either backend, on the one engine."""

from fmcluster.lifecycle.create import capacity_advice, create, preflight, preflight_results
from fmcluster.lifecycle.destroy import destroy
from fmcluster.lifecycle.scale import parse_counts, scale
from fmcluster.lifecycle.session import (
    ClusterNotFound,
    PreflightFailed,
    Session,
    backend_for,
    confirm,
    dump_json,
    load_record,
    run_engine,
    spec_of,
    spec_text,
    usd_per_hour,
)
from fmcluster.lifecycle.status import status

__all__ = [
    "ClusterNotFound", "PreflightFailed", "Session", "backend_for", "capacity_advice", "confirm", "create",
    "destroy", "dump_json", "load_record", "parse_counts", "preflight", "preflight_results", "run_engine", "scale",
    "spec_of", "spec_text", "status", "usd_per_hour",
]
