"""The budget guard's calls on EKS: every queue's managed node group to zero nodes (UpdateNodegroupConfig
``scalingConfig`` minSize 0, desiredSize 0; maxSize kept, since botocore's EKS model floors it at 1), or deleted
(DeleteNodegroup). The ``system`` node group (cluster software), the control plane and storage stay, and bill.
Light: no boto3."""

from __future__ import annotations

from fmcluster.backends.protocol import GuardCall
from fmcluster.spec.models import Spec, max_nodes


def guard_calls(spec: Spec, on_limit: str, fires_at: str) -> list[GuardCall]:
    calls = []
    for queue in spec.queues:
        group = queue.name  # the node group is named after its queue (fmcluster/backends/eks/render.py)
        arn = f"${{eks_nodegroup.{group}.arn}}"
        target = {"clusterName": spec.name, "nodegroupName": group}
        if on_limit == "destroy-compute":
            calls.append(GuardCall(f"destroy-compute-{group}", "eks", "deleteNodegroup", target, (arn,),
                                   "eks:DeleteNodegroup", f"deletes node group {group}"))
        else:
            scaling = {"minSize": 0, "maxSize": max(1, max_nodes(queue)), "desiredSize": 0}
            calls.append(GuardCall(f"stop-{group}", "eks", "updateNodegroupConfig",
                                   {**target, "scalingConfig": scaling}, (arn,), "eks:UpdateNodegroupConfig",
                                   f"scales node group {group} to 0 nodes"))
    return calls
