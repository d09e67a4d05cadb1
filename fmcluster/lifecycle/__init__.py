"""The lifecycle verbs — create, diff, scale, status, destroy — over either backend, on the one engine."""

from fmcluster.errors import Aborted
from fmcluster.lifecycle.common import ClusterNotFound, PreflightFailed, dump_json, spec_of
from fmcluster.lifecycle.create import capacity_advice, create, preflight, preflight_results
from fmcluster.lifecycle.destroy import destroy
from fmcluster.lifecycle.diff import diff
from fmcluster.lifecycle.scale import parse_counts, scale
from fmcluster.lifecycle.status import status
from fmcluster.ui import confirm

__all__ = ["Aborted", "ClusterNotFound", "PreflightFailed", "capacity_advice", "confirm", "create", "destroy",
           "diff", "dump_json", "parse_counts", "preflight", "preflight_results", "scale", "spec_of", "status"]
