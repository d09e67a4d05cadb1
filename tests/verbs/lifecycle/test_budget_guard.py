"""The budget guard in ``create`` and ``status``, in this process against the sandbox: a budget that cannot be kept
is refused with exit 2 before anything is claimed or made; ``create`` installs the guard in AWS (a role, one
EventBridge Scheduler schedule per stop call, a Budgets budget) and ``destroy`` removes it; when the sandbox's clock
passes the moment, its schedules call each backend's stop as the role; ``status`` counts the guard down on AWS's
clock (the sandbox's ``Date`` header) and says it fired only when the queues are at zero nodes."""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
import urllib.request
import uuid

import pytest
from fixtures.guard_specs import pcs_spec

from fmcluster.errors import FmclusterError, SpecError, UsageError


def scaled_queues(path: str) -> list:
    """The spec's queues as `scale burst=0:1` left them."""
    from fmcluster.spec import load_spec
    from fmcluster.spec.models import NodeRange

    queues = load_spec(path).spec.queues
    return [q.model_copy(update={"nodes": NodeRange(min=0, max=1)}) if q.name == "burst" else q for q in queues]


def create_refused(path: str, yes: bool = True) -> FmclusterError:
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create

    with pytest.raises(FmclusterError) as raised:
        create(load_spec(path).spec, path, yes=yes, wait=False, timeout_min=None)
    return raised.value


def nothing_made(name: str) -> None:
    from fmcluster.state.claims import holder
    from fmcluster.state.store import StateStore

    assert StateStore(readonly=True).cluster(name, "us-east-1") is None
    assert holder(name, "us-east-1") is None  # not even the name's claim


def test_a_lease_already_over_is_refused_at_its_line(in_process, tmp_path) -> None:
    name, path = pcs_spec(tmp_path, "budget: {expires: '2020-01-01T00:00:00Z'}\n")
    refused = create_refused(path)
    assert isinstance(refused, SpecError) and refused.exit_code == 2
    assert ":18:" in str(refused) and "budget.expires" in str(refused) and "not after now" in str(refused)
    nothing_made(name)


def test_destroy_compute_without_yes_says_what_it_deletes(in_process, tmp_path) -> None:
    name, path = pcs_spec(tmp_path, "budget: {expires: 72h, on_limit: destroy-compute}\n")
    refused = create_refused(path, yes=False)
    assert isinstance(refused, UsageError) and refused.exit_code == 2
    assert "deletes the node groups of every queue (gpu, burst)" in str(refused) and "--yes" in str(refused)
    nothing_made(name)


def test_create_installs_the_guard_as_plan_printed_and_destroy_leaves_nothing(in_process, tmp_path, capsys) -> None:
    """The schedules' at() is the moment create printed; the role may do only the stop calls, on only this
    cluster's node groups; the budget filters on the cluster's tag; destroy removes all of it. Expected values are
    read with plain boto3 and typed by hand from the EventBridge Scheduler and IAM references."""
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.scale import scale
    from fmcluster.verbs.lifecycle.status import status

    name, path = pcs_spec(tmp_path, "budget: {max_usd: 50, expires: 72h, notify: ops@example.com}\n")
    assert create(load_spec(path).spec, path, yes=True, wait=True, timeout_min=10) == 0
    printed = capsys.readouterr().err
    scheduler, iam, budgets = (in_process.client(s) for s in ("scheduler", "iam", "budgets"))
    pcs, sns = in_process.client("pcs"), in_process.client("sns")
    account = in_process.client("sts").get_caller_identity()["Account"]
    try:
        fires = printed.split("budget guard: fires ", 1)[1].split(" ", 1)[0]  # 2026-12-07T01:23:45Z
        group = f"fmcluster-{name}"
        listed = scheduler.list_schedules(GroupName=group)["Schedules"]
        assert sorted(s["Name"] for s in listed) == ["stop-burst", "stop-gpu", "warn"]
        topic = f"arn:aws:sns:us-east-1:{account}:fmcluster-{name}-guard"

        def warns_at() -> str:
            """The warning schedule's at(), checked to publish to the cluster's topic as the guard's role."""
            got = scheduler.get_schedule(Name="warn", GroupName=group)
            assert got["Target"]["Arn"] == "arn:aws:scheduler:::aws-sdk:sns:publish"
            assert json.loads(got["Target"]["Input"])["TopicArn"] == topic
            assert got["Target"]["RoleArn"] == f"arn:aws:iam::{account}:role/fmcluster-guard-us-east-1-{name}"
            return got["ScheduleExpression"]

        def lead_min(expression: str, moment: str) -> float:
            """Minutes from the warning's at() to the guard's moment."""
            return (dt.datetime.fromisoformat(moment[:-1]) - dt.datetime.fromisoformat(expression[3:-1])) \
                .total_seconds() / 60

        # The cap decides: $50 at $20.89/h lasts 2.39 h from creation (printed above), shorter than four hours, so the
        # warning goes a quarter of that before: 2.39 h × 60 / 4 = 35.85 min (±1 min: the printed hours are rounded)
        hours = float(printed.split(f"fires {fires} (in ", 1)[1].split(" h)", 1)[0])
        assert hours == 2.39, printed
        first = warns_at()
        assert abs(lead_min(first, fires) - 35.85) < 1, (first, fires)
        assert f"budget guard: warns {first[3:-1]}Z" in printed, printed
        for schedule in ("stop-gpu", "stop-burst"):
            got = scheduler.get_schedule(Name=schedule, GroupName=group)
            assert got["ScheduleExpression"] == f"at({fires[:-1]})" and got["ScheduleExpressionTimezone"] == "UTC"
            assert got["FlexibleTimeWindow"] == {"Mode": "OFF"} and got["ActionAfterCompletion"] == "NONE"
            assert got["Target"]["Arn"] == "arn:aws:scheduler:::aws-sdk:pcs:updateComputeNodeGroup"
            assert json.loads(got["Target"]["Input"])["scalingConfiguration"] == {"minInstanceCount": 0,
                                                                                 "maxInstanceCount": 0}
        role = f"fmcluster-guard-us-east-1-{name}"
        trust = iam.get_role(RoleName=role)["Role"]["AssumeRolePolicyDocument"]
        trust = json.loads(urllib.parse.unquote(trust)) if isinstance(trust, str) else trust
        assert trust["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
        assert trust["Statement"][0]["Condition"] == {"StringEquals": {"aws:SourceAccount": account}}
        policy = iam.get_role_policy(RoleName=role, PolicyName="budget-guard")["PolicyDocument"]
        policy = json.loads(urllib.parse.unquote(policy)) if isinstance(policy, str) else policy
        arns = {pcs.get_compute_node_group(clusterIdentifier=name, computeNodeGroupIdentifier=g)
                ["computeNodeGroup"]["arn"] for g in ("gpu", "burst")}
        assert {a for st in policy["Statement"] if st["Action"] == "pcs:UpdateComputeNodeGroup"
                for a in st["Resource"]} == arns
        # besides the stop calls, only sns:Publish, on the cluster's own topic (SAR, Amazon SNS: resource `topic`)
        assert sorted((st["Action"], tuple(st["Resource"])) for st in policy["Statement"]
                      if st["Action"] != "pcs:UpdateComputeNodeGroup") == [("sns:Publish", (topic,))]
        budget = budgets.describe_budget(AccountId=account, BudgetName=f"fmcluster-{name}-us-east-1")["Budget"]
        assert budget["BudgetLimit"] == {"Amount": "50.00", "Unit": "USD"}
        assert budget["CostFilters"] == {"TagKeyValue": [f"user:fmcluster:cluster${name}"]}

        # scale lowers the maximum rate: the guard moves (later), says so, and the schedules hold the new moment
        assert scale(name, ["burst=0:1"], yes=True) == 0
        said = capsys.readouterr().err
        moved = said.split("budget guard: fires ", 1)[1].split(" ", 1)[0]
        assert f"the budget guard moves from {fires} to {moved}" in " ".join(said.split()) and moved > fires, said
        assert scheduler.get_schedule(Name="stop-gpu", GroupName=group)["ScheduleExpression"] == f"at({moved[:-1]})"
        # the warning moves with the moment: an hour before it once the cluster's life to it reaches four hours,
        # else a quarter of that life (created 2.39 h before the first moment)
        life_h = 2.39 + (dt.datetime.fromisoformat(moved[:-1]) - dt.datetime.fromisoformat(fires[:-1])) \
            .total_seconds() / 3600
        warn_moved = warns_at()
        assert abs(lead_min(warn_moved, moved) - min(60.0, life_h * 60 / 4)) < 1, (warn_moved, moved, life_h)
        budget_status = status(name, refresh=False)["budget"]
        assert budget_status["warns_at"] == f"{warn_moved[3:-1]}Z", budget_status
        assert f"warns {warn_moved[3:-1]}Z" in budget_status["countdown"], budget_status

        # a schedule deleted outside fmcluster is drift, and create puts it back at the same moment
        scheduler.delete_schedule(Name="stop-gpu", GroupName=group)
        scheduler.delete_schedule(Name="warn", GroupName=group)
        sns.delete_topic(TopicArn=topic)
        drift = status(name, refresh=False)["drift"]
        for resource in ("schedule:stop-gpu", "schedule:warn", "sns_topic:warning"):
            assert {"resource": resource, "expected": "exists", "actual": "missing"} in drift, drift
        assert create(load_spec(path).spec.model_copy(update={"queues": scaled_queues(path)}), path, yes=True,
                      wait=True, timeout_min=10) == 0
        again = scheduler.get_schedule(Name="stop-gpu", GroupName=group)
        assert again["ScheduleExpression"] == f"at({moved[:-1]})"
        assert warns_at() == warn_moved
        assert [(s["Protocol"], s["Endpoint"]) for s in sns.list_subscriptions_by_topic(TopicArn=topic)[
            "Subscriptions"]] == [("email", "ops@example.com")]

        # notify emptied: the budget's 80% and 100% notifications go (AWS Budgets DeleteNotification)
        def thresholds() -> list[float]:
            return sorted(n["Threshold"] for n in budgets.describe_notifications_for_budget(
                AccountId=account, BudgetName=f"fmcluster-{name}-us-east-1")["Notifications"])

        assert thresholds() == [80.0, 100.0]
        quiet = load_spec(path).spec
        quiet = quiet.model_copy(update={"queues": scaled_queues(path),
                                         "budget": quiet.budget.model_copy(update={"notify": []})})
        assert create(quiet, path, yes=True, wait=True, timeout_min=10) == 0
        assert thresholds() == []
        # and the warning with it: no topic, no warning schedule
        assert topic not in [t["TopicArn"] for t in sns.list_topics()["Topics"]]
        assert sorted(s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]) == [
            "stop-burst", "stop-gpu"]
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0
    groups = [g["Name"] for g in scheduler.list_schedule_groups()["ScheduleGroups"]]
    assert f"fmcluster-{name}" not in groups
    assert not [r for r in iam.list_roles()["Roles"] if r["RoleName"].endswith(name)]
    names = [b["BudgetName"] for b in budgets.describe_budgets(AccountId=account).get("Budgets", [])]
    assert f"fmcluster-{name}-us-east-1" not in names


def test_status_counts_the_guard_down_from_the_creation_on_aws_clock(in_process, tmp_path) -> None:
    from fmcluster.spec import load_spec
    from fmcluster.spec.stored import record_cluster
    from fmcluster.verbs.lifecycle.common import spec_text
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status
    from fmcluster.verbs.session import Session

    name, path = pcs_spec(tmp_path, "budget: {expires: 90m}\n")
    spec = load_spec(path).spec
    session = Session.open(spec)
    session.set_cluster_id(uuid.uuid4().hex)
    # a recorded cluster (nothing in AWS): its creation is the record's first write
    record_cluster(session.store, name, session.region, "pcs", spec_text(spec), path, "CREATING",
                   session.ctx.cluster_id)
    created = dt.datetime.fromtimestamp(session.store.cluster(name, session.region).created_at, dt.timezone.utc)
    try:
        budget = status(name, refresh=False)["budget"]
        expected = (created + dt.timedelta(minutes=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert budget["fires_at"] == expected and budget["decided_by"] == "expires"
        assert budget["passed"] is False and budget["countdown"].endswith(f"(fires {expected})")
        # the sandbox's Date header is the time status counts from
        with urllib.request.urlopen(in_process.endpoint_url + "/", context=_ssl(in_process)) as answer:
            said = answer.headers["Date"]
        assert said and budget["now"][:13] == dt.datetime.strptime(said, "%a, %d %b %Y %H:%M:%S GMT").strftime(
            "%Y-%m-%dT%H")
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0


def test_status_says_the_guard_has_passed_when_aws_clock_has(in_process, tmp_path) -> None:
    from fmcluster.spec import load_spec
    from fmcluster.spec.stored import record_cluster
    from fmcluster.verbs.lifecycle.common import spec_text
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status
    from fmcluster.verbs.session import Session

    name, path = pcs_spec(tmp_path, "budget: {expires: 1h}\n")
    spec = load_spec(path).spec
    session = Session.open(spec)
    session.set_cluster_id(uuid.uuid4().hex)
    record_cluster(session.store, name, session.region, "pcs", spec_text(spec), path, "CREATING",
                   session.ctx.cluster_id)
    try:
        assert status(name, refresh=False)["budget"]["passed"] is False
        in_process.clock({"advance_seconds": 2 * 3600})
        budget = status(name, refresh=False)["budget"]
        assert budget["passed"] is True and budget["countdown"].startswith("passed ")
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0


def _ssl(sandbox):
    import ssl

    return ssl.create_default_context(cafile=sandbox.ca_bundle)


def test_a_guard_after_a_capacity_blocks_end_is_allowed_and_said(in_process, tmp_path) -> None:
    """Bought as EC2 sells it (DescribeCapacityBlockOfferings, PurchaseCapacityBlock): a one-day block from
    tomorrow; a lease of 10 days outlasts it."""
    from fmcluster.pricing.deadline import guard_deadline
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.guard import after_blocks
    from fmcluster.verbs.session import Session

    ec2 = in_process.client("ec2")
    after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    offerings = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=2,
                                                      CapacityDurationHours=24,
                                                      StartDateRange=after)["CapacityBlockOfferings"]
    offering = min(offerings, key=lambda o: (o["StartDate"], o["AvailabilityZone"]))
    block = ec2.purchase_capacity_block(CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
                                       InstancePlatform="Linux/UNIX")["CapacityReservation"]
    rid = block["CapacityReservationId"]
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: guard-{uuid.uuid4().hex[:8]}\nregion: us-east-1\nbackend: pcs\nqueues:\n"
                    f"  - {{name: train, instance_type: p5.48xlarge, nodes: 2, capacity: {{type: capacity-block, "
                    f"reservation_id: {rid}}}}}\nbudget: {{expires: 10d}}\n")
    spec = load_spec(path).spec
    assert spec.budget is not None
    session = Session.open(spec)
    now = dt.datetime.now(dt.timezone.utc)
    said = after_blocks(session, spec, guard_deadline(spec.budget, None, now, now))
    assert len(said) == 1 and f"after Capacity Block {rid} ends" in said[0] and "queue train" in said[0], said
    # a lease inside the block's life says nothing
    spec_short = spec.model_copy(update={"budget": spec.budget.model_copy(update={"expires": "1h"})})
    assert after_blocks(session, spec_short, guard_deadline(spec_short.budget, None, now, now)) == []


def test_diff_shows_the_guard_and_records_no_moment(in_process, tmp_path, capsys) -> None:
    """diff installs nothing, so it keeps no moment: the next create decides it from AWS's clock then."""
    from fmcluster.spec import load_spec
    from fmcluster.state.store import StateStore
    from fmcluster.verbs.lifecycle.diff import diff

    name, path = pcs_spec(tmp_path, "budget: {max_usd: 50, notify: ops@example.com}\n")
    diff(load_spec(path).spec, path, json_output=True)
    changes = json.loads(capsys.readouterr().out)["changes"]
    planned = {c["resource"]: c["action"] for c in changes}
    for resource in ("iam_role:budget-guard", "schedule_group:guard", "schedule:stop-gpu", "schedule:stop-burst",
                     "budget:guard"):
        assert planned.get(resource) == "create", planned
    assert StateStore(readonly=True).resource(name, "us-east-1", "guard", "deadline") is None


def test_create_warns_while_the_clusters_cost_tag_is_not_active(in_process, tmp_path, capsys) -> None:
    """Billing user guide, "Activating user-defined cost allocation tags": a budget filtered on a tag sees spend only
    once the tag is active; create says so, with the command that activates it, until it is."""
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.destroy import destroy

    name, path = pcs_spec(tmp_path, "budget: {max_usd: 50}\n")
    assert create(load_spec(path).spec, path, yes=True, wait=True, timeout_min=10) == 0
    try:
        said = " ".join(capsys.readouterr().err.split())
        assert ("aws ce update-cost-allocation-tags-status --cost-allocation-tags-status "
                "TagKey=fmcluster:cluster,Status=Active") in said
        in_process.client("ce").update_cost_allocation_tags_status(
            CostAllocationTagsStatus=[{"TagKey": "fmcluster:cluster", "Status": "Active"}])
        assert create(load_spec(path).spec, path, yes=True, wait=True, timeout_min=10) == 0
        assert "update-cost-allocation-tags-status" not in capsys.readouterr().err
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0


def test_status_does_not_claim_a_stop_aws_refused(in_process, tmp_path) -> None:
    """A guard whose role lost its rights (edited outside fmcluster) passes its moment with the nodes running: the
    sandbox refuses the call as IAM would, and status says the moment passed with nodes still running, not that the
    guard stopped the cluster."""
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status

    name, path = pcs_spec(tmp_path, "budget: {expires: 1h}\n")
    assert create(load_spec(path).spec, path, yes=True, wait=True, timeout_min=10) == 0
    iam = in_process.client("iam")
    try:
        iam.put_role_policy(RoleName=f"fmcluster-guard-us-east-1-{name}", PolicyName="budget-guard",
                            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                                {"Effect": "Allow", "Action": "pcs:UpdateComputeNodeGroup",
                                 "Resource": "arn:aws:pcs:us-east-1:123456789012:cluster/pcs_0000000000/*"}]}))
        in_process.clock({"advance_seconds": status(name, refresh=False)["budget"]["hours_left"] * 3600 + 60})
        runs = [r for r in in_process.schedule_runs() if r["group"] == f"fmcluster-{name}"]
        assert runs and {r["outcome"] for r in runs} == {"denied"}, runs
        report = status(name, refresh=False)
        assert report["budget"]["passed"] is True and report["budget"]["nodes_still_running"] >= 1
        assert not any(p.startswith("the budget guard fired at ") for p in report["problems"]), report["problems"]
        assert any("has passed" in p and "still runs" in p for p in report["problems"]), report["problems"]
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0
