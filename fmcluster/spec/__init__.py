"""The cluster spec: YAML in, a validated model (with positions for every error) out.

``load_spec`` here also reads EC2's facts for instance types outside the catalog when an endpoint is reachable
(:mod:`fmcluster.spec.instance_facts`); :func:`fmcluster.spec.loader.load_spec` never calls AWS.
"""

from fmcluster.spec.instance_facts import load_with_instance_facts as load_spec
from fmcluster.spec.loader import LoadedSpec, load_spec_data
from fmcluster.spec.models import Spec

__all__ = ["LoadedSpec", "Spec", "load_spec", "load_spec_data"]
