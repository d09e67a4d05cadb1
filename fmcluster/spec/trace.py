"""Point a backend's message back at the line of the spec that caused it.

ParallelCluster's validators speak of queues, compute resources, instance types, subnets and key pairs;
each of those came from one place in the spec, so a message that names one can carry that position.
"""

from __future__ import annotations

import re

from fmcluster.spec import decisions
from fmcluster.spec.loader import LoadedSpec
from fmcluster.spec.positions import Path_


def _named_values(loaded: LoadedSpec) -> list[tuple[str, Path_]]:
    spec = loaded.spec
    found: list[tuple[str, Path_]] = [(spec.head_node.instance_type, ("head_node", "instance_type"))]
    for index, queue in enumerate(spec.queues):
        found += [(queue.name, ("queues", index, "name")),
                  (decisions.compute_resource_name(queue, spec.backend), ("queues", index, "name")),
                  (queue.instance_type, ("queues", index, "instance_type"))]
        if queue.capacity.reservation_id:
            found.append((queue.capacity.reservation_id, ("queues", index, "capacity", "reservation_id")))
    network = spec.network
    for value, path in ((network.subnet_id, ("network", "subnet_id")),
                        (network.head_subnet_id, ("network", "head_subnet_id")),
                        (network.ssh.key_name, ("network", "ssh", "key_name")),
                        (spec.image.ami if spec.image else None, ("image", "ami"))):
        if value:
            found.append((value, path))
    lustre = spec.storage.lustre
    if lustre and lustre.s3_import:
        found.append((lustre.s3_import.split("/")[2], ("storage", "lustre", "s3_import")))
    return found


def locate(loaded: LoadedSpec, message: str) -> str | None:
    """``file:line:col (path)`` of the spec value ``message`` names; the most specific one wins."""
    best: tuple[int, Path_] | None = None
    for value, path in _named_values(loaded):
        if re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", message):
            if best is None or len(value) > best[0]:
                best = (len(value), path)
    if best is None:
        return None
    problem = loaded.document.problem(best[1], "")
    return str(problem).rstrip(": ")
