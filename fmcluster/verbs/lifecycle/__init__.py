"""The lifecycle verbs — create, diff, scale, status, destroy — over either backend, on the one engine."""

from fmcluster.errors import Aborted
from fmcluster.output.ui import confirm
from fmcluster.verbs.lifecycle.common import ClusterNotFound, PreflightFailed, dump_json, spec_of
from fmcluster.verbs.lifecycle.create import capacity_advice, create, preflight, preflight_results
from fmcluster.verbs.lifecycle.destroy import destroy
from fmcluster.verbs.lifecycle.diff import diff
from fmcluster.verbs.lifecycle.scale import parse_counts, scale
from fmcluster.verbs.lifecycle.status import status

__all__ = ["Aborted", "ClusterNotFound", "PreflightFailed", "capacity_advice", "confirm", "create", "destroy",
           "diff", "dump_json", "parse_counts", "preflight", "preflight_results", "scale", "spec_of", "status"]
