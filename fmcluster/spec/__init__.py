"""The cluster spec: YAML in, a validated model (with positions for every error) out."""

from fmcluster.spec.loader import LoadedSpec, load_spec, load_spec_data
from fmcluster.spec.models import Spec

__all__ = ["LoadedSpec", "Spec", "load_spec", "load_spec_data"]
