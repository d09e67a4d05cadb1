"""``auto_repair`` on EKS: the managed node group's ``nodeRepairConfig`` and the ``eks-node-monitoring-agent`` add-on.

Facts, hand-typed from the EKS User Guide ("Automatically repair nodes in EKS clusters", node-repair.adoc, and
"Detect node health issues with the EKS node monitoring agent", node-health-nma.adoc) and botocore's EKS model
(CreateNodegroup ``nodeRepairConfig``: ``enabled``, ``maxUnhealthyNodeThreshold{Count,Percentage}``,
``maxParallelNodesRepaired{Count,Percentage}``, ``nodeRepairConfigOverrides[]`` of ``nodeMonitoringCondition``,
``nodeUnhealthyReason``, ``minRepairWaitTimeMins`` and ``repairAction`` ``Replace | Reboot | NoAction``):

* Node auto repair is off by default. Without the agent it acts on the kubelet's ``Ready`` condition; with it,
  also on the conditions the agent sets (``AcceleratedHardwareReady`` for GPUs and Neuron devices, and
  ``ContainerRuntimeReady``, ``KernelReady``, ``NetworkingReady``, ``StorageReady``).
* The model offers no "reboot instead of replace" switch. It offers one override per (condition, reason), which
  is how a queue on a Capacity Block or an ODCR gets Reboot for every reason whose documented default is Replace.
  The kubelet's ``Ready`` condition is not the agent's and has no reason to override: a node that stops reporting
  Ready is still replaced.
* Reboot is offered on managed node groups only (Auto Mode and Karpenter replace), which is what fmcluster makes.
"""

from __future__ import annotations

from typing import Any

from fmcluster.catalog.hardware import hardware
from fmcluster.spec.auto_repair import auto_repair, in_reservation
from fmcluster.spec.models import Queue, Spec

ADDON = "eks-node-monitoring-agent"
ADDON_PURPOSE = ("node health conditions for node auto repair (the EKS node monitoring agent: GPU XID and NVLink "
                 "errors, Neuron errors, kernel, network and storage faults)")
REPAIR_PAGE = "https://docs.aws.amazon.com/eks/latest/userguide/node-repair.html"
AGENT_PAGE = "https://docs.aws.amazon.com/eks/latest/userguide/node-health-nma.html"

# node-repair.adoc, "Repair after": how long a condition must last before EKS repairs the node.
WAIT_MINUTES = {"AcceleratedHardwareReady": 10, "ContainerRuntimeReady": 30, "KernelReady": 30,
                "NetworkingReady": 30}
# node-health-nma.adoc: every "Condition" reason whose repair action is Replace, by the condition it sets.
NVIDIA_REPLACED = ("NvidiaXID74Error", "NvidiaXID79Error", "NvidiaXID119Error", "NvidiaXID120Error",
                   "NvidiaXID121Error", "NvidiaXID140Error", "NvidiaDoubleBitError", "NvidiaNVLinkError")
NEURON_REPLACED = ("NeuronDMAError", "NeuronHBMUncorrectableError", "NeuronNCUncorrectableError",
                   "NeuronSRAMUncorrectableError")
HOST_REPLACED = {
    "ContainerRuntimeReady": ("PodStuckTerminating",),
    "KernelReady": ("ForkFailedOutOfPIDs",),
    "NetworkingReady": ("IPAMDNotReady", "IPAMDNotRunning", "InterfaceNotRunning", "InterfaceNotUp",
                        "MissingLoopbackInterface"),
}


def wanted(spec: Spec) -> bool:
    """Whether the cluster gets the monitoring agent: once, when any queue has auto repair."""
    return any(auto_repair(queue) for queue in spec.queues)


def reboots(queue: Queue) -> bool:
    """Whether the queue's repairs reboot rather than replace: a replacement on a Capacity Block or an ODCR needs a
    free slot in the reservation, which a full one does not have."""
    return auto_repair(queue) and in_reservation(queue)


def _accelerator_reasons(queue: Queue) -> tuple[str, ...]:
    kind = hardware(queue.instance_type).accelerator_kind
    if kind == "gpu":
        return NVIDIA_REPLACED
    if kind in ("trainium", "inferentia"):
        return NEURON_REPLACED
    return ()


def overrides(queue: Queue) -> list[dict[str, Any]]:
    """Reboot for every reason the agent reports whose documented default is Replace (all four fields, which the
    API requires of an override)."""
    reasons = [("AcceleratedHardwareReady", reason) for reason in _accelerator_reasons(queue)]
    reasons += [(condition, reason) for condition, names in HOST_REPLACED.items() for reason in names]
    return [{"nodeMonitoringCondition": condition, "nodeUnhealthyReason": reason,
             "minRepairWaitTimeMins": WAIT_MINUTES[condition], "repairAction": "Reboot"}
            for condition, reason in reasons]


def node_repair_config(queue: Queue) -> dict[str, Any]:
    """The node group's ``nodeRepairConfig``: written for every queue, so that turning it off is a change too."""
    if not auto_repair(queue):
        return {"enabled": False}
    config: dict[str, Any] = {"enabled": True}
    if reboots(queue):
        config["nodeRepairConfigOverrides"] = overrides(queue)
    return config


def plan_note(queue: Queue) -> str | None:
    """What ``plan`` says about the queue's repairs on EKS."""
    if not auto_repair(queue):
        return None
    if not reboots(queue):
        return (f"node auto repair on: EKS replaces a node the node monitoring agent or the kubelet reports "
                f"unhealthy, after 10 min for accelerator faults and 30 min for others ({REPAIR_PAGE})")
    where = "Capacity Block" if queue.capacity.type == "capacity-block" else "capacity reservation"
    return (f"node auto repair on, reboot-not-replace: on a {where} a replaced node needs a free slot in the "
            f"reservation, so each fault the node monitoring agent reports whose default is Replace "
            f"({len(overrides(queue))} reasons, e.g. {overrides(queue)[0]['nodeUnhealthyReason']}) reboots the node "
            "instead; a node whose fault outlasts the reboot stays in the group until you replace it. A node that "
            f"stops reporting Ready is still replaced: EKS offers no override for the kubelet's condition "
            f"({REPAIR_PAGE})")
