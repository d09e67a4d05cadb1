"""The burn-in gate's hold on EKS (issue 37 item 1): what keeps a new node of a gated queue from taking jobs until it
passes, and what it carries once judged.

* A queue whose burn-in level is not ``off`` (:func:`fmcluster.spec.burn_in.burn_in`) gets the node-group taint
  ``fmcluster.io/burn-in=pending`` with effect ``NO_SCHEDULE`` (EKS API reference, CreateNodegroup ``taints``:
  ``key``, ``value``, ``effect`` one of ``NO_SCHEDULE | NO_EXECUTE | PREFER_NO_SCHEDULE``). The kubelet registers
  every node of the group with it ("Recipe: Prevent pods from being scheduled on specific nodes", EKS User Guide),
  as ``NoSchedule`` on the Node; a replacement node registers with it again, so a replaced node is pending too.
* What must run on a pending node tolerates exactly that taint: fmcluster's burn-in MPIJobs (launcher and workers),
  and the device plugins fmcluster ships (NVIDIA's, AWS's EFA, Neuron's), without which the node advertises no GPU
  or EFA device and the check could not be placed.
* The verdict, per node: passed lifts the taint (the Node's ``spec.taints`` without it) and labels
  ``fmcluster.io/burn-in=passed``; failed keeps the taint and labels ``fmcluster.io/burn-in=failed`` with
  ``fmcluster.io/burn-in-check=<the failed checks>``.
"""

from __future__ import annotations

import re
from typing import Any

from fmcluster.catalog.hardware import hardware
from fmcluster.spec.burn_in import burn_in
from fmcluster.spec.decisions import needs_imex
from fmcluster.spec.models import Queue, Spec, instance_types_of

TAINT_KEY = "fmcluster.io/burn-in"
TAINT_VALUE = "pending"
#: The node group's taint, as EKS's API spells its effect (CreateNodegroup ``taints[].effect``).
EKS_TAINT = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": "NO_SCHEDULE"}
#: The same taint on the Node, as Kubernetes spells it (Taint ``effect``: ``NoSchedule``).
KUBE_TAINT = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": "NoSchedule"}
#: What tolerates exactly the pending taint, and nothing else.
TOLERATION = {"key": TAINT_KEY, "operator": "Equal", "value": TAINT_VALUE, "effect": "NoSchedule"}

RESULT_LABEL = "fmcluster.io/burn-in"
CHECK_LABEL = "fmcluster.io/burn-in-check"
PASSED, FAILED = "passed", "failed"
# Kubernetes "Labels and Selectors": a label value is at most 63 characters, alphanumeric at both ends, with -, _
# and . between.
LABEL_VALUE_MAX = 63


def gated(queue: Queue) -> bool:
    """Whether ``create`` holds and tests the queue's nodes: a level other than ``off``, on a queue the EKS check job
    can judge (NVIDIA GPUs, since it runs nvidia-smi, dcgmi and nccl-tests; one instance type, whose counts and floor
    it judges by); not yet an UltraServer queue (p6e-gb200): its burn-in jobs make the ComputeDomain whose IMEX
    channels their workers claim, but the sandbox places no pod that claims a DRA device, so a gate there could not be
    tested to its end. Other queues are not held: a taint nothing would lift would keep their nodes
    idle for good."""
    return burn_in(queue).level != "off" and hardware(queue.instance_type).has_gpus \
        and len(instance_types_of(queue)) == 1 and not needs_imex(queue)


def gated_queues(spec: Spec) -> list[Queue]:
    return [queue for queue in spec.queues if gated(queue)]


def taints(queue: Queue) -> list[dict[str, str]]:
    """The queue's node-group taints: the pending one when the queue is gated."""
    return [dict(EKS_TAINT)] if gated(queue) else []


def check_value(checks: list[str]) -> str:
    """The failed checks as one label value (``dcgm.efa``), cut to what a label value holds."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "-", ".".join(checks) or "unknown")[:LABEL_VALUE_MAX]
    return value.strip("-_.") or "unknown"


def is_pending(node: Any) -> bool:
    """A Node (lightkube) that carries the pending taint and no failed verdict: the gate still has to test it."""
    return has_taint(node) and result(node) != FAILED


def has_taint(node: Any) -> bool:
    return any(t.key == TAINT_KEY and t.effect == "NoSchedule" for t in (node.spec.taints or [])) \
        if node.spec else False


def result(node: Any) -> str | None:
    labels = (node.metadata.labels if node.metadata else None) or {}
    return labels.get(RESULT_LABEL)


def failed_checks(node: Any) -> str:
    labels = (node.metadata.labels if node.metadata else None) or {}
    return labels.get(CHECK_LABEL, "unknown")
