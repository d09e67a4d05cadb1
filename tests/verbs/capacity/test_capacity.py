"""`fmcluster capacity find / buy / extend` against the sandbox: fmcluster's own EC2 calls over HTTP, run through
the command's real entry point (``fmcluster.cli.app.main``) in this process, plus one run of the installed command.

Prices are AWS's published Capacity Block rate for p5.48xlarge, $4.916 per GPU-hour (aws.amazon.com/ec2/
capacityblocks/pricing, "Effective Accelerator Hourly Rate"), which the sandbox charges, and fmcluster's bundled
On-Demand price for it, $55.04 per instance-hour (us-east-1, catalog as of 2026-09-19)."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from fixtures.capacity import fm, offering, reservations

P5_GPU_HOUR = 4.916
P5_DAY_FOR_TWO = 1887.74  # 4.916 $/GPU-h x 8 GPUs x 2 instances x 24 h = 1887.744
P5_RATIO = 0.715  # 39.328 $/instance-h (4.916 x 8) / 55.04 On-Demand = 0.7145…


@pytest.fixture
def run(sandbox_env, capsys, monkeypatch):
    return lambda *args: fm(capsys, monkeypatch, *args)


# --- find ----------------------------------------------------------------------------------------------------


def test_find_lists_offerings_from_both_regions_with_their_prices(run):
    code, out, err = run("capacity", "find", "--instance-type", "p5.48xlarge", "--count", "2", "--hours", "24",
                         "--regions", "us-east-1,us-east-2", "--json")
    assert code == 0, err
    offers = json.loads(out)["offerings"]
    assert {o["region"] for o in offers} == {"us-east-1", "us-east-2"}
    for offer in offers:
        assert offer["offering_id"].startswith("cb-") and offer["availability_zone"].startswith(offer["region"])
        assert offer["instance_count"] == 2 and offer["start"] < offer["end"]
        assert offer["usd_per_accelerator_hour"] == pytest.approx(P5_GPU_HOUR, abs=1e-3)
        assert offer["ratio_to_on_demand"] == pytest.approx(P5_RATIO, abs=1e-3)
    whole_days = [o for o in offers if (o["duration_hours"], o["duration_minutes"]) == (24, 0)]
    assert whole_days and all(o["upfront_fee"] == P5_DAY_FOR_TWO for o in whole_days)
    assert [o["start"] for o in offers] == sorted(o["start"] for o in offers)


@pytest.mark.parametrize("args, shape, per_accelerator_hour, kind", [
    # u-p6e-gb200x72: 18 p6e-gb200.36xlarge of 4 GPUs, sold in the Dallas Local Zone at $10.582 per GPU-hour
    # (instance-facts.yaml); found with AllAvailabilityZones although the account has not opted in to the zone.
    (["--ultraserver-type", "u-p6e-gb200x72", "--ultraservers", "1"], ("us-east-1-dfw-2a", 18, 1), 10.582, "gpu"),
    # trn1.32xlarge: 16 Trainium chips at $0.968 per chip-hour (aws.amazon.com/ec2/capacityblocks/pricing).
    (["--instance-type", "trn1.32xlarge", "--count", "1"], ("us-east-1b", 1, None), 0.968, "trainium"),
])
def test_find_prices_per_accelerator_hour(run, args, shape, per_accelerator_hour, kind):
    code, out, err = run("capacity", "find", *args, "--json")
    assert code == 0, err
    offers = json.loads(out)["offerings"]
    assert shape in {(o["availability_zone"], o["instance_count"], o["ultraserver_count"]) for o in offers}
    for offer in offers:
        assert offer["usd_per_accelerator_hour"] == pytest.approx(per_accelerator_hour, abs=1e-3)
        assert offer["accelerator_kind"] == kind


def test_find_for_a_spec_searches_each_capacity_block_queue(run, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: blocks\nregion: us-east-2\nbackend: pcs\nqueues:\n"
                    "  - {name: train, instance_type: p5.48xlarge, nodes: 4, capacity: {type: capacity-block}}\n"
                    "  - {name: cpu, instance_type: c7i.2xlarge, nodes: 2}\n")
    code, out, err = run("capacity", "find", str(spec), "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["searched"]["regions"] == ["us-east-2"]
    assert [(s["queue"], s["instance_type"], s["count"]) for s in answer["searched"]["searches"]] == [
        ("train", "p5.48xlarge", 4)]
    assert answer["offerings"] and {(o["queue"], o["region"], o["instance_count"]) for o in answer["offerings"]} == {
        ("train", "us-east-2", 4)}


def test_an_empty_answer_says_what_was_searched_and_what_to_widen(run):
    # EC2 sells p5e.48xlarge Capacity Blocks in us-east-2 only (EC2 user guide), so us-east-1 offers none.
    code, out, err = run("capacity", "find", "--instance-type", "p5e.48xlarge", "--count", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["offerings"] == []
    flat = " ".join(err.split())
    assert "no Capacity Block offerings for 1 × p5e.48xlarge for 24 h in us-east-1" in flat
    assert "--regions" in flat and "p5e.48xlarge in us-east-2" in flat


# --- bad input: one line, exit 2, nothing bought -------------------------------------------------------------


@pytest.mark.parametrize("args, said", [
    (["--hours", "36"], "whole days only"),
    (["--days", "15"], "nearest: --days 14 or --days 21"),
    (["--hours", str(183 * 24)], "AWS does not sell it"),
    (["--count", "65"], "1 to 64 instances"),
    (["--count", "0"], "1 to 64 instances"),
    (["--start-after", "2020-01-01"], "in the past"),
    (["--start-after", "+3d", "--end-before", "+2d"], "is not before --end-before"),
    (["--start-after", "+70d"], "at most eight weeks ahead"),
])
def test_find_refuses_what_aws_does_not_sell(run, args, said):
    code, out, err = run("capacity", "find", "--instance-type", "p5.48xlarge", *args)
    assert code == 2 and out == "", err
    assert said in " ".join(err.split()) and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("instance_type, said", [
    ("p5.48xlarg", "unknown instance type (did you mean 'p5.48xlarge'?)"),
    ("m7i.large", "EC2 does not sell it as Capacity Blocks (its usage classes: on-demand, spot)"),
    ("p6e-gb200.36xlarge", "sold only as EC2 UltraServers; use --ultraserver-type"),
])
def test_find_refuses_a_type_capacity_blocks_do_not_offer(run, instance_type, said):
    code, _, err = run("capacity", "find", "--instance-type", instance_type, "--count", "1")
    assert code == 2 and said in " ".join(err.split()), err


def test_buy_refuses_bad_offering_ids_and_queues_before_buying(run, sandbox, tmp_path):
    from fmcluster.verbs.capacity import offerings

    before = reservations(sandbox)
    code, _, err = run("capacity", "buy", "cb-123")
    assert code == 2 and "is not a Capacity Block offering id" in err, err
    code, _, err = run("capacity", "buy", "cb-0123456789abcdef0", "--yes")
    assert code == 2 and "is not one `fmcluster capacity find` listed" in " ".join(err.split()), err
    # An offering found earlier whose start has passed.
    past = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)
    stale = {"offering_id": "cb-00000000000000001", "region": "us-east-1", "start": past.isoformat(),
             "end": (past + dt.timedelta(days=1)).isoformat()}
    offerings.remember([stale], dt.datetime.now(dt.timezone.utc))
    code, _, err = run("capacity", "buy", "cb-00000000000000001", "--yes")
    assert code == 2 and "has expired" in err, err
    offer = offering(run)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: s\nregion: us-east-1\nbackend: pcs\nqueues:\n"
                    "  - {name: cpu, instance_type: p5.48xlarge, nodes: 2}\n")
    code, _, err = run("capacity", "buy", offer["offering_id"], "--yes", "--spec", str(spec), "--queue", "cpu")
    assert code == 2 and "has capacity type 'on-demand', not 'capacity-block'" in err, err
    code, _, err = run("capacity", "buy", offer["offering_id"], "--yes", "--spec", str(spec), "--queue", "train")
    assert code == 2 and "no queue named 'train' (its queues: cpu)" in err, err
    assert reservations(sandbox) == before


def test_an_offering_aws_does_not_know_is_named_as_its_answer(run, sandbox):
    """The id passes fmcluster's checks (found earlier, not started), but EC2 never offered it: EC2's refusal is
    shown as EC2's, with what to do next, and nothing is bought."""
    from fmcluster.verbs.capacity import offerings

    start = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    offerings.remember([{"offering_id": "cb-00000000000000002", "region": "us-east-1", "start": start.isoformat(),
                         "end": (start + dt.timedelta(days=1)).isoformat()}], dt.datetime.now(dt.timezone.utc))
    before = reservations(sandbox)
    code, _, err = run("capacity", "buy", "cb-00000000000000002", "--yes")
    flat = " ".join(err.split())
    assert code == 2 and "EC2 refused PurchaseCapacityBlock for cb-00000000000000002: InvalidParameterValue" in flat
    assert "run `fmcluster capacity find` again" in flat
    assert reservations(sandbox) == before


# --- buy -----------------------------------------------------------------------------------------------------


def test_buy_dry_run_and_no_terminal_buy_nothing(run, sandbox):
    offer = offering(run)
    before = reservations(sandbox)
    code, out, err = run("capacity", "buy", offer["offering_id"], "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["would_succeed"] is True
    flat = " ".join(err.split())
    assert f"charged now: ${P5_DAY_FOR_TWO:,.2f} upfront" in flat and "not refundable" in flat
    code, _, err = run("capacity", "buy", offer["offering_id"])  # no --yes, and no terminal to ask on
    assert code == 2 and "re-run with --yes" in err, err
    assert reservations(sandbox) == before


SPEC = """\
# Two p5 nodes on a Capacity Block.
name: on-a-block   # unique per Region
region: us-east-1
backend: pcs
network:
  subnet_id: {subnet}
queues:
  - name: train            # the training queue
    instance_type: p5.48xlarge
    nodes: 2
    capacity:
      type: capacity-block
      reservation_id: cr-0123456789abcdef0   # a placeholder until bought
  - name: debug
    instance_type: c7i.2xlarge
    nodes: {{min: 0, max: 2}}
"""


def test_buy_writes_the_reservation_into_the_spec_keeping_its_comments(run, sandbox, tmp_path):
    ec2 = sandbox.client("ec2")
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                           {"Name": "availability-zone", "Values": ["us-east-1a"]}])["Subnets"][0]
    spec = tmp_path / "spec.yaml"
    text = SPEC.format(subnet=subnet["SubnetId"])
    spec.write_text(text)
    offer = offering(run, zone="us-east-1a")  # the spec's subnet's AZ (tests/aws/test_network_follows_capacity.py
    before = reservations(sandbox)            # has the refusal of another AZ)
    code, out, err = run("capacity", "buy", offer["offering_id"], "--yes", "--spec", str(spec), "--queue", "train",
                         "--json")
    assert code == 0, err
    bought = json.loads(out)
    rid = bought["reservation_id"]
    assert reservations(sandbox) == sorted([*before, rid])
    assert (bought["availability_zone"], bought["instance_count"]) == ("us-east-1a", 2)
    assert spec.read_text() == text.replace("cr-0123456789abcdef0", rid)
    block = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]
    assert (block["ReservationType"], block["State"]) == ("capacity-block", "scheduled")


# --- extend --------------------------------------------------------------------------------------------------


def test_extend_shows_the_price_then_moves_the_end(run, sandbox):
    ec2 = sandbox.client("ec2")
    offer = offering(run)
    rid = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["offering_id"],
                                      InstancePlatform="Linux/UNIX")["CapacityReservation"]["CapacityReservationId"]
    end = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]["EndDate"]
    code, out, err = run("capacity", "extend", rid, "--hours", "24", "--dry-run", "--json")
    assert code == 0, err
    chosen = json.loads(out)["chosen"]
    assert chosen["upfront_fee"] == P5_DAY_FOR_TWO and chosen["hours"] == 24
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0][
        "EndDate"] == end
    code, _, err = run("capacity", "extend", rid, "--hours", "36", "--dry-run")
    assert code == 2 and "whole days only" in err, err
    code, out, err = run("capacity", "extend", rid, "--days", "1", "--yes", "--json")
    assert code == 0, err
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0][
        "EndDate"] == end + dt.timedelta(days=1)
    # A fresh id: the examples' cr-0123456789abcdef0 may be seeded in this worker's sandbox (test_validate_examples).
    unknown = "cr-" + uuid.uuid4().hex[:17]
    code, _, err = run("capacity", "extend", unknown, "--days", "1", "--dry-run")
    assert code == 2 and "InvalidCapacityReservationId.NotFound" in err, err


@pytest.mark.parametrize("command, taught", [
    ("find", ["--instance-type", "--ultraserver-type", "--regions", "--start-after", "GPU-hour", "Example"]),
    ("buy", ["--dry-run", "not refundable", "--spec", "--queue", "Example"]),
    ("extend", ["--hours", "--days", "DryRun", "Example"]),
])
def test_help_teaches(capsys, monkeypatch, command, taught):
    code, out, _ = fm(capsys, monkeypatch, "capacity", command, "--help")
    flat = " ".join(out.split())
    assert code == 0 and all(word in flat for word in taught), flat
