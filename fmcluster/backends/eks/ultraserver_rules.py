"""What an EKS spec with P6e-GB200 UltraServer queues must satisfy, each refusal with AWS's reason (AWS's "Use
P6e-GB200 UltraServers with Amazon EKS" page and the pinned DRA driver's requirements)."""

from __future__ import annotations

from fmcluster.backends.eks.software import dra_driver
from fmcluster.catalog import eks_versions
from fmcluster.spec import ultraserver_capacity
from fmcluster.spec.backend_rules import Report
from fmcluster.spec.models import Spec

PAGE = "EKS guide, 'Use P6e-GB200 UltraServers with Amazon EKS'"


def check(spec: Spec, error: Report) -> None:
    served = [(index, queue) for index, queue in enumerate(spec.queues) if dra_driver.serves(queue)]
    for index, queue in served:
        ultraserver_capacity.refuse_unless_capacity_block(index, queue, PAGE, error)
    version = spec.kubernetes.version
    if not served or eks_versions.support(version) is None:  # an unknown version is refused on its own
        return
    minor = tuple(int(part) for part in version.split(".")[:2])
    if minor >= dra_driver.FIRST_MINOR:
        return
    index, queue = served[0]
    first = ".".join(map(str, dra_driver.FIRST_MINOR))
    if minor < (1, 33):
        why = (f"EKS supports P6e-GB200 UltraServers from Kubernetes 1.33 ({PAGE}): {version} has no Dynamic "
               "Resource Allocation, which IMEX channels need")
    else:
        why = (f"the DRA driver fmcluster installs for IMEX ({dra_driver.DRA_DRIVER.version}) needs the "
               f"resource.k8s.io/v1 API, served from Kubernetes {first} (its prerequisites: v1.34.2 or later); "
               f"{version} serves only beta versions")
    error(("kubernetes", "version"), f"queue {queue.name} ({queue.instance_type}) needs Kubernetes {first} or "
          f"later: {why}")
