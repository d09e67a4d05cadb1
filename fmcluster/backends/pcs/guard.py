"""The budget guard's calls on PCS: every queue's compute node group to zero instances (UpdateComputeNodeGroup
``scalingConfiguration`` min 0, max 0: botocore's PCS model allows 0 for both), or deleted
(DeleteComputeNodeGroup). The login node group, the cluster (its controller) and storage stay. Light: no boto3."""

from __future__ import annotations

from fmcluster.backends.protocol import GuardCall
from fmcluster.spec import decisions
from fmcluster.spec.models import Spec


def guard_calls(spec: Spec, on_limit: str, fires_at: str) -> list[GuardCall]:
    calls = []
    for queue in spec.queues:
        group = decisions.compute_resource_name(queue, "pcs")
        # The node group's ARN as PCS issues it (its id is PCS's): the engine fills it once the group exists.
        arn = f"${{compute_node_group.{group}.arn}}"
        target = {"clusterIdentifier": spec.name, "computeNodeGroupIdentifier": group}
        if on_limit == "destroy-compute":
            calls.append(GuardCall(f"destroy-compute-{group}", "pcs", "deleteComputeNodeGroup", target, (arn,),
                                   "pcs:DeleteComputeNodeGroup", f"deletes compute node group {group}"))
        else:
            calls.append(GuardCall(
                f"stop-{group}", "pcs", "updateComputeNodeGroup",
                {**target, "scalingConfiguration": {"minInstanceCount": 0, "maxInstanceCount": 0}}, (arn,),
                "pcs:UpdateComputeNodeGroup", f"scales compute node group {group} to 0 instances"))
    return calls
