"""Each backend's budget-guard calls (``Backend.guard_calls``): the request each one sends, typed by hand from the
AWS API references, checked against botocore's model for that operation, never a read-only action (EventBridge
Scheduler's universal targets refuse get/describe/list), and the one IAM action it needs; ParallelCluster's fleet
stop applied to a table in the sandbox as pcluster.lib's own write would be."""

from __future__ import annotations

import datetime as dt

import botocore.session
import pytest
from botocore.validate import ParamValidator

from fmcluster.backends import registry
from fmcluster.spec.loader import load_spec_data

FIRES = "2026-12-07T09:05:03Z"


def spec(backend: str, **extra: object):
    data = {"name": "guard-calls", "region": "us-east-1", "backend": backend,
            "network": {"subnet_id": "subnet-0123456789abcdef0"},
            "queues": [{"name": "train", "instance_type": "p5.48xlarge", "nodes": {"min": 0, "max": 4}},
                       {"name": "debug", "instance_type": "p5.48xlarge", "nodes": 1}],
            "budget": {"max_usd": 1000}, **extra}
    return load_spec_data(data, "test").spec


def _botocore_valid(service: str, action: str, params: dict) -> None:
    model = botocore.session.get_session().get_service_model(service)
    operation = model.operation_model(action[0].upper() + action[1:])
    report = ParamValidator().validate(params, operation.input_shape)
    assert not report.has_errors(), report.generate_report()


@pytest.mark.parametrize("backend", ["eks", "pcs", "parallelcluster"])
@pytest.mark.parametrize("on_limit", ["stop", "destroy-compute"])
def test_every_call_is_a_valid_write_request(backend: str, on_limit: str) -> None:
    if backend == "parallelcluster" and on_limit == "destroy-compute":
        pytest.skip("refused at load time on parallelcluster")
    calls = registry.get(backend).guard_calls(spec(backend), on_limit, FIRES)
    assert calls
    for call in calls:
        _botocore_valid(call.service, call.action, call.input)
        assert not call.action.startswith(("get", "describe", "list")), call.action
        assert call.target_arn == f"arn:aws:scheduler:::aws-sdk:{call.service}:{call.action}"
        assert call.iam_action == f"{call.service}:{call.action[0].upper()}{call.action[1:]}"


def test_eks_stop_keeps_max_size_and_zeroes_min_and_desired() -> None:
    calls = registry.get("eks").guard_calls(spec("eks"), "stop", FIRES)
    # EKS API reference, UpdateNodegroupConfig: scalingConfig {minSize, maxSize (at least 1), desiredSize}
    assert [(c.name, c.input, c.resource_arns) for c in calls] == [
        ("stop-train", {"clusterName": "guard-calls", "nodegroupName": "train",
                        "scalingConfig": {"minSize": 0, "maxSize": 4, "desiredSize": 0}},
         ("${eks_nodegroup.train.arn}",)),
        ("stop-debug", {"clusterName": "guard-calls", "nodegroupName": "debug",
                        "scalingConfig": {"minSize": 0, "maxSize": 1, "desiredSize": 0}},
         ("${eks_nodegroup.debug.arn}",))]
    assert {c.iam_action for c in calls} == {"eks:UpdateNodegroupConfig"}
    deleted = registry.get("eks").guard_calls(spec("eks"), "destroy-compute", FIRES)
    assert [(c.action, c.input, c.iam_action) for c in deleted][0] == (
        "deleteNodegroup", {"clusterName": "guard-calls", "nodegroupName": "train"}, "eks:DeleteNodegroup")


def test_pcs_stop_sets_both_counts_to_zero_on_each_queue_group_only() -> None:
    calls = registry.get("pcs").guard_calls(spec("pcs"), "stop", FIRES)
    # AWS PCS API reference, UpdateComputeNodeGroup: scalingConfiguration {minInstanceCount, maxInstanceCount}
    assert [c.input for c in calls] == [
        {"clusterIdentifier": "guard-calls", "computeNodeGroupIdentifier": "train",
         "scalingConfiguration": {"minInstanceCount": 0, "maxInstanceCount": 0}},
        {"clusterIdentifier": "guard-calls", "computeNodeGroupIdentifier": "debug",
         "scalingConfiguration": {"minInstanceCount": 0, "maxInstanceCount": 0}}]
    assert all("login" not in c.name for c in calls)  # the login node group stays
    assert [c.resource_arns for c in calls] == [("${compute_node_group.train.arn}",),
                                                ("${compute_node_group.debug.arn}",)]


def test_parallelcluster_stop_is_pclusters_own_fleet_write() -> None:
    [call] = registry.get("parallelcluster").guard_calls(spec("parallelcluster"), "stop", FIRES)
    # pcluster/models/compute_fleet_status_manager.py (3.16) JsonComputeFleetStatusManager._put_status
    assert call.input == {
        "TableName": "parallelcluster-guard-calls", "Key": {"Id": {"S": "COMPUTE_FLEET"}},
        "UpdateExpression": "set #dt.#st=:s, #dt.#lut=:t",
        "ExpressionAttributeNames": {"#dt": "Data", "#st": "status", "#lut": "lastStatusUpdatedTime"},
        "ExpressionAttributeValues": {":s": {"S": "STOP_REQUESTED"}, ":t": {"S": "2026-12-07 09:05:03+00:00"}}}
    assert call.iam_action == "dynamodb:UpdateItem"
    assert call.resource_arns == ("arn:aws:dynamodb:us-east-1:{account}:table/parallelcluster-guard-calls",)


def test_the_fleet_stop_lands_where_pcluster_reads_it(sandbox) -> None:
    """The table as ParallelCluster's head node leaves it (Data.status RUNNING), then the guard's request as
    EventBridge Scheduler would send it: pcluster.lib reads Data.status."""
    [call] = registry.get("parallelcluster").guard_calls(spec("parallelcluster"), "stop", FIRES)
    ddb = sandbox.client("dynamodb")
    table = call.input["TableName"]
    ddb.create_table(TableName=table, KeySchema=[{"AttributeName": "Id", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "Id", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    try:
        ddb.put_item(TableName=table, Item={"Id": {"S": "COMPUTE_FLEET"}, "Data": {"M": {
            "status": {"S": "RUNNING"}, "lastStatusUpdatedTime": {"S": "2026-12-07 00:00:00+00:00"}}}})
        ddb.update_item(**call.input)
        data = ddb.get_item(TableName=table, Key={"Id": {"S": "COMPUTE_FLEET"}})["Item"]["Data"]["M"]
        assert data["status"] == {"S": "STOP_REQUESTED"}
        assert data["lastStatusUpdatedTime"] == {"S": "2026-12-07 09:05:03+00:00"}
    finally:
        ddb.delete_table(TableName=table)


def test_two_clusters_guard_roles_name_only_their_own_resources() -> None:
    """The role's policy is built from the cluster's own calls: a second cluster's names nothing of the first's."""
    import json

    from fmcluster.aws.guard import guard_documents

    def policy(backend: str, name: str) -> set[str]:
        data = spec(backend).model_copy(update={"name": name})
        calls = registry.get(backend).guard_calls(data, "stop", FIRES)
        documents = guard_documents(name, "us-east-1", "123456789012", {}, calls,
                                    dt.datetime(2026, 12, 7, 9, 5, 3, tzinfo=dt.timezone.utc), None, [])
        role = next(d for d in documents if d.kind == "iam_role")
        statements = json.loads(role.body["inline_policy"]["PolicyDocument"])["Statement"]
        return {arn for statement in statements for arn in statement["Resource"]}

    assert policy("parallelcluster", "one") == {"arn:aws:dynamodb:us-east-1:123456789012:table/parallelcluster-one"}
    assert policy("parallelcluster", "two") == {"arn:aws:dynamodb:us-east-1:123456789012:table/parallelcluster-two"}
    # EKS and PCS name their node groups by the ARN AWS issues each (the engine fills it in from that group)
    assert policy("eks", "one") == {"${eks_nodegroup.train.arn}", "${eks_nodegroup.debug.arn}"}
