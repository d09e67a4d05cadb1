"""``fmcluster.preflight.reservation_topology``: where a reserved queue's capacity sits in AWS's network, from EC2
DescribeCapacityReservationTopology (the sandbox's, over HTTP).

Each reservation is made in an account nobody used yet (``client_in_a_new_account``), so its zone's layout starts
empty and the layout docs/sandbox-fidelity.md states decides where it lands: 2 instances per bottom node, 2 bottom
nodes per middle, 2 middles per spine, filled in order. So 8 p5.48xlarge sit under one spine, 16 under two (8 + 8):
hand-typed below. The check is run with that account's EC2 client; after it, the test launches into the reservation
and counts the spines itself with plain boto3 DescribeInstanceTopology."""

from __future__ import annotations

import re
from collections import Counter

from botocore.stub import Stubber
from fixtures.preflight import REGION, by_name, fixes_of, preflight_spec, run_checks

from fmcluster.preflight import preflight_failed
from fmcluster.preflight.common import Context
from fmcluster.preflight.reservation_topology import check_reservation_topology

AMI = "ami-12c6146b"  # one of the AMIs every moto region has
ZONE = "us-east-1a"
NODE = re.compile(r"nn-[0-9a-f]{17}")


def _reserve(ec2, count: int, instance_type: str = "p5.48xlarge") -> str:
    return ec2.create_capacity_reservation(InstanceType=instance_type, InstancePlatform="Linux/UNIX",
                                           AvailabilityZone=ZONE, InstanceCount=count)["CapacityReservation"][
        "CapacityReservationId"]


def _queue(name: str, rid: str, nodes: int, instance_type: str = "p5.48xlarge", kind: str = "reservation") -> dict:
    return {"name": name, "instance_type": instance_type, "nodes": nodes,
            "capacity": {"type": kind, "reservation_id": rid}}


def _check(ec2, *queues: dict):
    ctx = Context(spec=preflight_spec(queues=list(queues)), region=REGION, client=lambda service: ec2)
    return check_reservation_topology(ctx)


def _spines_of_launched(ec2, rid: str, count: int) -> Counter:
    """Launch ``count`` instances into ``rid``; how many sit under each spine, from DescribeInstanceTopology."""
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                           {"Name": "availability-zone", "Values": [ZONE]}])["Subnets"][0]["SubnetId"]
    ids = [i["InstanceId"] for i in ec2.run_instances(
        ImageId=AMI, InstanceType="p5.48xlarge", MinCount=count, MaxCount=count, SubnetId=subnet,
        CapacityReservationSpecification={"CapacityReservationTarget": {"CapacityReservationId": rid}})["Instances"]]
    try:
        spines: Counter = Counter()
        for page in ec2.get_paginator("describe_instance_topology").paginate(InstanceIds=ids):
            spines.update(item["NetworkNodes"][0] for item in page["Instances"])
        return spines
    finally:
        ec2.terminate_instances(InstanceIds=ids)


def test_a_reservation_under_one_spine_passes_and_names_it(sandbox):
    ec2 = sandbox.client_in_a_new_account("ec2", REGION)
    rid = _reserve(ec2, 8)
    [check] = _check(ec2, _queue("train", rid, 8))
    assert check.name == "reservation topology train"
    assert check.status == "passed", check
    spine = check.summary.split("sits under 1 spine, ")[1].split(":")[0]
    assert NODE.fullmatch(spine)
    assert check.summary == (f"capacity reservation {rid} (p5.48xlarge) sits under 1 spine, {spine}: 1 of 3 network "
                             "layers shared")
    assert _spines_of_launched(ec2, rid, 8) == Counter({spine: 8})


def test_a_reservation_across_two_spines_warns_with_the_queues_nodes(sandbox):
    ec2 = sandbox.client_in_a_new_account("ec2", REGION)
    rid = _reserve(ec2, 16)
    [check] = _check(ec2, _queue("train", rid, 16))
    assert check.status == "warning", check
    assert check.summary == (f"queue train: capacity reservation {rid} (p5.48xlarge) spans more than 1 spine: a job "
                             "over all 16 nodes crosses the spine layer")
    assert fixes_of(check) and not preflight_failed([check])
    # what AWS does not tell before launch, counted after it: 8 + 8
    assert sorted(_spines_of_launched(ec2, rid, 16).values()) == [8, 8]


def test_a_type_without_topology_is_skipped_without_asking_aws(sandbox):
    ec2 = sandbox.client_in_a_new_account("ec2", REGION)
    general, p5 = _reserve(ec2, 2, "m7i.large"), _reserve(ec2, 2)
    asked: list[list[str]] = []
    ec2.meta.events.register("before-parameter-build.ec2.DescribeCapacityReservationTopology",
                             lambda params, **_: asked.append(params["CapacityReservationIds"]))
    results = _check(ec2, _queue("small", general, 2, "m7i.large"), _queue("train", p5, 2))
    assert [(r.name, r.status) for r in results] == [("reservation topology small", "skipped"),
                                                     ("reservation topology train", "passed")]
    assert results[0].summary == "AWS gives no network topology for m7i.large"
    assert asked == [[p5]]  # one call, for the p5 reservation only
    # 2 instances under one bottom node: all 3 layers shared
    assert results[1].summary.endswith(": 3 of 3 network layers shared")


def test_an_unknown_reservation_beside_a_known_one_is_skipped_and_the_other_still_read(sandbox):
    ec2 = sandbox.client_in_a_new_account("ec2", REGION)
    known, unknown = _reserve(ec2, 8), "cr-0123456789abcdef9"
    results = _check(ec2, _queue("lost", unknown, 2), _queue("train", known, 8))
    assert [r.status for r in results] == ["skipped", "passed"]
    assert results[0].summary == f"AWS did not describe capacity reservation {unknown}'s topology"


def test_aws_refusing_the_read_is_a_warning_naming_the_permission(sandbox):
    ec2 = sandbox.client("ec2", REGION)
    rid = "cr-0123456789abcdef0"
    with Stubber(ec2) as stub:
        stub.add_client_error("describe_capacity_reservation_topology", service_error_code="UnauthorizedOperation",
                              service_message="You are not authorized to perform this operation.",
                              expected_params={"CapacityReservationIds": [rid]})
        [check] = _check(ec2, _queue("train", rid, 2, kind="capacity-block"))
        stub.assert_no_pending_responses()
    assert check.status == "warning", check
    assert check.summary == (f"topology of {rid}: AWS said UnauthorizedOperation: You are not authorized to perform "
                             "this operation.")
    assert fixes_of(check) == ["allow ec2:DescribeCapacityReservationTopology to the credentials fmcluster runs with"]
    assert not preflight_failed([check])


def test_preflight_runs_it_and_a_scheduled_block_is_skipped_for_its_state(sandbox):
    import datetime as dt

    start = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=2)
    rid = sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "region": REGION, "instance_type": "p5.48xlarge", "availability_zone": ZONE, "count": 2,
        "type": "capacity-block", "state": "scheduled", "start": start.isoformat(),
        "end": (start + dt.timedelta(days=1)).isoformat()})["reservation_id"]
    results = run_checks(sandbox, preflight_spec(queues=[_queue("train", rid, 2, kind="capacity-block")]))
    check = by_name(results, "reservation topology train")
    assert check.status == "skipped"
    assert check.summary == (f"Capacity Block {rid} is scheduled: AWS shows a reservation's topology once it is "
                             "active or pending")
    names = [r.name for r in results]
    assert names.index("reservation topology train") == names.index("reservation train") + 1


def test_the_reader_asks_10_ids_at_a_time_and_follows_each_next_token():
    import boto3

    from fmcluster.aws.topology import ReservationPlace, reservation_topology

    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    ids = [f"cr-{n:017x}" for n in range(12)]  # 10 + 2: the API reference's "Maximum 10"

    def answer(*rids: str, token: str | None = None) -> dict:
        return {"CapacityReservations": [{"CapacityReservationId": r, "InstanceType": "p5.48xlarge",
                                          "State": "active", "AvailabilityZone": ZONE, "NetworkNodes": ["nn-a"]}
                                         for r in rids], **({"NextToken": token} if token else {})}

    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_reservation_topology", answer(*ids[:4], token="t1"),
                          {"CapacityReservationIds": ids[:10]})
        stub.add_response("describe_capacity_reservation_topology", answer(*ids[4:10]),
                          {"CapacityReservationIds": ids[:10], "NextToken": "t1"})
        stub.add_response("describe_capacity_reservation_topology", answer(*ids[10:]),
                          {"CapacityReservationIds": ids[10:]})
        places = reservation_topology(ec2, ids)
        stub.assert_no_pending_responses()
    assert list(places) == ids
    assert places[ids[0]] == ReservationPlace(ids[0], "p5.48xlarge", "active", ZONE, ("nn-a",))
