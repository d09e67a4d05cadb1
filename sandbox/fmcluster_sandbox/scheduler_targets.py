"""The resource a scheduled call acts on: its ARN (what IAM evaluates the action against) and its tags.

Service Authorization Reference: eks:UpdateNodegroupConfig, eks:DeleteNodegroup and the other node group actions
act on the ``nodegroup`` resource; the cluster actions on ``cluster``; pcs:UpdateComputeNodeGroup and
pcs:DeleteComputeNodeGroup on ``computenodegroup`` (the ARN PCS reports for the group), queue actions on ``queue``,
cluster actions on ``cluster``; dynamodb:UpdateItem, PutItem, DeleteItem on ``table``; sns:Publish on ``topic``
(the ``TopicArn`` the request names; a publish to a phone number or an endpoint ARN is not looked up). Each is looked
up in the sandbox as the calling role, so the ARN is the one the service itself reports.

A target whose resource the sandbox cannot name is refused (``LookupError``, a failed run) rather than evaluated
against a guessed ARN. A resource that does not exist fails the run with the service's own error (AWS would
evaluate IAM first, on the ARN the request implies, and answer AccessDenied when the role may not act on it).
"""

from __future__ import annotations

from typing import Any


def resource_of(client: Any, service: str, operation: str, params: dict[str, Any]) -> tuple[str, dict[str, str]]:
    lookup = _LOOKUPS.get(service)
    if lookup is None:
        raise LookupError(f"the sandbox does not know which {service} resource {operation} acts on")
    return lookup(client, operation, params)


def _eks(client: Any, operation: str, params: dict[str, Any]) -> tuple[str, dict[str, str]]:
    if "nodegroupName" in params:
        found = client.describe_nodegroup(clusterName=params["clusterName"],
                                          nodegroupName=params["nodegroupName"])["nodegroup"]
        return found["nodegroupArn"], found.get("tags") or {}
    name = params.get("clusterName") or params.get("name")
    if name is None:
        raise LookupError(f"the sandbox does not know which eks resource {operation} acts on")
    cluster = client.describe_cluster(name=name)["cluster"]
    return cluster["arn"], cluster.get("tags") or {}


def _pcs(client: Any, operation: str, params: dict[str, Any]) -> tuple[str, dict[str, str]]:
    cluster = params.get("clusterIdentifier")
    if "computeNodeGroupIdentifier" in params:
        arn = client.get_compute_node_group(clusterIdentifier=cluster, computeNodeGroupIdentifier=params[
            "computeNodeGroupIdentifier"])["computeNodeGroup"]["arn"]
    elif "queueIdentifier" in params:
        arn = client.get_queue(clusterIdentifier=cluster, queueIdentifier=params["queueIdentifier"])["queue"]["arn"]
    elif cluster is not None:
        arn = client.get_cluster(clusterIdentifier=cluster)["cluster"]["arn"]
    else:
        raise LookupError(f"the sandbox does not know which pcs resource {operation} acts on")
    return arn, client.list_tags_for_resource(resourceArn=arn).get("tags") or {}


def _dynamodb(client: Any, operation: str, params: dict[str, Any]) -> tuple[str, dict[str, str]]:
    if "TableName" not in params:
        raise LookupError(f"the sandbox does not know which dynamodb resource {operation} acts on")
    arn = client.describe_table(TableName=params["TableName"])["Table"]["TableArn"]
    tags = client.list_tags_of_resource(ResourceArn=arn).get("Tags") or []
    return arn, {t["Key"]: t["Value"] for t in tags}


def _sns(client: Any, operation: str, params: dict[str, Any]) -> tuple[str, dict[str, str]]:
    arn = params.get("TopicArn")
    if arn is None:
        raise LookupError(f"the sandbox does not know which sns resource {operation} acts on")
    client.get_topic_attributes(TopicArn=arn)  # a topic that does not exist fails the run with SNS's NotFound
    tags = client.list_tags_for_resource(ResourceArn=arn).get("Tags") or []
    return arn, {t["Key"]: t["Value"] for t in tags}


_LOOKUPS = {"eks": _eks, "pcs": _pcs, "dynamodb": _dynamodb, "sns": _sns}
