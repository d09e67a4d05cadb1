"""A Kubernetes upgrade more than one minor version long, walked the way EKS takes it: one minor version at a time
(EKS User Guide, "Update existing cluster to new Kubernetes version": the control plane moves one minor version per
update, and only once its managed node groups are at its version). Each step is one walk of the resource graph:
the control plane first, then the node groups and the add-ons (those whose pods run on nodes after the node
groups)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fmcluster.backends.eks.versions import minor, versions_between
from fmcluster.engine import ResourceChange

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.spec.models import Spec


def waypoints(context: BackendContext, changes: list[ResourceChange]) -> list[tuple[str, Spec]]:
    """The specs to converge to before the spec itself, each at the next minor version: none when the control
    plane is at most one minor version behind and its node groups are at its version. A node group lagging the
    control plane is brought to it first, since EKS refuses the next control-plane update until then."""
    spec = context.require_spec()
    current = context.ctx.values.get(f"eks_cluster.{spec.name}.version")
    target = spec.kubernetes.version
    if not isinstance(current, str) or "." not in current or minor(target) <= minor(current):
        return []
    lagging = [c.resource for c in changes if c.resource.startswith("eks_nodegroup:")
               and any(a.path == "version" and a.old != current for a in c.attributes)]
    versions = ([current] if lagging else []) + versions_between(current, target)[:-1]
    return [(f"Kubernetes {version}" + (f" (node groups {', '.join(k.split(':', 1)[1] for k in lagging)} first)"
                                         if version == current else ""), _at(spec, version)) for version in versions]


def _at(spec: Spec, version: str) -> Spec:
    return spec.model_copy(update={"kubernetes": spec.kubernetes.model_copy(update={"version": version})})
