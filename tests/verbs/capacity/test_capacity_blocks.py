"""Capacity Blocks an account holds, as the sandbox serves them (DescribeCapacityBlocks, DescribeCapacityBlockStatus)
and as fmcluster reads them: ``capacity list``, ``status``'s countdown, ``preflight``'s little-time-left warning, and
``create`` on a block that begins tomorrow."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import uuid

import pytest
import yaml
from fixtures.lifecycle import CONFIGS, _fmcluster, _ok

REGION = "us-east-1"


def _rid() -> str:
    return "cr-" + uuid.uuid4().hex[:17]


def _seed(sandbox, *, start: dt.datetime, end: dt.datetime, count: int = 2, available: int | None = None,
          instance_type: str = "p5.48xlarge", zone: str = "us-east-1a") -> str:
    payload = {"instance_type": instance_type, "availability_zone": zone, "count": count, "type": "capacity-block",
               "start": start.isoformat(), "end": end.isoformat(), "region": REGION, "reservation_id": _rid()}
    if available is not None:
        payload["available"] = available
    return sandbox.control("POST", "/_fmcluster/capacity-reservations", payload)["reservation_id"]


def _buy_tomorrow(ec2) -> dict:
    """Buy a one-day block of 2 × p5.48xlarge that begins after tomorrow's start (EC2 offerings start at 11:30 UTC)."""
    after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    offerings = ec2.describe_capacity_block_offerings(
        InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=24,
        StartDateRange=after)["CapacityBlockOfferings"]
    offering = min(offerings, key=lambda o: (o["StartDate"], o["AvailabilityZone"]))
    return ec2.purchase_capacity_block(CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
                                       InstancePlatform="Linux/UNIX")["CapacityReservation"]


# --- the sandbox -------------------------------------------------------------------------------------------
def test_a_bought_block_is_described_with_its_status_and_a_fault_impairs_it(sandbox):
    from botocore.exceptions import ClientError

    ec2 = sandbox.client("ec2", REGION)
    bought = _buy_tomorrow(ec2)
    rid, block_id = bought["CapacityReservationId"], bought["CapacityBlockId"]
    assert block_id.startswith("cb-")

    blocks = {b["CapacityBlockId"]: b for b in ec2.describe_capacity_blocks()["CapacityBlocks"]}
    mine = blocks[block_id]
    # EC2 API reference, CapacityBlock: its reservations, dates and state (scheduled until its start)
    assert mine["CapacityReservationIds"] == [rid]
    assert (mine["State"], mine["AvailabilityZone"]) == ("scheduled", bought["AvailabilityZone"])
    assert (mine["StartDate"], mine["EndDate"]) == (bought["StartDate"], bought["EndDate"])
    assert "UltraserverType" not in mine
    # DescribeCapacityBlocks filters: ultraserver-type is "instances" or "ultraservers"
    by_kind = lambda kind: {b["CapacityBlockId"] for b in ec2.describe_capacity_blocks(  # noqa: E731
        Filters=[{"Name": "ultraserver-type", "Values": [kind]}])["CapacityBlocks"]}
    assert block_id in by_kind("instances") and block_id not in by_kind("ultraservers")
    with pytest.raises(ClientError) as unknown:
        ec2.describe_capacity_blocks(CapacityBlockIds=["cb-0123456789abcdef0"])
    assert unknown.value.response["Error"]["Code"] == "InvalidCapacityBlockId.NotFound"

    # no health before the start (aws-parallelcluster 3.16.1 CapacityBlockHealthStatusValidator: "health status
    # cannot be checked until the capacity block becomes active")
    assert ec2.describe_capacity_block_status(CapacityBlockIds=[block_id])["CapacityBlockStatuses"] == []
    now = dt.datetime.now(dt.timezone.utc)
    rid = _seed(sandbox, start=now - dt.timedelta(hours=1), end=now + dt.timedelta(hours=23))
    block_id = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0][
        "CapacityBlockId"]

    def status() -> dict:
        return ec2.describe_capacity_block_status(CapacityBlockIds=[block_id])["CapacityBlockStatuses"][0]

    healthy = status()
    assert (healthy["InterconnectStatus"], healthy["TotalCapacity"], healthy["TotalAvailableCapacity"],
            healthy["TotalUnavailableCapacity"]) == ("ok", 2, 2, 0)
    assert healthy["CapacityReservationStatuses"][0]["CapacityReservationId"] == rid

    sandbox.faults({"capacity_block_health": {rid: {"interconnect_status": "impaired", "unavailable": 1}}})
    impaired = status()
    assert (impaired["InterconnectStatus"], impaired["TotalAvailableCapacity"],
            impaired["TotalUnavailableCapacity"]) == ("impaired", 1, 1)
    healthy_only = ec2.describe_capacity_block_status(
        Filters=[{"Name": "interconnect-status", "Values": ["ok"]}])["CapacityBlockStatuses"]
    assert block_id not in {s["CapacityBlockId"] for s in healthy_only}


def test_a_block_health_fault_that_is_not_ec2s_is_refused():
    from fmcluster_sandbox.faults import Faults

    faults = Faults()
    with pytest.raises(ValueError, match="interconnect_status must be one of"):
        faults.update({"capacity_block_health": {"cb-0123456789abcdef0": {"interconnect_status": "degraded"}}})
    assert faults.block_health("cb-0123456789abcdef0") == {}


# --- capacity list -------------------------------------------------------------------------------------------
def test_capacity_list_json_shows_each_block_its_hours_and_the_cluster_using_it(sandbox):
    now = dt.datetime.now(dt.timezone.utc)
    running = _seed(sandbox, start=now - dt.timedelta(hours=14), end=now + dt.timedelta(hours=10), available=1)
    ec2 = sandbox.client("ec2", REGION)
    cluster = f"cap-{uuid.uuid4().hex[:6]}"
    # a cluster's launch template naming the block, tagged as fmcluster tags its templates (templates/pcs)
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{cluster}-train", LaunchTemplateData={
            "InstanceType": "p5.48xlarge", "InstanceMarketOptions": {"MarketType": "capacity-block"},
            "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": running}}},
        TagSpecifications=[{"ResourceType": "launch-template",
                            "Tags": [{"Key": "fmcluster:cluster", "Value": cluster}]}])["LaunchTemplate"]
    later = _buy_tomorrow(ec2)
    try:
        listed = subprocess.run([*_fmcluster(), "capacity", "list", "--json"], env=_env(sandbox), text=True,
                                capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        rows = {r["reservation_ids"][0]: r for r in json.loads(_ok(listed).stdout)}
    finally:
        ec2.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])
    row = rows[running]
    assert (row["state"], row["instance_type"], row["instance_count"]) == ("active", "p5.48xlarge", 2)
    assert (row["instances_in_use"], row["instances_free"], row["interconnect_status"]) == (1, 1, "ok")
    assert 9.9 < row["hours_left"] <= 10 and row["hours_until_start"] is None
    assert row["clusters"] == [cluster]
    ahead = rows[later["CapacityReservationId"]]
    assert ahead["state"] == "scheduled" and ahead["hours_left"] is None and ahead["hours_until_start"] > 0
    # "View Capacity Blocks": before it begins a block's available capacity appears as zero; nothing runs in it
    assert (ahead["instances_in_use"], ahead["instances_free"]) == (0, 0)
    assert ahead["clusters"] == []


def _env(sandbox) -> dict:
    import os

    return {**os.environ, **sandbox.env, "NO_COLOR": "1", "COLUMNS": "200"}


# --- status and preflight ---------------------------------------------------------------------------------
class _Ctx:
    """What :func:`fmcluster.aws.cluster_blocks.cluster_blocks` needs of the engine's Context."""

    snapshot = None

    def __init__(self, sandbox):
        self.client = lambda service: sandbox.client(service, REGION)


def _block_spec(rid: str, **extra):
    from fmcluster.spec.models import Spec

    return Spec.model_validate({
        "name": "blocks", "region": REGION, "backend": "pcs", **extra,
        "queues": [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2,
                    "capacity": {"type": "capacity-block", "reservation_id": rid}}]})


def test_status_counts_down_warns_under_the_threshold_and_names_an_impaired_block(sandbox):
    from fmcluster.aws.cluster_blocks import cluster_blocks
    from fmcluster.output.ui import status_view

    now = dt.datetime.now(dt.timezone.utc)
    rid = _seed(sandbox, start=now - dt.timedelta(hours=2), end=now + dt.timedelta(hours=20))
    blocks, problems = cluster_blocks(_Ctx(sandbox), _block_spec(rid))
    assert problems == []
    (block,) = blocks
    assert block["queues"] == ["train"] and 19.9 < block["hours_left"] <= 20
    assert block["countdown"].startswith("20.0 h left (ends ") or block["countdown"].startswith("19.9 h left")
    assert "under 24 h" in block["warning"]  # the default threshold: a day
    quiet, _ = cluster_blocks(_Ctx(sandbox), _block_spec(rid), warning_hours=12)
    assert quiet[0]["warning"] is None

    sandbox.faults({"capacity_block_health": {rid: {"interconnect_status": "impaired", "unavailable": 1}}})
    blocks, problems = cluster_blocks(_Ctx(sandbox), _block_spec(rid))
    assert any("accelerator interconnect is impaired" in p for p in problems), problems
    assert any("1 of 2 instances unavailable" in p for p in problems), problems

    report = {"name": "blocks", "backend": "pcs", "region": REGION, "status": "ACTIVE", "queues": [],
              "resources": [], "drift": [], "problems": problems, "capacity_blocks": blocks}
    from rich.console import Console

    console = Console(width=250, record=True, no_color=True)
    console.print(status_view(report))
    shown = console.export_text()
    assert f"capacity block {rid} (queue train): active, " in shown and " h left (ends " in shown
    assert "interconnect impaired" in shown and "problem: Capacity Block" in shown


def test_preflight_warns_under_two_checkpoints_and_refuses_an_ended_block(sandbox):
    from fmcluster.preflight.capacity import check_reservations
    from fmcluster.preflight.common import Context

    now = dt.datetime.now(dt.timezone.utc)
    rid = _seed(sandbox, start=now - dt.timedelta(hours=20), end=now + dt.timedelta(minutes=90))
    ended = _seed(sandbox, start=now - dt.timedelta(days=1), end=now - dt.timedelta(minutes=5))

    def check(spec):
        ctx = Context(spec, REGION, lambda service: sandbox.client(service, REGION))
        return check_reservations(ctx)[0]

    # 90 min left: fine for 30-minute checkpoints (1 h floor), too little for 60-minute ones (2 × 60 min)
    assert check(_block_spec(rid, workload={"model_params_b": 7, "checkpoint_every_min": 30})).status == "passed"
    short = check(_block_spec(rid, workload={"model_params_b": 7, "checkpoint_every_min": 60}))
    assert short.status == "warning" and "under 2 h" in short.summary, short
    assert check(_block_spec(ended)).status == "failed"


# --- create on a block that begins tomorrow ------------------------------------------------------------------
def test_create_on_a_block_that_begins_tomorrow_builds_the_cluster_and_says_when_the_nodes_come(sandbox, tmp_path,
                                                                                               monkeypatch):
    """PCS (the cheapest backend to create in the sandbox): the node group on a scheduled block is made (AWS PCS
    takes a ``scheduled`` block), no node runs yet, create says when they come and exits 0; status counts down."""
    from fixtures.lifecycle import PcsCli, requests_of

    cli = PcsCli(sandbox, tmp_path)
    bought = _buy_tomorrow(sandbox.client("ec2", REGION))
    rid = bought["CapacityReservationId"]
    data = yaml.safe_load((CONFIGS / "quickstart-pcs.yaml").read_text())
    data["name"] = cli.name
    # a subnet in the block's AZ, as preflight asks ("Launch instances using Capacity Blocks": same AZ)
    data["network"] = {"subnet_id": sandbox.private_network(zone=bought["AvailabilityZone"])["private_subnet"]}
    data["queues"] = [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2,
                       "capacity": {"type": "capacity-block", "reservation_id": rid}}]
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    start = bought["StartDate"].astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        created = _ok(cli.create())
        assert f"Capacity Block {rid} is scheduled; its 2 node(s) come when it starts in " in created.stderr
        assert start in created.stderr, created.stderr
        # status (in this process, each request seen as sent) reads the block inside its read-only pass: no request
        # sent twice, and one DescribeCapacityBlockStatus
        from fmcluster.verbs.lifecycle.status import status

        answers: dict = {}
        sent = requests_of(cli, monkeypatch, lambda: answers.update(report=status(cli.name, refresh=False)))
        assert not {key: n for key, n in sent.items() if n > 1}, sent
        assert sum(n for (operation, _), n in sent.items() if operation == "ec2.DescribeCapacityBlockStatus") == 1
        report = answers["report"]
        assert report["status"] == "ACTIVE" and not report.get("problems"), report
        (block,) = report["capacity_blocks"]
        assert block["state"] == "scheduled" and block["hours_until_start"] > 0 and block["queues"] == ["train"]
        # capacity list names the cluster from its own launch template (PCS's, as fmcluster tags it)
        from fmcluster.aws.capacity_blocks import list_blocks

        listed = {r["reservation_ids"][0]: r for r in list_blocks(sandbox.client("ec2", REGION))}
        assert listed[rid]["clusters"] == [cli.name] and listed[rid]["hours_until_start"] > 0
        # `create --wait` re-run on the made cluster: a --timeout that ends before the block begins says so at once
        from fmcluster.engine import TimedOut
        from fmcluster.spec import load_spec
        from fmcluster.verbs.lifecycle.create import create

        with pytest.raises(TimedOut, match=f"begins {start}, after --timeout 5 min"):
            requests_of(cli, monkeypatch, lambda: create(load_spec(str(cli.spec)).spec, str(cli.spec), yes=True,
                                                         wait=True, timeout_min=5, wait_for_blocks=True))
        # the block's nodes come at its start (only the login node runs: m7i, quickstart-pcs's head_node)
        assert [i for i in cli.inventory()["instances"] if i["InstanceType"] == "p5.48xlarge"] == []

        # the block begins (the sandbox holds it again, now active): PCS launches the nodes, nothing fails
        sandbox.control("POST", "/_fmcluster/capacity-reservations", {
            "reservation_id": rid, "instance_type": "p5.48xlarge", "availability_zone": bought["AvailabilityZone"],
            "count": 2, "type": "capacity-block", "region": REGION,
            "start": (dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)).isoformat(),
            "end": bought["EndDate"].isoformat()})
        inventory = cli.inventory()  # reads PCS's node groups: the group's launches are retried
        train = next(g for g in inventory["node_groups"] if g["name"] == "train")
        group = sandbox.client("pcs").get_compute_node_group(clusterIdentifier=inventory["clusters"][0]["id"],
                                                             computeNodeGroupIdentifier=train["id"])
        assert (group["computeNodeGroup"]["status"], group["computeNodeGroup"].get("errorInfo", [])) == ("ACTIVE", [])
        assert len([i for i in cli.inventory()["instances"] if i["InstanceType"] == "p5.48xlarge"]) == 2
    finally:
        _ok(cli.destroy())


# --- plan ------------------------------------------------------------------------------------------------------
def test_plan_prices_a_bought_block_as_ec2_sells_it_now_and_points_a_queue_without_one_to_capacity_find(sandbox):
    from fmcluster.pricing.capacity_blocks import fetch_capacity_block_prices
    from fmcluster.pricing.rates import PriceBook
    from fmcluster.spec.models import Spec

    ec2 = sandbox.client("ec2", REGION)
    offering = ec2.describe_capacity_block_offerings(
        UltraserverType="u-p6e-gb200x72", UltraserverCount=1, CapacityDurationHours=48)["CapacityBlockOfferings"][0]
    rid = ec2.purchase_capacity_block(CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
                                      InstancePlatform="Linux/UNIX")["CapacityReservation"]["CapacityReservationId"]
    queue = {"name": "train", "instance_type": "p6e-gb200.36xlarge", "nodes": 18,
             "capacity": {"type": "capacity-block", "reservation_id": rid, "ultraserver": "u-p6e-gb200x72"}}
    spec = Spec.model_validate({"name": "gb", "region": REGION, "backend": "pcs", "head_node":
                                {"instance_type": "m7g.2xlarge"}, "queues": [queue]})
    price = fetch_capacity_block_prices(spec, REGION, ec2=ec2)["train"]
    # $10.582 per GPU-hour, 4 GPUs per p6e-gb200.36xlarge (aws.amazon.com/ec2/capacityblocks/pricing, as the
    # sandbox sells it: instance-facts.yaml)
    assert price.usd_per_instance_hour == pytest.approx(4 * 10.582)
    assert f"Capacity Block {rid}: EC2 returns no fee for a bought block" in price.note
    assert "× 48 h" in price.note  # the bought block's own length, not the one-day default

    unbought = Spec.model_validate({"name": "p5", "region": REGION, "backend": "pcs", "queues": [
        {"name": "train", "instance_type": "p5.48xlarge", "nodes": 2, "capacity": {"type": "capacity-block"}}]})
    note = PriceBook(REGION).queue_price(unbought.queues[0]).note
    assert "no block bought yet: `fmcluster capacity find SPEC` lists the offerings" in note


def test_a_queue_whose_block_has_not_begun_is_waiting_not_failing(sandbox):
    """EKS's node group on a block not yet begun reports a launch failure as a health issue ("Create a managed node
    group with Capacity Blocks for ML": the ASG launches once the block is active); fmcluster's EKS status leaves the
    queues this names out of its problems (checked end to end by hand: create on a block starting tomorrow exited 1
    with "AWS reports problems" before, 0 after)."""
    from fmcluster.aws.cluster_blocks import queues_waiting

    now = dt.datetime.now(dt.timezone.utc)
    later = _seed(sandbox, start=now + dt.timedelta(hours=30), end=now + dt.timedelta(hours=54))
    begun = _seed(sandbox, start=now - dt.timedelta(hours=1), end=now + dt.timedelta(hours=23))
    assert queues_waiting(_Ctx(sandbox), _block_spec(later)) == {"train"}
    assert queues_waiting(_Ctx(sandbox), _block_spec(begun)) == set()
