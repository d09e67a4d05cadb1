"""The budget guard firing in AWS on each backend, in this process against the sandbox (issue 38, "Done when"): when
the sandbox's clock passes the moment, the schedules stop every queue within a minute of sandbox time and not before;
the spec's shared file system is still there (FSx DescribeFileSystems, plain boto3); ``create`` with a later lease
brings the nodes back; a cap alone (``max_usd``) fires at the moment ``plan`` printed, give or take a minute. With
``notify``, the guard's warning is published to the cluster's SNS topic at its time, not a minute before, nodes
untouched; ``destroy`` leaves no topic. ParallelCluster's ``status`` says the guard fired only once the fleet is
STOPPED.

Each cluster here is created once and carries every check it can (a create costs 20-35 s of CI)."""

from __future__ import annotations

import datetime as dt
import io
import json
import time
import urllib.parse
import uuid

from fixtures.guard_specs import pcs_spec
from fixtures.lifecycle import REPO_ROOT

# FSx for Lustre's smallest file system is 1,200 GiB (FSx for Lustre user guide, "Storage capacity").
LUSTRE = "storage: {lustre: {capacity_gib: 1200}}\n"


def _scaling(pcs, cluster: str, group: str) -> dict:
    return pcs.get_compute_node_group(clusterIdentifier=cluster, computeNodeGroupIdentifier=group)[
        "computeNodeGroup"]["scalingConfiguration"]


def _advance(sandbox, seconds: float) -> None:
    sandbox.clock({"advance_seconds": seconds})


def _settled(read, queue: str, seconds: float = 30.0) -> dict:
    """``read()`` once ``queue`` runs no node (the backend ends its instances a moment after the stop)."""
    ends = time.monotonic() + seconds
    while True:
        report = read()
        running = [q.get("running_instances") for q in report["queues"] if q["name"] == queue]
        if running == [0] or time.monotonic() > ends:
            return report
        time.sleep(1)


def _file_systems(sandbox, name: str) -> list[str]:
    """The cluster's FSx file systems still AVAILABLE, found by the cluster's name in their tags (plain boto3)."""
    found = sandbox.client("fsx").describe_file_systems()["FileSystems"]
    return [f["FileSystemId"] for f in found if f.get("Lifecycle") == "AVAILABLE"
            and any(t["Value"] == name for t in f.get("Tags", []))]


def _later(path: str, before: str, after: str) -> str:
    later = path + ".later.yaml"
    with open(path) as src, open(later, "w") as dst:
        dst.write(src.read().replace(before, after))
    return later


def test_the_guard_stops_pcs_at_its_moment_not_before_and_a_later_lease_brings_the_nodes_back(in_process, tmp_path,
                                                                                              capsys) -> None:
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status

    name, path = pcs_spec(tmp_path, "budget: {expires: 1h, notify: ops@example.com}\n" + LUSTRE)
    assert create(load_spec(path).spec, path, yes=True, wait=True, timeout_min=10) == 0
    pcs, sns = in_process.client("pcs"), in_process.client("sns")
    account = in_process.client("sts").get_caller_identity()["Account"]
    topic = f"arn:aws:sns:us-east-1:{account}:fmcluster-{name}-guard"

    def scaling(group: str) -> dict:
        return _scaling(pcs, name, group)

    try:
        storage = _file_systems(in_process, name)
        assert len(storage) == 1, storage
        [subscription] = sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
        assert (subscription["Protocol"], subscription["Endpoint"]) == ("email", "ops@example.com")
        budget = status(name, refresh=False)["budget"]
        left, fires = budget["hours_left"] * 3600, budget["fires_at"]
        # a 1 h lease is warned a quarter of it, 15 minutes, before the guard fires
        assert _when(budget["warns_at"]) == _when(fires) - dt.timedelta(minutes=15), budget
        # The guard's role may publish to this cluster's topic only: the same publish, as the same role, to another
        # cluster's topic at the same moment is refused by IAM (SAR, Amazon SNS: Publish on resource type `topic`)
        other = sns.create_topic(Name=f"fmcluster-other-{name}-guard",
                                 Tags=[{"Key": "fmcluster:cluster", "Value": f"other-{name}"}])["TopicArn"]
        in_process.client("scheduler").create_schedule(
            Name=f"foreign-{name}", ScheduleExpression=f"at({budget['warns_at'][:-1]})",
            ScheduleExpressionTimezone="UTC", FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": "arn:aws:scheduler:::aws-sdk:sns:publish",
                    "RoleArn": f"arn:aws:iam::{account}:role/fmcluster-guard-us-east-1-{name}",
                    "Input": json.dumps({"TopicArn": other, "Message": "not this cluster's"})})
        _advance(in_process, left - 15 * 60 - 60)  # a minute before the warning: nothing published
        assert in_process.sns_published(topic) == []
        _advance(in_process, 120)  # a minute after it: one message, the nodes untouched
        [warning] = in_process.sns_published(topic)
        [foreign] = [r for r in in_process.schedule_runs() if r["schedule"] == f"foreign-{name}"]
        assert foreign["outcome"] == "denied" and in_process.sns_published(other) == [], foreign
        assert name in warning["subject"] and fires in warning["subject"], warning
        assert f"fires at {fires}" in warning["message"] and "on_limit stop" in warning["message"], warning
        assert "fmcluster create" in warning["message"], warning
        assert scaling("gpu") == {"minInstanceCount": 1, "maxInstanceCount": 1}
        _advance(in_process, 15 * 60 - 60 - 60)  # a minute before the guard fires: nothing stops
        assert scaling("gpu") == {"minInstanceCount": 1, "maxInstanceCount": 1}
        assert len(in_process.sns_published(topic)) == 1
        _advance(in_process, 120)  # a minute after
        assert scaling("gpu") == {"minInstanceCount": 0, "maxInstanceCount": 0}
        assert scaling("burst") == {"minInstanceCount": 0, "maxInstanceCount": 0}
        assert _file_systems(in_process, name) == storage  # `stop` keeps storage
        report = status(name, refresh=False)
        assert report["budget"]["passed"] is True
        assert any(p.startswith("the budget guard fired at ") for p in report["problems"]), report["problems"]
        # 75 min from creation, decided 61 min in: the warning would go a quarter of 75 min (18 min 45 s) before,
        # 56 min 15 s in, already past: create says so and the warning's schedule goes rather than lie in the past
        later = _later(path, "expires: 1h", "expires: 75m")
        capsys.readouterr()
        assert create(load_spec(later).spec, later, yes=True, wait=True, timeout_min=10) == 0
        said = " ".join(capsys.readouterr().err.split())
        assert "too near to warn before it: no warning is sent to ops@example.com" in said, said
        schedules = in_process.client("scheduler").list_schedules(GroupName=f"fmcluster-{name}")["Schedules"]
        assert sorted(s["Name"] for s in schedules) == ["stop-burst", "stop-gpu"]
        # the spec's sizes (quickstart-pcs.yaml: gpu nodes 1, burst 0..2)
        assert scaling("gpu") == {"minInstanceCount": 1, "maxInstanceCount": 1}
        assert scaling("burst") == {"minInstanceCount": 0, "maxInstanceCount": 2}
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0
    # destroy deletes the warning's topic and, with it, its subscription (SNS API reference, DeleteTopic)
    assert topic not in [t["TopicArn"] for t in sns.list_topics()["Topics"]]
    assert not [s for s in sns.list_subscriptions()["Subscriptions"] if s["TopicArn"] == topic]
    sns.delete_topic(TopicArn=other)
    in_process.client("scheduler").delete_schedule(Name=f"foreign-{name}")


def test_eks_guard_stops_its_own_node_groups_only_keeps_storage_and_a_later_lease_restores(in_process,
                                                                                         tmp_path) -> None:
    """On EKS the role may call eks:UpdateNodegroupConfig on the queues' node groups alone (as EKS issued their
    ARNs; not the system node group), and each schedule's input keeps the group's maxSize (at least 1). When the
    sandbox's clock passes the lease, the schedule scales the group to zero and status says the guard fired; the
    Lustre file system stays; create with a later lease sets the group back to the spec's size."""
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status

    name = f"guard-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "eks.yaml"
    path.write_text(f"name: {name}\nregion: us-east-1\nbackend: eks\nkubernetes: {{scheduler: kueue}}\n"
                    "queues:\n  - {name: train, instance_type: p5.48xlarge, nodes: 2}\n"
                    "budget: {expires: 72h}\n" + LUSTRE)
    assert create(load_spec(path).spec, str(path), yes=True, wait=True, timeout_min=15) == 0
    eks, iam, scheduler = (in_process.client(s) for s in ("eks", "iam", "scheduler"))
    try:
        storage = _file_systems(in_process, name)
        assert len(storage) == 1, storage
        train = eks.describe_nodegroup(clusterName=name, nodegroupName="train")["nodegroup"]["nodegroupArn"]
        policy = iam.get_role_policy(RoleName=f"fmcluster-guard-us-east-1-{name}", PolicyName="budget-guard")
        document = policy["PolicyDocument"]
        document = json.loads(urllib.parse.unquote(document)) if isinstance(document, str) else document
        assert [(s["Action"], s["Resource"]) for s in document["Statement"]] == [
            ("eks:UpdateNodegroupConfig", [train])]
        got = scheduler.get_schedule(Name="stop-train", GroupName=f"fmcluster-{name}")
        assert got["Target"]["Arn"] == "arn:aws:scheduler:::aws-sdk:eks:updateNodegroupConfig"
        assert json.loads(got["Target"]["Input"]) == {"clusterName": name, "nodegroupName": "train",
                                                      "scalingConfig": {"minSize": 0, "maxSize": 2,
                                                                        "desiredSize": 0}}
        before = status(name, refresh=False)
        assert [q["running_instances"] for q in before["queues"] if q["name"] == "train"] == [2]
        _advance(in_process, before["budget"]["hours_left"] * 3600 + 60)
        scaling = eks.describe_nodegroup(clusterName=name, nodegroupName="train")["nodegroup"]["scalingConfig"]
        assert scaling == {"minSize": 0, "maxSize": 2, "desiredSize": 0}
        after = _settled(lambda: status(name, refresh=False), "train")
        assert any(p.startswith("the budget guard fired at ") for p in after["problems"]), after["problems"]
        assert after["budget"]["nodes_still_running"] == 0
        assert _file_systems(in_process, name) == storage
        later = _later(str(path), "expires: 72h", "expires: 100h")
        assert create(load_spec(later).spec, later, yes=True, wait=True, timeout_min=15) == 0
        scaling = eks.describe_nodegroup(clusterName=name, nodegroupName="train")["nodegroup"]["scalingConfig"]
        assert scaling == {"minSize": 2, "maxSize": 2, "desiredSize": 2}  # the spec's `nodes: 2`
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0


def test_parallelcluster_guard_stops_the_fleet_keeps_storage_and_a_later_lease_starts_it(in_process,
                                                                                        tmp_path) -> None:
    """The role may only UpdateItem the cluster's parallelcluster-<name> table; the schedule's request, sent as
    EventBridge Scheduler would send it, lands where pcluster reads the fleet's status (Data.status). Once the fleet
    is STOPPED, create with a later lease starts it (pcluster update-compute-fleet START_REQUESTED) to RUNNING."""
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status

    name = f"guard-{uuid.uuid4().hex[:8]}"
    text = (REPO_ROOT / "configs" / "quickstart-parallelcluster.yaml").read_text()
    path = tmp_path / "pc.yaml"
    path.write_text(text.replace("name: quickstart-pc\n", f"name: {name}\n") + "budget: {expires: 72h}\n" + LUSTRE)
    assert create(load_spec(path).spec, str(path), yes=True, wait=True, timeout_min=15) == 0
    iam, scheduler, ddb = (in_process.client(s) for s in ("iam", "scheduler", "dynamodb"))
    account = in_process.client("sts").get_caller_identity()["Account"]

    def fleet() -> str:
        item = ddb.get_item(TableName=f"parallelcluster-{name}", Key={"Id": {"S": "COMPUTE_FLEET"}})["Item"]
        return item["Data"]["M"]["status"]["S"]

    try:
        storage = _file_systems(in_process, name)
        assert len(storage) == 1, storage
        policy = iam.get_role_policy(RoleName=f"fmcluster-guard-us-east-1-{name}", PolicyName="budget-guard")
        document = policy["PolicyDocument"]
        document = json.loads(urllib.parse.unquote(document)) if isinstance(document, str) else document
        assert [(s["Action"], s["Resource"]) for s in document["Statement"]] == [
            ("dynamodb:UpdateItem", [f"arn:aws:dynamodb:us-east-1:{account}:table/parallelcluster-{name}"])]
        got = scheduler.get_schedule(Name="stop-fleet", GroupName=f"fmcluster-{name}")
        assert got["Target"]["Arn"] == "arn:aws:scheduler:::aws-sdk:dynamodb:updateItem"
        assert fleet() == "RUNNING"
        # 72 h on: the schedule sends its request as the role; clustermgtd's stand-in moves the fleet to STOPPED
        _advance(in_process, 72 * 3600 + 60)
        [run] = [r for r in in_process.schedule_runs() if r["group"] == f"fmcluster-{name}"]
        assert run["outcome"] == "succeeded", run
        assert fleet() in ("STOP_REQUESTED", "STOPPING", "STOPPED")
        ends = time.monotonic() + 60
        while fleet() != "STOPPED" and time.monotonic() < ends:
            time.sleep(1)
        assert fleet() == "STOPPED"
        assert _file_systems(in_process, name) == storage
        # status says the guard fired, when (the lease's end, 72 h after creation), and what still bills
        report = _settled(lambda: status(name, refresh=False), "gpu")
        assert report["budget"]["passed"] is True and report["budget"]["nodes_still_running"] == 0, report["budget"]
        fired = [p for p in report["problems"] if p.startswith("the budget guard fired at ")]
        assert fired and f"fired at {report['budget']['fires_at']} (expires reached)" in fired[0], report["problems"]
        assert "the head or login node and the control plane still bill" in fired[0], fired
        # a fleet running again after the moment (its queue has no minimum, so no node shows it) is not "fired"
        set_fleet = {"TableName": f"parallelcluster-{name}", "Key": {"Id": {"S": "COMPUTE_FLEET"}},
                     "UpdateExpression": "set #dt.#st=:s", "ExpressionAttributeNames": {"#dt": "Data", "#st": "status"}}
        ddb.update_item(**set_fleet, ExpressionAttributeValues={":s": {"S": "RUNNING"}})
        report = status(name, refresh=False)
        assert not any(p.startswith("the budget guard fired at ") for p in report["problems"]), report["problems"]
        assert any("has passed" in p and "the compute fleet is RUNNING, not STOPPED" in p
                   for p in report["problems"]), report["problems"]
        ddb.update_item(**set_fleet, ExpressionAttributeValues={":s": {"S": "STOPPED"}})
        later = _later(str(path), "expires: 72h", "expires: 100h")
        assert create(load_spec(later).spec, later, yes=True, wait=True, timeout_min=15) == 0
        assert fleet() == "RUNNING"
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0


def _plan_json(path: str) -> dict:
    from rich.console import Console

    from fmcluster.cost_report.command import run_plan

    out, err = io.StringIO(), io.StringIO()
    assert run_plan(path, True, None, False, Console(file=out, width=200), Console(file=err, width=200)) == 0, \
        err.getvalue()
    return json.loads(out.getvalue())


def _when(iso: str) -> dt.datetime:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))


def test_a_cap_alone_fires_within_a_minute_of_the_moment_plan_printed(in_process, tmp_path) -> None:
    """``budget: {max_usd}`` alone: plan (offline, the laptop's clock) prints when the cap is spent at the maximum
    rate; the sandbox's clock is real time plus its offset, so that moment in sandbox time is plan's plus the offset.
    A minute before it nothing stops; a minute after it every queue is at zero, and the schedule ran within a minute
    of plan's moment."""
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.destroy import destroy

    name, path = pcs_spec(tmp_path, "budget: {max_usd: 40}\n")
    offset = dt.timedelta(seconds=in_process.clock()["offset_seconds"])
    planned = _plan_json(path)["budget"]
    assert planned["decided_by"] == "max_usd" and planned["expires_at"] is None, planned
    moment = _when(planned["fires_at"]) + offset
    assert create(load_spec(path).spec, path, yes=True, wait=True, timeout_min=10) == 0
    pcs = in_process.client("pcs")

    def scaling(group: str) -> dict:
        return _scaling(pcs, name, group)

    try:
        now = _when(in_process.clock()["now"])
        _advance(in_process, (moment - now).total_seconds() - 60)
        assert scaling("gpu") == {"minInstanceCount": 1, "maxInstanceCount": 1}
        assert not [r for r in in_process.schedule_runs() if r["group"] == f"fmcluster-{name}"]
        _advance(in_process, 120)
        assert scaling("gpu") == {"minInstanceCount": 0, "maxInstanceCount": 0}
        assert scaling("burst") == {"minInstanceCount": 0, "maxInstanceCount": 0}
        runs = [r for r in in_process.schedule_runs() if r["group"] == f"fmcluster-{name}"]
        assert runs and {r["outcome"] for r in runs} == {"succeeded"}, runs
        assert all(abs((_when(r["at"]) - moment).total_seconds()) <= 60 for r in runs), (runs, moment)
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0
