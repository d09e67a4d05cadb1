"""Rules about the machines themselves: architectures, images and UltraServers.

Each rule mirrors what AWS refuses, or what cannot work, and points at the field it is about.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fmcluster.catalog.hardware import hardware
from fmcluster.spec.models import Spec
from fmcluster.spec.positions import Path_

Report = Callable[[Path_, str], None]
_FAMILY = re.compile(r"^(?P<letters>[a-z]+)(?P<generation>\d+)[a-z-]*\.(?P<size>.+)$")


def _counterpart(instance_type: str, architecture: str) -> str | None:
    """The same family and size on the other architecture (m7i.2xlarge <-> m7g.2xlarge), as a hint only."""
    match = _FAMILY.match(instance_type)
    if not match or match["letters"] not in ("m", "c", "r"):
        return None
    suffix = "g" if architecture == "arm64" else "i"
    return f"{match['letters']}{match['generation']}{suffix}.{match['size']}"


def architectures(spec: Spec, error: Report, warn: Report) -> None:
    """ParallelCluster runs one OS image on the head node and every compute node: its
    InstanceArchitectureCompatibilityValidator (pcluster/validators/cluster_validators.py) fails a cluster whose
    compute types do not support the head node's architecture. PCS gives every node group its own AMI
    (CreateComputeNodeGroup amiId), so x86_64 and arm64 node groups live in one cluster; one image.ami for all
    of them cannot, because an AMI has one architecture (DescribeImages Architecture)."""
    head = hardware(spec.head_node.instance_type)
    if spec.backend == "parallelcluster":
        for index, queue in enumerate(spec.queues):
            compute = hardware(queue.instance_type)
            if None in (head.architecture, compute.architecture) or compute.architecture == head.architecture:
                continue
            hint = _counterpart(spec.head_node.instance_type, compute.architecture or "")
            fix = f"set head_node.instance_type to an {compute.architecture} type" + (
                f" such as {hint}" if hint else "")
            error(("queues", index, "instance_type"),
                  f"{queue.instance_type} is {compute.architecture} but the head node ({spec.head_node.instance_type}) "
                  f"is {head.architecture}: ParallelCluster boots one image on every node and refuses compute types "
                  f"of another architecture than the head node's; {fix}, or use the pcs backend")
        return
    if spec.image is None or spec.image.ami is None:
        return
    for index, queue in enumerate(spec.queues):
        compute = hardware(queue.instance_type)
        if None in (head.architecture, compute.architecture) or compute.architecture == head.architecture:
            continue
        error(("queues", index, "instance_type"),
              f"{queue.instance_type} is {compute.architecture} but the login node ({spec.head_node.instance_type}) "
              f"is {head.architecture}, and image.ami is one AMI for every node group (an AMI has one "
              "architecture): use an image.family that AWS publishes for both, or a login type of the same "
              "architecture")


HARDWARE_RULES = (architectures,)
