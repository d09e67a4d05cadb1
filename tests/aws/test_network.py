"""``fmcluster.aws.placement.resolve_placement``: without a subnet in the spec, the default VPC's subnet in the AZ
of the spec's reservations (reserved capacity is usable only there), else in the first AZ offering every type.

Real boto3 against the sandbox over HTTP; Capacity Blocks are seeded through the control route
``POST /_fmcluster/capacity-reservations`` under fresh ids (AWS cannot cancel a Capacity Block, so they
stay, under ids no other test uses). In the sandbox, p5en.48xlarge is offered in us-east-1a and us-east-1c
only; p5.48xlarge and m7i.2xlarge in us-east-1a–c too.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from fmcluster.aws.placement import reservation_zone, resolve_placement
from fmcluster.backends import registry
from fmcluster.errors import UsageError
from fmcluster.preflight import preflight_failed, run_preflight
from fmcluster.spec.models import Spec

REGION = "us-east-1"


@pytest.fixture
def seed(sandbox):
    """``seed(zone, instance_type=…)`` → the id of a fresh active Capacity Block there."""

    def seed(zone: str, instance_type: str = "p5en.48xlarge") -> str:
        now = dt.datetime.now(dt.timezone.utc)
        return sandbox.control("POST", "/_fmcluster/capacity-reservations", {
            "instance_type": instance_type, "availability_zone": zone, "count": 2, "type": "capacity-block",
            "state": "active", "start": (now - dt.timedelta(hours=1)).isoformat(),
            "end": (now + dt.timedelta(hours=23)).isoformat(), "reservation_id": "cr-" + uuid.uuid4().hex[:17],
            "region": REGION})["reservation_id"]

    return seed


def _spec(*queues: tuple[str, str | None], **changes) -> Spec:
    """A spec with one queue per (instance type, reservation id or None)."""
    data = {
        "name": f"net-{uuid.uuid4().hex[:8]}",
        "region": REGION,
        "backend": "pcs",
        "head_node": {"instance_type": "m7i.2xlarge"},
        "queues": [{"name": f"q{i}", "instance_type": itype, "nodes": 2,
                    **({"capacity": {"type": "capacity-block", "reservation_id": rid}} if rid else {})}
                   for i, (itype, rid) in enumerate(queues)],
    }
    data.update(changes)
    return Spec.model_validate(data)


def test_without_reservations_the_first_zone_offering_every_type_wins(sandbox):
    placement = resolve_placement(_spec(("p5en.48xlarge", None)), sandbox.client("ec2", REGION))
    assert placement.availability_zone == "us-east-1a"


def test_a_capacity_block_in_another_zone_moves_the_placement_there(sandbox, seed):
    ec2 = sandbox.client("ec2", REGION)
    # The network fmcluster creates goes to the block's zone too.
    assert resolve_placement(_spec(("p5en.48xlarge", seed("us-east-1c"))), ec2).availability_zone == "us-east-1c"
    spec = _spec(("p5en.48xlarge", seed("us-east-1c")), network={"create_vpc": False})
    placement = resolve_placement(spec, ec2)
    assert placement.availability_zone == "us-east-1c"
    subnet = ec2.describe_subnets(SubnetIds=[placement.subnet_id])["Subnets"][0]
    assert (subnet["AvailabilityZone"], subnet["VpcId"], subnet["DefaultForAz"]) == \
        ("us-east-1c", placement.vpc_id, True)


def test_preflight_of_a_spec_without_subnet_passes_in_the_blocks_zone(sandbox, seed):
    spec = _spec(("p5en.48xlarge", seed("us-east-1c")))
    results = run_preflight(spec, REGION, lambda service: sandbox.client(service, REGION),
                            registry.get(spec.backend).checks)
    assert not preflight_failed(results), [(r.name, r.summary) for r in results if r.status == "failed"]
    by_name = {r.name: r for r in results}
    assert "us-east-1c" in by_name["subnet"].summary
    assert by_name["reservation q0"].status == "passed"
    assert by_name["reservation q0"].summary.endswith("in us-east-1c, active")


def test_several_reservations_in_one_zone_choose_it(sandbox, seed):
    spec = _spec(("p5en.48xlarge", seed("us-east-1c")), ("p5.48xlarge", seed("us-east-1c", "p5.48xlarge")),
                 ("p5.48xlarge", None))
    assert reservation_zone(spec, sandbox.client("ec2", REGION)) == "us-east-1c"
    assert resolve_placement(spec, sandbox.client("ec2", REGION)).availability_zone == "us-east-1c"


def test_reservations_in_different_zones_fall_back_to_the_first_zone(sandbox, seed):
    spec = _spec(("p5.48xlarge", seed("us-east-1b", "p5.48xlarge")),
                 ("p5.48xlarge", seed("us-east-1c", "p5.48xlarge")))
    ec2 = sandbox.client("ec2", REGION)
    assert reservation_zone(spec, ec2) is None
    assert resolve_placement(spec, ec2).availability_zone == "us-east-1a"


def test_a_reservation_in_a_zone_that_does_not_offer_its_type_is_refused_naming_the_zones(sandbox, seed):
    # p5en.48xlarge is not offered in us-east-1b (seeded there as AWS would not sell it): no network can use it,
    # and the refusal names the reservation's AZ and where the type is offered (moto's copy of AWS's
    # DescribeInstanceTypeOfferings: p5en.48xlarge in us-east-1a and us-east-1c).
    spec = _spec(("p5en.48xlarge", seed("us-east-1b")))
    with pytest.raises(UsageError, match=r"in us-east-1b, which does not offer p5en.48xlarge \(p5en.48xlarge in "
                                         r"us-east-1a, us-east-1c\)"):
        resolve_placement(spec, sandbox.client("ec2", REGION))
    results = run_preflight(spec, REGION, lambda service: sandbox.client(service, REGION),
                            registry.get(spec.backend).checks)
    check = next(r for r in results if r.name == "subnet")
    assert check.status == "failed"
    assert "which does not offer p5en.48xlarge" in check.summary and "${" not in check.summary


def test_an_unknown_reservation_falls_back_quietly(sandbox):
    spec = _spec(("p5en.48xlarge", "cr-" + uuid.uuid4().hex[:17]))
    ec2 = sandbox.client("ec2", REGION)
    assert reservation_zone(spec, ec2) is None
    assert resolve_placement(spec, ec2).availability_zone == "us-east-1a"


def test_a_subnet_in_the_spec_wins_over_the_reservations_zone(sandbox, seed):
    ec2 = sandbox.client("ec2", REGION)
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                           {"Name": "availability-zone", "Values": ["us-east-1a"]}])["Subnets"][0]
    spec = _spec(("p5en.48xlarge", seed("us-east-1c")), network={"subnet_id": subnet["SubnetId"]})
    assert resolve_placement(spec, ec2).subnet_id == subnet["SubnetId"]
