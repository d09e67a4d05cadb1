"""ParallelCluster's real create/update/delete path against the sandbox.

pcluster.lib runs unpatched in this process (validation, S3 bucket setup, CDK synthesis, CloudFormation);
only its endpoint is the sandbox (AWS_ENDPOINT_URL + AWS_CA_BUNDLE). Needs Node.js for the CDK step.
"""

from __future__ import annotations

import shutil

import pytest
from fixtures.pcluster import default_subnet, minimal_config, reset_pcluster_clients, wait_for, with_counts

pytest.importorskip("pcluster.lib")
pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="ParallelCluster's CDK needs Node.js")

REGION = "us-east-1"


@pytest.fixture
def pc(sandbox_env):
    """pcluster.lib with fresh clients bound to the sandbox."""
    import pcluster.lib as pc

    reset_pcluster_clients()
    yield pc
    reset_pcluster_clients()


def _stack_status(pc, name):
    return pc.describe_cluster(cluster_name=name, region=REGION)["cloudFormationStackStatus"]


def _raises(pc_call, exception_name: str, **kwargs):
    with pytest.raises(Exception) as info:
        pc_call(**kwargs)
    assert type(info.value).__name__ == exception_name, getattr(info.value, "content", info.value)
    return info.value.content


def test_pcluster_dryrun_passes_every_validator(pc, sandbox):
    config = minimal_config(default_subnet(sandbox.client("ec2")))
    content = _raises(
        pc.create_cluster,
        "DryrunOperationException",
        cluster_name="pc-dryrun",
        cluster_configuration=config,
        region=REGION,
        dryrun=True,
    )
    assert content.message == "Request would have succeeded, but DryRun flag is set."
    # The validators ran (the config names no key pair, which ParallelCluster's KeyPairValidator warns about)
    # and none found an error.
    levels = {m.type: m.level for m in content.validation_messages or []}
    assert levels == {"KeyPairValidator": "WARNING"}, levels
    # ... and they ask the sandbox: a head-node subnet it does not hold is an error
    config["HeadNode"]["Networking"]["SubnetId"] = "subnet-0123456789abcdef0"
    content = _raises(pc.create_cluster, "CreateClusterBadRequestException", cluster_name="pc-dryrun",
                      cluster_configuration=config, region=REGION, dryrun=True)
    errors = [(m.type, m.message) for m in content.configuration_validation_errors if m.level == "ERROR"]
    assert errors == [("HeadNodeLaunchTemplateValidator", "Unable to validate configuration parameters for the "
                       "head node. The subnet ID 'subnet-0123456789abcdef0' does not exist")], errors


def test_pcluster_cluster_lifecycle(pc, sandbox):
    """How long the create takes, and ParallelCluster's CDK synthesis's share of it: bench/suite_timings.py
    (pcluster_create)."""
    ec2 = sandbox.client("ec2")
    name = "pc-life"
    config = minimal_config(default_subnet(ec2), MinCount=0, MaxCount=2)

    created = pc.create_cluster(cluster_name=name, cluster_configuration=config, region=REGION,
                                rollback_on_failure=False)
    assert created["cluster"]["clusterStatus"] == "CREATE_IN_PROGRESS"
    wait_for(lambda: _stack_status(pc, name), lambda s: s != "CREATE_IN_PROGRESS")

    described = pc.describe_cluster(cluster_name=name, region=REGION)
    assert described["cloudFormationStackStatus"] == "CREATE_COMPLETE", described.get("failures")
    assert described["clusterStatus"] == "CREATE_COMPLETE"
    assert described["computeFleetStatus"] == "RUNNING"
    assert described["headNode"]["state"] == "running"
    assert described["headNode"]["instanceType"] == "m7i.large"

    instances = pc.describe_cluster_instances(cluster_name=name, region=REGION)["instances"]
    assert [i["nodeType"] for i in instances] == ["HeadNode"]

    # Scale up: raising MaxCount is a live update.
    bigger = with_counts(config, min_count=0, max_count=4)
    content = _raises(
        pc.update_cluster,
        "DryrunOperationException",
        cluster_name=name,
        cluster_configuration=bigger,
        region=REGION,
        dryrun=True,
    )
    assert [(c.parameter, c.requested_value) for c in content.change_set] == [
        ("Scheduling.SlurmQueues[train].ComputeResources[c5l].MaxCount", "4")
    ]
    updated = pc.update_cluster(cluster_name=name, cluster_configuration=bigger, region=REGION)
    assert updated["cluster"]["clusterStatus"] == "UPDATE_IN_PROGRESS"
    assert wait_for(lambda: _stack_status(pc, name), lambda s: "PROGRESS" not in s) == "UPDATE_COMPLETE"

    # Scale down: shrinking MaxCount needs the compute fleet stopped first.
    smaller = with_counts(config, min_count=0, max_count=1)
    content = _raises(
        pc.update_cluster,
        "UpdateClusterBadRequestException",
        cluster_name=name,
        cluster_configuration=smaller,
        region=REGION,
    )
    assert any("stop" in (e.message or "").lower() for e in content.update_validation_errors or []), content
    stop = pc.update_compute_fleet(cluster_name=name, status="STOP_REQUESTED", region=REGION)
    assert stop["status"] == "STOP_REQUESTED"
    fleet = wait_for(
        lambda: pc.describe_compute_fleet(cluster_name=name, region=REGION)["status"],
        lambda s: s == "STOPPED",
        timeout=30,
    )
    assert fleet == "STOPPED"
    pc.update_cluster(cluster_name=name, cluster_configuration=smaller, region=REGION)
    assert wait_for(lambda: _stack_status(pc, name), lambda s: "PROGRESS" not in s) == "UPDATE_COMPLETE"
    pc.update_compute_fleet(cluster_name=name, status="START_REQUESTED", region=REGION)
    wait_for(
        lambda: pc.describe_compute_fleet(cluster_name=name, region=REGION)["status"],
        lambda s: s == "RUNNING",
        timeout=30,
    )

    events = pc.get_cluster_stack_events(cluster_name=name, region=REGION)["events"]
    statuses = [e["resourceStatus"] for e in events if e["logicalResourceId"] == name]
    assert "CREATE_COMPLETE" in statuses and "UPDATE_COMPLETE" in statuses

    deleted = pc.delete_cluster(cluster_name=name, region=REGION)
    assert deleted["cluster"]["clusterStatus"] == "DELETE_IN_PROGRESS"

    def gone():
        try:
            return _stack_status(pc, name)
        except Exception as err:  # pcluster raises NotFoundException once the stack is deleted
            return type(err).__name__

    assert wait_for(gone, lambda s: "PROGRESS" not in s) == "NotFoundException"
    cfn = sandbox.client("cloudformation")
    summaries = [s for s in cfn.list_stacks()["StackSummaries"] if s["StackName"].startswith(name)]
    assert summaries and {s["StackStatus"] for s in summaries} == {"DELETE_COMPLETE"}
    states = {
        i["State"]["Name"]
        for r in ec2.describe_instances(Filters=[{"Name": "tag:parallelcluster:cluster-name", "Values": [name]}])[
            "Reservations"
        ]
        for i in r["Instances"]
    }
    assert states == {"terminated"}
    assert not [
        n
        for n in ec2.describe_network_interfaces()["NetworkInterfaces"]
        if any(t["Key"] == "parallelcluster:cluster-name" and t["Value"] == name for t in n.get("TagSet", []))
    ]


# -- failed stacks ----------------------------------------------------------------------------------------
def _events(pc, name):
    return pc.get_cluster_stack_events(cluster_name=name, region=REGION)["events"]


def _delete_and_wait(pc, sandbox, name):
    deleted = pc.delete_cluster(cluster_name=name, region=REGION)
    assert deleted["cluster"]["clusterStatus"] == "DELETE_IN_PROGRESS"

    def gone():
        try:
            return _stack_status(pc, name)
        except Exception as err:  # pcluster raises NotFoundException once the stack is deleted
            return type(err).__name__

    assert wait_for(gone, lambda s: "PROGRESS" not in s, timeout=30) == "NotFoundException"
    ec2 = sandbox.client("ec2")
    live = [
        i["InstanceId"]
        for r in ec2.describe_instances(
            Filters=[
                {"Name": "tag:parallelcluster:cluster-name", "Values": [name]},
                {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
            ]
        )["Reservations"]
        for i in r["Instances"]
    ]
    assert live == []


@pytest.mark.parametrize("rollback", [False, True], ids=["no-rollback", "rollback"])
def test_pcluster_stack_fault_fails_head_node_bootstrap(pc, sandbox, rollback):
    name = f"pc-bootfail-{'rb' if rollback else 'keep'}"
    sandbox.faults({"fail_status": {f"pcluster_stack:{name}": "CREATE_FAILED"}})
    config = minimal_config(default_subnet(sandbox.client("ec2")))
    created = pc.create_cluster(
        cluster_name=name, cluster_configuration=config, region=REGION, rollback_on_failure=rollback
    )
    assert created["cluster"]["clusterStatus"] == "CREATE_IN_PROGRESS"  # CreateStack itself succeeds

    final = "ROLLBACK_COMPLETE" if rollback else "CREATE_FAILED"
    assert wait_for(lambda: _stack_status(pc, name), lambda s: s == final or "PROGRESS" not in s) == final
    described = pc.describe_cluster(cluster_name=name, region=REGION)
    assert described["clusterStatus"] == "CREATE_FAILED"
    assert described["failures"] == [
        {"failureCode": "HeadNodeBootstrapFailure", "failureReason": "Failed to bootstrap the head node."}
    ]

    events = _events(pc, name)
    [wait] = [e for e in events if e["resourceType"] == "AWS::CloudFormation::WaitCondition"]
    assert wait["resourceStatus"] == "CREATE_FAILED"
    assert wait["resourceStatusReason"].startswith("WaitCondition received failed message: 'Failed to bootstrap")
    assert wait["resourceStatusReason"].split("uniqueId: ")[1].startswith("i-")
    stack_statuses = [e["resourceStatus"] for e in events if e["logicalResourceId"] == name][::-1]
    if rollback:
        assert stack_statuses == ["CREATE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS", "ROLLBACK_COMPLETE"]
    else:
        assert stack_statuses == ["CREATE_IN_PROGRESS", "CREATE_FAILED"]
    failed = next(e for e in events if e["logicalResourceId"] == name and e["resourceStatus"] != "ROLLBACK_COMPLETE")
    assert f"failed to create: [{wait['logicalResourceId']}]" in failed["resourceStatusReason"]

    stack = sandbox.client("cloudformation").describe_stacks(StackName=name)["Stacks"][0]
    assert stack["DisableRollback"] is (not rollback)
    head = pc.describe_cluster_instances(cluster_name=name, region=REGION)["instances"]
    # a kept stack keeps its head node for debugging; a rollback removes it
    assert [i["nodeType"] for i in head] == ([] if rollback else ["HeadNode"])

    _delete_and_wait(pc, sandbox, name)


def test_resource_error_fails_the_stack_instead_of_http_500(pc, sandbox):
    # A resource the template names already exists (ParallelCluster's fleet-status table): on AWS the stack
    # fails with that resource's CREATE_FAILED event; describe_cluster reports the general failure code.
    name = "pc-tablefail"
    ddb = sandbox.client("dynamodb")
    table = f"parallelcluster-{name}"
    ddb.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "Id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "Id", "KeyType": "HASH"}],
    )
    try:
        config = minimal_config(default_subnet(sandbox.client("ec2")))
        pc.create_cluster(cluster_name=name, cluster_configuration=config, region=REGION, rollback_on_failure=False)
        assert wait_for(lambda: _stack_status(pc, name), lambda s: "PROGRESS" not in s) == "CREATE_FAILED"
        described = pc.describe_cluster(cluster_name=name, region=REGION)  # again: no lazy re-creation
        assert described["failures"] == [
            {"failureCode": "ClusterCreationFailure", "failureReason": "Failed to create the cluster."}
        ]
        failed = [e for e in _events(pc, name) if e["resourceStatus"] == "CREATE_FAILED"]
        assert [(e["resourceType"], e["logicalResourceId"] == name) for e in failed] == [
            ("AWS::CloudFormation::Stack", True),
            ("AWS::DynamoDB::Table", False),
        ]
        assert f"Table already exists: {table}" in failed[1]["resourceStatusReason"]
        _delete_and_wait(pc, sandbox, name)
        assert ddb.describe_table(TableName=table)["Table"]["TableStatus"] == "ACTIVE"  # not the stack's
    finally:
        ddb.delete_table(TableName=table)


@pytest.mark.parametrize("disable_rollback", [True, False])
def test_resource_error_while_moto_builds_the_stack(sandbox, disable_rollback):
    # moto creates the resources an exported output references before create_resources (export checks);
    # an error there must fail the stack too, not answer CreateStack with HTTP 500.
    import json

    name = f"cfn-exportfail-{int(disable_rollback)}"
    ddb = sandbox.client("dynamodb")
    table = f"{name}-table"
    ddb.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "Id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "Id", "KeyType": "HASH"}],
    )
    template = {
        "Resources": {
            "Table": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    "TableName": table,
                    "BillingMode": "PAY_PER_REQUEST",
                    "AttributeDefinitions": [{"AttributeName": "Id", "AttributeType": "S"}],
                    "KeySchema": [{"AttributeName": "Id", "KeyType": "HASH"}],
                },
            }
        },
        "Outputs": {"TableArn": {"Value": {"Fn::GetAtt": ["Table", "Arn"]}, "Export": {"Name": f"{name}-arn"}}},
    }
    cfn = sandbox.client("cloudformation")
    try:
        cfn.create_stack(StackName=name, TemplateBody=json.dumps(template), DisableRollback=disable_rollback)
        final = "CREATE_FAILED" if disable_rollback else "ROLLBACK_COMPLETE"
        status = wait_for(
            lambda: cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"],
            lambda s: "PROGRESS" not in s,
            timeout=20,
            every=0.2,
        )
        assert status == final
        events = cfn.describe_stack_events(StackName=name)["StackEvents"]
        [table_event] = [e for e in events if e["LogicalResourceId"] == "Table"]
        assert table_event["ResourceStatus"] == "CREATE_FAILED"
        assert "Table already exists" in table_event["ResourceStatusReason"]
        assert "Outputs" not in cfn.describe_stacks(StackName=name)["Stacks"][0]
        cfn.delete_stack(StackName=name)
        wait_for(
            lambda: [s["StackStatus"] for s in cfn.list_stacks()["StackSummaries"] if s["StackName"] == name],
            lambda s: s == ["DELETE_COMPLETE"],
            timeout=20,
            every=0.2,
        )
    finally:
        ddb.delete_table(TableName=table)
