"""``fmcluster.preflight.reservation_topology``: where a reserved queue's capacity sits in AWS's network, from EC2
DescribeCapacityReservationTopology (the sandbox's, over HTTP).

Each reservation is made in an account nobody used yet (``client_in_a_new_account``/``new_account_env``), so its
zone's layout starts empty and the layout docs/sandbox-fidelity.md states decides where it lands: 2 instances per
bottom node, 2 bottom nodes per middle, 2 middles per spine (8 per spine), filled in order. So a reservation of 8
p5.48xlarge sits under one spine, and a group of two such reservations sits under two: hand-typed below. Whether a
reservation across two spines gets an empty node set is the sandbox's modelling choice, not AWS's word (AWS documents
empty only for an unsupported type or a state other than active/pending): the check must say "no topology", never
"spread", for it."""

from __future__ import annotations

import re

import boto3
from botocore.awsrequest import AWSResponse
from fixtures.preflight import REGION, by_name, fixes_of, preflight_spec, run_checks

from fmcluster.preflight import preflight_failed
from fmcluster.preflight.common import Context
from fmcluster.preflight.reservation_topology import check_reservation_topology

ZONE = "us-east-1a"
NODE = r"nn-[0-9a-f]{17}"
POOL = [{"Type": "AWS::EC2::CapacityReservationPool"},
        {"Type": "AWS::ResourceGroups::Generic",
         "Parameters": [{"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}]}]


def _fresh_account(sandbox):
    """One new account's clients (ec2 and resource-groups must share it): service name -> client."""
    env = sandbox.new_account_env()
    session = boto3.session.Session(aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                                    aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                                    aws_session_token=env["AWS_SESSION_TOKEN"], region_name=REGION)
    made: dict = {}

    def client(service: str):
        if service not in made:
            made[service] = session.client(service, endpoint_url=sandbox.endpoint_url,
                                           verify=sandbox.ca_bundle or False)
        return made[service]

    return client


def _reserve(ec2, count: int, instance_type: str = "p5.48xlarge") -> dict:
    return ec2.create_capacity_reservation(InstanceType=instance_type, InstancePlatform="Linux/UNIX",
                                           AvailabilityZone=ZONE, InstanceCount=count,
                                           InstanceMatchCriteria="targeted")["CapacityReservation"]


def _queue(name: str, nodes: int, instance_type: str = "p5.48xlarge", kind: str = "reservation", **capacity) -> dict:
    return {"name": name, "instance_type": instance_type, "nodes": nodes, "capacity": {"type": kind, **capacity}}


def _check(client, *queues: dict):
    return check_reservation_topology(Context(spec=preflight_spec(queues=list(queues)), region=REGION,
                                              client=client))


def test_a_reservation_under_one_spine_passes_and_names_it(sandbox):
    client = _fresh_account(sandbox)
    rid = _reserve(client("ec2"), 8)["CapacityReservationId"]
    [check] = _check(client, _queue("train", 8, reservation_id=rid))
    assert check.name == "reservation topology train"
    assert check.status == "passed", check
    # 8 instances fill one spine's two middles: only the spine is common to all of them (1 of p5's 3 layers)
    assert re.fullmatch(rf"capacity reservation {rid} \(p5\.48xlarge\) sits under one spine, {NODE}: AWS names 1 "
                        r"of its 3 network layers", check.summary), check.summary


def test_a_group_of_two_reservations_under_two_spines_warns_with_each_spines_reservations(sandbox):
    client = _fresh_account(sandbox)
    ec2, groups = client("ec2"), client("resource-groups")
    first, second = _reserve(ec2, 8), _reserve(ec2, 8)
    arn = groups.create_group(Name="odcrs", Configuration=POOL)["Group"]["GroupArn"]
    groups.group_resources(Group=arn, ResourceArns=[first["CapacityReservationArn"], second["CapacityReservationArn"]])
    a, b = first["CapacityReservationId"], second["CapacityReservationId"]
    [check] = _check(client, _queue("train", 16, resource_group_arn=arn))
    assert check.status == "warning", check
    found = re.fullmatch(rf"queue train: (cr-\w+) \(8\) under spine ({NODE}), (cr-\w+) \(8\) under spine ({NODE}): "
                         r"a job over all 16 nodes crosses the spine layer", check.summary)
    assert found, check.summary
    assert {found[1], found[3]} == {a, b} and found[2] != found[4]
    # the spines named are AWS's (the sandbox's) own answer, read with plain boto3
    answer = ec2.describe_capacity_reservation_topology(CapacityReservationIds=[a, b])["CapacityReservations"]
    assert {r["CapacityReservationId"]: r["NetworkNodes"][0] for r in answer} == {found[1]: found[2],
                                                                                  found[3]: found[4]}
    assert fixes_of(check) and not preflight_failed([check])
    # 8 nodes fit under either spine, but EC2 may launch into any of the group's reservations
    [check] = _check(client, _queue("train", 8, resource_group_arn=arn))
    assert check.status == "warning", check
    assert check.summary.endswith(": its 8 nodes fit under one spine, but EC2 launches into any reservation of the "
                                  "group with free capacity, so they may land under several"), check.summary


def test_a_group_under_one_spine_passes(sandbox):
    client = _fresh_account(sandbox)
    ec2, groups = client("ec2"), client("resource-groups")
    first, second = _reserve(ec2, 4), _reserve(ec2, 4)  # 4 + 4: one spine's 8 slots
    arn = groups.create_group(Name="odcrs", Configuration=POOL)["Group"]["GroupArn"]
    groups.group_resources(Group=arn, ResourceArns=[first["CapacityReservationArn"], second["CapacityReservationArn"]])
    [check] = _check(client, _queue("train", 8, resource_group_arn=arn))
    assert check.status == "passed", check
    assert re.fullmatch(rf"queue train: capacity reservation group odcrs's reservations cr-\w+ \(4\) \+ cr-\w+ \(4\) "
                        rf"under spine {NODE}", check.summary), check.summary


def test_an_empty_topology_is_said_plainly_and_does_not_warn(sandbox):
    client = _fresh_account(sandbox)
    rid = _reserve(client("ec2"), 16)["CapacityReservationId"]  # the sandbox answers no node set for 16 (its choice)
    [check] = _check(client, _queue("train", 16, reservation_id=rid))
    assert check.status == "skipped", check
    assert check.summary == f"AWS gave no topology for capacity reservation {rid} (p5.48xlarge, active)"
    assert "spine" not in check.summary and not any("spine" in d or "spans" in d for d in check.details)
    assert check.details[0] == ("the EC2 API reference gives two reasons for an empty answer: the instance type is "
                                "not supported, or the reservation is in a state other than active or pending; it "
                                "is not a statement about where the capacity sits")


def test_a_group_member_without_topology_is_named_not_counted_as_spread(sandbox):
    client = _fresh_account(sandbox)
    ec2, groups = client("ec2"), client("resource-groups")
    wide, one = _reserve(ec2, 16), _reserve(ec2, 8)  # 16 fill two spines (no node set: the sandbox's choice), 8 a third
    arn = groups.create_group(Name="odcrs", Configuration=POOL)["Group"]["GroupArn"]
    groups.group_resources(Group=arn, ResourceArns=[wide["CapacityReservationArn"], one["CapacityReservationArn"]])
    [check] = _check(client, _queue("train", 24, resource_group_arn=arn))
    assert check.status == "passed", check
    assert re.fullmatch(rf"queue train: capacity reservation group odcrs's reservations {one['CapacityReservationId']} "
                        rf"\(8\) under spine {NODE}; AWS gave no topology for {wide['CapacityReservationId']} "
                        r"\(16\)", check.summary), check.summary
    assert f"AWS gave no topology for {wide['CapacityReservationId']} (16): the EC2 API reference gives two reasons" \
        in "\n".join(check.details), check.details


def test_a_group_that_cannot_be_read_is_left_to_the_reservation_check(sandbox):
    client = _fresh_account(sandbox)
    arn = f"arn:aws:resource-groups:{REGION}:123456789012:group/no-such-group"
    [check] = _check(client, _queue("train", 2, resource_group_arn=arn))
    assert (check.status, check.summary, check.details) == (
        "skipped", "capacity reservation group no-such-group could not be read",
        ["the check `reservation train` says why"])


def test_an_unknown_reservation_is_left_to_the_reservation_check(sandbox):
    client = _fresh_account(sandbox)
    unknown = "cr-0123456789abcdef9"
    [check] = _check(client, _queue("lost", 2, reservation_id=unknown))
    assert (check.status, check.summary) == ("skipped", f"AWS did not describe capacity reservation {unknown}'s "
                                                        "topology")


def test_a_type_without_topology_is_skipped_without_asking_aws(sandbox):
    client = _fresh_account(sandbox)
    ec2 = client("ec2")
    general, p5 = _reserve(ec2, 2, "m7i.large")["CapacityReservationId"], _reserve(ec2, 2)["CapacityReservationId"]
    asked: list[list[str]] = []
    ec2.meta.events.register("before-parameter-build.ec2.DescribeCapacityReservationTopology",
                             lambda params, **_: asked.append(params["CapacityReservationIds"]))
    results = _check(client, _queue("small", 2, "m7i.large", reservation_id=general),
                     _queue("train", 2, reservation_id=p5))
    assert [(r.name, r.status) for r in results] == [("reservation topology small", "skipped"),
                                                     ("reservation topology train", "passed")]
    assert results[0].summary == "AWS gives no network topology for m7i.large"
    assert asked == [[p5]]  # one call, for the p5 reservation only
    # 2 instances under one bottom node: all 3 layers named
    assert results[1].summary.endswith(": AWS names 3 of its 3 network layers")


def _refuse(model=None, **_):
    """What AWS answers a caller without ec2:DescribeCapacityReservationTopology (EC2 API reference, "Error codes":
    UnauthorizedOperation, HTTP 403), in EC2's error shape as botocore parses it."""
    if model is None or model.name != "DescribeCapacityReservationTopology":
        return None
    return (AWSResponse(f"https://ec2.{REGION}.amazonaws.com/", 403, {}, None),
            {"Error": {"Code": "UnauthorizedOperation", "Message": "You are not authorized to perform this "
                       "operation."}, "ResponseMetadata": {"HTTPStatusCode": 403}})


def test_aws_refusing_the_read_is_a_warning_naming_the_permission(sandbox):
    client = _fresh_account(sandbox)
    rid = _reserve(client("ec2"), 2)["CapacityReservationId"]
    client("ec2").meta.events.register("before-call.ec2.DescribeCapacityReservationTopology", _refuse)
    [check] = _check(client, _queue("train", 2, reservation_id=rid))
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
    results = run_checks(sandbox, preflight_spec(queues=[_queue("train", 2, kind="capacity-block",
                                                                reservation_id=rid)]))
    check = by_name(results, "reservation topology train")
    assert check.status == "skipped"
    assert check.summary == (f"Capacity Block {rid} is scheduled: AWS shows a reservation's topology once it is "
                             "active or pending")
    names = [r.name for r in results]
    assert names.index("reservation topology train") == names.index("reservation train") + 1


def test_the_reader_asks_10_ids_at_a_time_and_follows_each_next_token():
    from botocore.stub import Stubber

    from fmcluster.aws.topology import ReservationPlace, reservation_topology

    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    ids = [f"cr-{n:017x}" for n in range(12)]  # 10 + 2: botocore's model, "Maximum 10"

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
