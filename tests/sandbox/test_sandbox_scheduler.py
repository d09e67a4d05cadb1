"""EventBridge Scheduler in the sandbox, driven with plain boto3: schedules that come due on the sandbox clock call
their universal target as their execution role, and what AWS refuses is refused.

Sources: EventBridge Scheduler API Reference (CreateSchedule, DeleteScheduleGroup); EventBridge Scheduler User Guide
("Schedule types in EventBridge Scheduler", "Using universal targets", "Set up the execution role"); Service
Authorization Reference (Amazon EKS, AWS PCS, Amazon DynamoDB: actions and resource types).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import time
import urllib.error
import uuid

import pytest
from botocore.exceptions import ClientError
from fixtures.pcs_world import Pcs
from fixtures.sandbox_eks import REGION, trust

# "Set up the execution role" (user guide): the role trusts scheduler.amazonaws.com.
ASSUME_SCHEDULER = trust("scheduler.amazonaws.com")


def _allow(action: str, resource: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": action, "Resource": resource}]})


def _role(sandbox, policy: str, trust_policy: str = ASSUME_SCHEDULER) -> str:
    iam = sandbox.client("iam")
    name = f"guard-{uuid.uuid4().hex[:8]}"
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust_policy)["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="guard", PolicyDocument=policy)
    return arn


def _at(sandbox, seconds_ahead: int) -> tuple[str, float]:
    """An at() expression (UTC) ``seconds_ahead`` of sandbox time, whole seconds, and its epoch time."""
    now = dt.datetime.fromisoformat(sandbox.clock()["now"].replace("Z", "+00:00"))
    due = now.replace(microsecond=0) + dt.timedelta(seconds=seconds_ahead)
    return f"at({due.strftime('%Y-%m-%dT%H:%M:%S')})", due.timestamp()


def _move_to(sandbox, epoch: float) -> dict:
    """Advance sandbox time to ``epoch`` (sandbox time = real time + offset)."""
    state = sandbox.clock()
    return sandbox.clock({"advance_seconds": max(0.0, epoch - (time.time() + state["offset_seconds"]))})


def _schedule(scheduler, name: str, expression: str, target_arn: str, role: str, params: dict,
              **extra) -> None:
    scheduler.create_schedule(Name=name, ScheduleExpression=expression, ScheduleExpressionTimezone="UTC",
                              FlexibleTimeWindow={"Mode": "OFF"}, ActionAfterCompletion="NONE",
                              Target={"Arn": target_arn, "RoleArn": role, "Input": json.dumps(params)}, **extra)


def _runs(sandbox, name: str) -> list[dict]:
    return [run for run in sandbox.schedule_runs() if run["schedule"] == name]


def _ran(answer: dict, name: str) -> list[dict]:
    """The runs of schedule ``name`` a clock move made (other tests' schedules may come due in the same move)."""
    return [run for run in answer["ran"] if run["schedule"] == name]


# -- the clock ----------------------------------------------------------------------------------------------


def test_date_header_follows_the_sandbox_clock(sandbox):
    """AWS sends its time in every response's Date header (RFC 7231 section 7.1.1.2, IMF-fixdate); the sandbox's
    is real time plus the offset the tests move; a move backwards is refused."""
    sts = sandbox.client("sts")
    before = email.utils.parsedate_to_datetime(
        sts.get_caller_identity()["ResponseMetadata"]["HTTPHeaders"]["date"]).timestamp()
    assert abs(before - time.time()) < 5
    sandbox.clock({"advance_seconds": 3 * 24 * 3600})  # three days, hand-typed: 259200 s
    after = email.utils.parsedate_to_datetime(
        sts.get_caller_identity()["ResponseMetadata"]["HTTPHeaders"]["date"]).timestamp()
    assert abs(after - (time.time() + 259200)) < 5
    assert sandbox.clock()["offset_seconds"] == 259200
    with pytest.raises(urllib.error.HTTPError) as refused:
        sandbox.clock({"advance_seconds": -1})
    assert refused.value.code == 400


# -- what CreateSchedule refuses ---------------------------------------------------------------------------


def test_read_only_universal_targets_and_bad_requests_are_refused(sandbox):
    """"EventBridge Scheduler does not support read-only API actions ... that begin with the following list of
    prefixes: get describe list ..." (user guide, "Using universal targets"); FlexibleTimeWindow is required and
    ActionAfterCompletion is NONE | DELETE (API reference, CreateSchedule); at(yyyy-mm-ddThh:mm:ss) ("Schedule
    types"). The client's own validation is off, so the sandbox is what refuses."""
    scheduler = sandbox.client("scheduler", REGION, parameter_validation=False)
    role = _role(sandbox, _allow("eks:*", "*"))
    expression, _ = _at(sandbox, 3600)

    def code(**request) -> str:
        base = {"Name": f"s-{uuid.uuid4().hex[:8]}", "ScheduleExpression": expression,
                "FlexibleTimeWindow": {"Mode": "OFF"},
                "Target": {"Arn": "arn:aws:scheduler:::aws-sdk:eks:updateNodegroupConfig", "RoleArn": role,
                           "Input": "{}"}}
        with pytest.raises(ClientError) as refused:
            scheduler.create_schedule(**{**base, **request})
        return refused.value.response["Error"]["Code"]

    for action in ("describeNodegroup", "listNodegroups", "getItem", "batchGetItem"):
        assert code(Target={"Arn": f"arn:aws:scheduler:::aws-sdk:eks:{action}", "RoleArn": role}) == \
            "ValidationException", action
    assert code(FlexibleTimeWindow=None) == "ValidationException"
    assert code(ActionAfterCompletion="STOP") == "ValidationException"
    assert code(ScheduleExpression="at(2026-12-07 01:00:00)") == "ValidationException"
    assert code(ScheduleExpression="at(2026-13-07T01:00:00)") == "ValidationException"
    assert code(GroupName="no-such-group") == "ResourceNotFoundException"
    # an action that writes is a valid target (updateNodegroupConfig, above, is refused only for the broken field)
    accepted = f"s-{uuid.uuid4().hex[:8]}"
    scheduler.create_schedule(Name=accepted, ScheduleExpression=expression, FlexibleTimeWindow={"Mode": "OFF"},
                              Target={"Arn": "arn:aws:scheduler:::aws-sdk:eks:updateNodegroupConfig",
                                      "RoleArn": role, "Input": "{}"})
    scheduler.delete_schedule(Name=accepted)


def test_deleting_a_group_deletes_its_schedules(sandbox):
    """DeleteScheduleGroup (API reference): "Deleting a schedule group results in EventBridge Scheduler deleting
    all schedules associated with the group"; a group name is taken once (CreateScheduleGroup: ConflictException)."""
    scheduler = sandbox.client("scheduler", REGION)
    group = f"g-{uuid.uuid4().hex[:8]}"
    scheduler.create_schedule_group(Name=group, Tags=[{"Key": "fmcluster:cluster", "Value": "demo"}])
    with pytest.raises(ClientError) as conflict:
        scheduler.create_schedule_group(Name=group)
    assert conflict.value.response["Error"]["Code"] == "ConflictException"
    role = _role(sandbox, _allow("eks:*", "*"))
    expression, _ = _at(sandbox, 3600)
    _schedule(scheduler, "guard", expression, "arn:aws:scheduler:::aws-sdk:eks:deleteNodegroup", role,
              {"clusterName": "c", "nodegroupName": "n"}, GroupName=group)
    assert [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]] == ["guard"]
    scheduler.delete_schedule_group(Name=group)
    with pytest.raises(ClientError) as gone:
        scheduler.get_schedule(Name="guard", GroupName=group)
    assert gone.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert scheduler.list_schedules(GroupName=group)["Schedules"] == []


# -- schedules that come due --------------------------------------------------------------------------------


def test_eks_node_group_scaled_to_zero_when_due_and_not_before(sandbox, world):
    """A one-time schedule runs once at its at() time (user guide, "Schedule types"), calling
    eks:UpdateNodegroupConfig as its role; the action's resource is the node group's ARN (Service Authorization
    Reference, Amazon EKS). One minute before, nothing happens."""
    cluster = world.cluster()
    ng = world.nodegroup(cluster, world.template(InstanceType="m5.large"), size=2)
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng["nodegroupName"])
    role = _role(sandbox, _allow("eks:UpdateNodegroupConfig", ng["nodegroupArn"]))
    scheduler = sandbox.client("scheduler", REGION)
    expression, due = _at(sandbox, 3600)
    name = f"stop-{uuid.uuid4().hex[:8]}"
    _schedule(scheduler, name, expression, "arn:aws:scheduler:::aws-sdk:eks:updateNodegroupConfig", role,
              {"clusterName": cluster, "nodegroupName": ng["nodegroupName"],
               "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 0}})

    _move_to(sandbox, due - 60)
    assert _runs(sandbox, name) == []
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng["nodegroupName"])["nodegroup"][
        "scalingConfig"]["desiredSize"] == 2
    assert len(world.instances(cluster, ng["nodegroupName"])) == 2

    ran = _ran(_move_to(sandbox, due + 1), name)
    assert [r["outcome"] for r in ran] == ["succeeded"], ran
    described = world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng["nodegroupName"])["nodegroup"]
    assert described["scalingConfig"]["desiredSize"] == 0
    assert world.instances(cluster, ng["nodegroupName"]) == []
    sandbox.clock({"advance_seconds": 3600})  # once: a one-time schedule does not run again
    assert len(_runs(sandbox, name)) == 1
    assert scheduler.get_schedule(Name=name)["Name"] == name  # ActionAfterCompletion NONE keeps it


def test_a_role_allowed_another_node_group_is_denied_and_nothing_changes(sandbox, world):
    """The execution role "must have the permissions to call the API operation" ("Using universal targets"); a
    policy naming another node group's ARN does not allow eks:UpdateNodegroupConfig on this one (IAM policy
    evaluation: no Allow, implicit deny). ActionAfterCompletion DELETE deletes the schedule after it ran."""
    cluster = world.cluster()
    template = world.template(InstanceType="m5.large")
    mine, other = world.nodegroup(cluster, template, size=1), world.nodegroup(cluster, template, size=1)
    world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=mine["nodegroupName"])
    role = _role(sandbox, _allow("eks:UpdateNodegroupConfig", other["nodegroupArn"]))
    scheduler = sandbox.client("scheduler", REGION)
    expression, due = _at(sandbox, 600)
    name = f"stop-{uuid.uuid4().hex[:8]}"
    _schedule(scheduler, name, expression, "arn:aws:scheduler:::aws-sdk:eks:updateNodegroupConfig", role,
              {"clusterName": cluster, "nodegroupName": mine["nodegroupName"],
               "scalingConfig": {"minSize": 0, "maxSize": 1, "desiredSize": 0}}, )
    scheduler.update_schedule(Name=name, ScheduleExpression=expression, FlexibleTimeWindow={"Mode": "OFF"},
                              ActionAfterCompletion="DELETE",
                              Target=scheduler.get_schedule(Name=name)["Target"])
    (run,) = _ran(_move_to(sandbox, due + 1), name)
    assert run["outcome"] == "denied", run
    assert mine["nodegroupArn"] in run["message"]
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=mine["nodegroupName"])["nodegroup"][
        "scalingConfig"]["desiredSize"] == 1
    with pytest.raises(ClientError) as gone:
        scheduler.get_schedule(Name=name)
    assert gone.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_a_role_scheduler_may_not_assume_fails_the_run(sandbox, world):
    """"Set up the execution role": the role's trust policy must let scheduler.amazonaws.com assume it."""
    cluster = world.cluster()
    ng = world.nodegroup(cluster, world.template(InstanceType="m5.large"), size=1)
    role = _role(sandbox, _allow("eks:*", "*"), trust_policy=trust("ec2.amazonaws.com"))
    scheduler = sandbox.client("scheduler", REGION)
    expression, due = _at(sandbox, 600)
    name = f"stop-{uuid.uuid4().hex[:8]}"
    _schedule(scheduler, name, expression, "arn:aws:scheduler:::aws-sdk:eks:updateNodegroupConfig", role,
              {"clusterName": cluster, "nodegroupName": ng["nodegroupName"],
               "scalingConfig": {"minSize": 0, "maxSize": 1, "desiredSize": 0}})
    (run,) = _ran(_move_to(sandbox, due + 1), name)
    assert run["outcome"] == "failed" and "scheduler.amazonaws.com" in run["message"], run
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=ng["nodegroupName"])["nodegroup"][
        "scalingConfig"]["desiredSize"] == 1


def test_pcs_compute_node_group_scaled_to_zero_when_due(sandbox):
    """pcs:UpdateComputeNodeGroup acts on the compute node group's ARN (Service Authorization Reference, AWS PCS);
    the role is limited by a tag condition (aws:ResourceTag, IAM User Guide "Controlling access to AWS resources
    using tags"): the same call on a group tagged for another cluster is denied and leaves it as it was."""
    pcs = Pcs(sandbox)
    cluster = pcs.cluster()
    template = pcs.launch_template()
    group = pcs.wait_group(pcs.node_group(cluster, template, low=2, high=2, tags={"fmcluster:cluster": "demo"}))
    foreign = pcs.wait_group(pcs.node_group(cluster, template, low=1, high=1, tags={"fmcluster:cluster": "other"}))
    assert group["scalingConfiguration"]["minInstanceCount"] == 2
    role = _role(sandbox, json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Action": "pcs:UpdateComputeNodeGroup", "Resource": "*",
        "Condition": {"StringEquals": {"aws:ResourceTag/fmcluster:cluster": "demo"}}}]}))
    scheduler = sandbox.client("scheduler", pcs.region)
    expression, due = _at(sandbox, 7200)
    name = f"stop-{uuid.uuid4().hex[:8]}"
    _schedule(scheduler, name, expression, "arn:aws:scheduler:::aws-sdk:pcs:updateComputeNodeGroup", role,
              {"clusterIdentifier": cluster["id"], "computeNodeGroupIdentifier": group["id"],
               "scalingConfiguration": {"minInstanceCount": 0, "maxInstanceCount": 2}})
    _schedule(scheduler, f"{name}-foreign", expression, "arn:aws:scheduler:::aws-sdk:pcs:updateComputeNodeGroup", role,
              {"clusterIdentifier": cluster["id"], "computeNodeGroupIdentifier": foreign["id"],
               "scalingConfiguration": {"minInstanceCount": 0, "maxInstanceCount": 1}})
    _move_to(sandbox, due - 60)
    assert _runs(sandbox, name) == []
    assert pcs.wait_group(group)["scalingConfiguration"]["minInstanceCount"] == 2
    answer = _move_to(sandbox, due + 1)
    (run,) = _ran(answer, name)
    assert run["outcome"] == "succeeded", run
    assert group["arn"] in run["message"]
    assert pcs.wait_group(group)["scalingConfiguration"]["minInstanceCount"] == 0
    (denied,) = _ran(answer, f"{name}-foreign")
    assert denied["outcome"] == "denied", denied
    assert pcs.wait_group(foreign)["scalingConfiguration"]["minInstanceCount"] == 1


def test_dynamodb_update_item_target(sandbox):
    """dynamodb:UpdateItem acts on the table's ARN (Service Authorization Reference, Amazon DynamoDB); Input is the
    UpdateItem request as the DynamoDB API reference writes it."""
    dynamodb = sandbox.client("dynamodb", REGION)
    table = f"t-{uuid.uuid4().hex[:8]}"
    arn = dynamodb.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                                KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                                BillingMode="PAY_PER_REQUEST")["TableDescription"]["TableArn"]
    dynamodb.put_item(TableName=table, Item={"id": {"S": "guard"}, "state": {"S": "armed"}})
    role = _role(sandbox, _allow("dynamodb:UpdateItem", arn))
    scheduler = sandbox.client("scheduler", REGION)
    expression, due = _at(sandbox, 600)
    name = f"mark-{uuid.uuid4().hex[:8]}"
    _schedule(scheduler, name, expression, "arn:aws:scheduler:::aws-sdk:dynamodb:updateItem", role,
              {"TableName": table, "Key": {"id": {"S": "guard"}}, "UpdateExpression": "SET #s = :v",
               "ExpressionAttributeNames": {"#s": "state"}, "ExpressionAttributeValues": {":v": {"S": "fired"}}})
    (run,) = _ran(_move_to(sandbox, due + 1), name)
    assert run["outcome"] == "succeeded", run
    assert dynamodb.get_item(TableName=table, Key={"id": {"S": "guard"}})["Item"]["state"] == {"S": "fired"}


def test_input_that_does_not_match_the_operation_fails_the_run(sandbox):
    """Input "is determined by the service API your schedule invokes" ("Using universal targets"): a member
    UpdateItem does not have fails the run (botocore's UpdateItem input shape)."""
    role = _role(sandbox, _allow("dynamodb:*", "*"))
    scheduler = sandbox.client("scheduler", REGION, retries={"mode": "standard", "max_attempts": 1})
    expression, due = _at(sandbox, 600)
    name = f"bad-{uuid.uuid4().hex[:8]}"
    _schedule(scheduler, name, expression, "arn:aws:scheduler:::aws-sdk:dynamodb:updateItem", role,
              {"TableName": "t", "Key": {"id": {"S": "x"}}, "NoSuchMember": 1})
    (run,) = _ran(_move_to(sandbox, due + 1), name)
    assert run["outcome"] == "failed" and "NoSuchMember" in run["message"], run




def test_at_expressions_are_read_in_their_time_zone():
    """"at(yyyy-mm-ddThh:mm:ss)" "at the time and in the time zone that you specify" (API reference, CreateSchedule
    ScheduleExpression, ScheduleExpressionTimezone); America/New_York is UTC-5 in December and UTC-4 in July (IANA
    time zone database, EST/EDT)."""
    from fmcluster_sandbox.scheduler_api import at_time

    utc = dt.timezone.utc
    assert at_time("at(2026-12-07T20:00:00)", "America/New_York") == dt.datetime(2026, 12, 8, 1, 0, tzinfo=utc)
    assert at_time("at(2026-07-01T12:00:00)", "America/New_York") == dt.datetime(2026, 7, 1, 16, 0, tzinfo=utc)
    assert at_time("at(2026-12-07T20:00:00)", None) == dt.datetime(2026, 12, 7, 20, 0, tzinfo=utc)
    assert at_time("rate(5 minutes)", "UTC") is None
    with pytest.raises(ValueError):
        at_time("at(2026-12-07T20:00:00)", "Mars/Olympus_Mons")


def test_a_schedule_runs_as_real_time_passes(sandbox):
    """Without a clock move, the sandbox's background tick runs a schedule once real time reaches it (as AWS runs it
    within that minute: "Schedule types", 60-second precision)."""
    dynamodb = sandbox.client("dynamodb", REGION)
    table = f"t-{uuid.uuid4().hex[:8]}"
    arn = dynamodb.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                                KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                                BillingMode="PAY_PER_REQUEST")["TableDescription"]["TableArn"]
    role = _role(sandbox, _allow("dynamodb:UpdateItem", arn))
    expression, due = _at(sandbox, 2)
    name = f"tick-{uuid.uuid4().hex[:8]}"
    _schedule(sandbox.client("scheduler", REGION), name, expression, "arn:aws:scheduler:::aws-sdk:dynamodb:updateItem",
              role, {"TableName": table, "Key": {"id": {"S": "guard"}}, "UpdateExpression": "SET fired = :t",
                     "ExpressionAttributeValues": {":t": {"BOOL": True}}})
    deadline = time.monotonic() + 30
    while not _runs(sandbox, name) and time.monotonic() < deadline:
        time.sleep(0.2)  # poll interval of the signal, not a guess at the tick's
    (run,) = _runs(sandbox, name)
    assert run["outcome"] == "succeeded", run
    assert dynamodb.get_item(TableName=table, Key={"id": {"S": "guard"}})["Item"]["fired"] == {"BOOL": True}


def test_a_parallelcluster_fleet_stopped_by_a_scheduled_update_item(sandbox):
    """ParallelCluster keeps its compute fleet's status in the DynamoDB table ``parallelcluster-<cluster>`` (item
    ``COMPUTE_FLEET``, ``Data.status``); ``pcluster update-compute-fleet --status STOP_REQUESTED`` writes it and
    clustermgtd moves it through STOPPING to STOPPED (ParallelCluster user guide, "pcluster update-compute-fleet";
    the sandbox's stand-in, fmcluster_sandbox.pcluster_fleet). A schedule's dynamodb:updateItem target does the
    same write as its role."""
    pytest.importorskip("pcluster")
    dynamodb = sandbox.client("dynamodb", REGION)
    table = f"parallelcluster-c{uuid.uuid4().hex[:8]}"
    arn = dynamodb.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "Id", "AttributeType": "S"}],
                                KeySchema=[{"AttributeName": "Id", "KeyType": "HASH"}],
                                BillingMode="PAY_PER_REQUEST")["TableDescription"]["TableArn"]
    dynamodb.put_item(TableName=table, Item={"Id": {"S": "COMPUTE_FLEET"},
                                             "Data": {"M": {"status": {"S": "RUNNING"}}}})
    role = _role(sandbox, _allow("dynamodb:UpdateItem", arn))
    expression, due = _at(sandbox, 900)
    name = f"fleet-{uuid.uuid4().hex[:8]}"
    _schedule(sandbox.client("scheduler", REGION), name, expression, "arn:aws:scheduler:::aws-sdk:dynamodb:updateItem",
              role, {"TableName": table, "Key": {"Id": {"S": "COMPUTE_FLEET"}}, "UpdateExpression": "SET #d.#s = :s",
                     "ExpressionAttributeNames": {"#d": "Data", "#s": "status"},
                     "ExpressionAttributeValues": {":s": {"S": "STOP_REQUESTED"}}})
    (run,) = _ran(_move_to(sandbox, due + 1), name)
    assert run["outcome"] == "succeeded", run

    def status() -> str:
        item = dynamodb.get_item(TableName=table, Key={"Id": {"S": "COMPUTE_FLEET"}})["Item"]
        return item["Data"]["M"]["status"]["S"]

    deadline = time.monotonic() + 30
    while status() != "STOPPED" and time.monotonic() < deadline:
        time.sleep(0.2)  # poll interval of the signal: the stand-in moves a step a second
    assert status() == "STOPPED"
