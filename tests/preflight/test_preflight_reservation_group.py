"""Preflight of a queue that launches into a Capacity Reservation group (``capacity.resource_group_arn``),
against the sandbox over HTTP: the group is made as a team makes it (Resource Groups CreateGroup with the
``AWS::EC2::CapacityReservationPool`` configuration, GroupResources of ODCRs from CreateCapacityReservation)."""

from __future__ import annotations

import uuid

import pytest
from fixtures.preflight import REGION, by_name, fixes_of, preflight_spec, private_subnet, run_checks

POOL = [{"Type": "AWS::EC2::CapacityReservationPool"},
        {"Type": "AWS::ResourceGroups::Generic",
         "Parameters": [{"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}]}]


class Groups:
    """Makes ODCRs and groups them; deletes the groups and cancels the ODCRs afterwards."""

    def __init__(self, sandbox):
        self.ec2, self.groups = sandbox.client("ec2", REGION), sandbox.client("resource-groups", REGION)
        self.reservations: list[str] = []
        self.names: list[str] = []

    def make(self, *sizes: int, instance_type: str = "p5.48xlarge", zone: str = "us-east-1a",
             configuration=POOL) -> str:
        name = f"pf-odcrs-{uuid.uuid4().hex[:8]}"
        arn = self.groups.create_group(Name=name, Configuration=configuration)["Group"]["GroupArn"]
        self.names.append(name)
        arns = []
        for size in sizes:
            made = self.ec2.create_capacity_reservation(
                InstanceType=instance_type, InstancePlatform="Linux/UNIX", AvailabilityZone=zone,
                InstanceCount=size, InstanceMatchCriteria="targeted")["CapacityReservation"]
            self.reservations.append(made["CapacityReservationId"])
            arns.append(made["CapacityReservationArn"])
        if arns:
            self.groups.group_resources(Group=arn, ResourceArns=arns)
        return arn

    def cleanup(self) -> None:
        for name in self.names:
            self.groups.delete_group(Group=name)
        for rid in self.reservations:
            self.ec2.cancel_capacity_reservation(CapacityReservationId=rid)


@pytest.fixture
def groups(sandbox):
    made = Groups(sandbox)
    try:
        yield made
    finally:
        made.cleanup()


def _grouped(sandbox, arn: str, *, nodes: int = 3, instance_type: str = "p5.48xlarge", zone: str = "us-east-1a"):
    spec = preflight_spec(network={"subnet_id": private_subnet(sandbox, zone)},
                          queues=[{"name": "train", "instance_type": instance_type, "nodes": nodes,
                                   "capacity": {"type": "reservation", "resource_group_arn": arn}}])
    results = run_checks(sandbox, spec)
    return results, by_name(results, "reservation train")


def test_group_with_enough_reservations_passes(sandbox, groups):
    arn = groups.make(2, 1)
    name = arn.rsplit("/", 1)[-1]
    results, check = _grouped(sandbox, arn, nodes=3)
    assert check.status == "passed", check
    assert check.summary == f"capacity reservation group {name}: 3 × p5.48xlarge in us-east-1a reserved, 3 free"
    assert [d.split(":")[0] for d in check.details] == groups.reservations
    quota_notes = [d for r in results if r.name.startswith("vcpu quota") for d in r.details]
    assert any(f"launches into reservation group {arn}" in d for d in quota_notes)


def test_missing_group_fails_with_the_fix(sandbox):
    arn = f"arn:aws:resource-groups:{REGION}:123456789012:group/no-such-group-{uuid.uuid4().hex[:6]}"
    _, check = _grouped(sandbox, arn)
    assert check.status == "failed"
    assert check.summary.startswith("capacity reservation group no-such-group-")
    assert "AWS said NotFoundException" in check.summary
    fixes = fixes_of(check)
    assert any("aws resource-groups create-group" in f and "AWS::EC2::CapacityReservationPool" in f
               and "queues[0].capacity.resource_group_arn" in f for f in fixes), fixes


def test_wrong_instance_type_fails(sandbox, groups):
    arn = groups.make(4, instance_type="p5en.48xlarge")
    _, check = _grouped(sandbox, arn, nodes=2)
    assert check.status == "failed"
    assert check.summary.endswith("holds no active p5.48xlarge reservation in us-east-1a")
    assert any("p5en.48xlarge × 4 in us-east-1a, active, 4 free: not usable, the queue runs p5.48xlarge" in d
               for d in check.details), check.details
    assert any("--instance-type p5.48xlarge" in f and "--instance-count 2" in f for f in fixes_of(check))


def test_reservations_in_another_az_do_not_count(sandbox, groups):
    arn = groups.make(4, zone="us-east-1b")
    _, check = _grouped(sandbox, arn, nodes=2)
    assert check.status == "failed"
    assert any(d.endswith("not usable, the subnet is in us-east-1a") for d in check.details), check.details


def test_too_few_instances_warns_how_many_run_on_demand(sandbox, groups):
    """EC2 runs what the group cannot hold On-Demand (it does not refuse it): a warning with the fix."""
    arn = groups.make(2, 1)
    _, check = _grouped(sandbox, arn, nodes=5)
    assert check.status == "warning"
    assert check.summary.endswith("reserves 3 p5.48xlarge in us-east-1a, queue train goes up to 5: 2 would run "
                                  "On-Demand")
    assert "EC2 runs the nodes beyond the group's free reservations On-Demand" in check.details
    fixes = fixes_of(check)
    assert any("--instance-count 2" in f and "set queues[0].nodes to at most 3" in f for f in fixes), fixes


def test_group_without_reservations_fails(sandbox, groups):
    arn = groups.make()
    _, check = _grouped(sandbox, arn)
    assert check.status == "failed"
    assert check.summary.endswith("holds no capacity reservations")
    assert any("aws resource-groups group-resources" in f for f in fixes_of(check))


def test_tag_query_group_is_not_a_reservation_group(sandbox):
    client = sandbox.client("resource-groups", REGION)
    name = f"pf-tags-{uuid.uuid4().hex[:8]}"
    arn = client.create_group(Name=name, ResourceQuery={
        "Type": "TAG_FILTERS_1_0", "Query": '{"ResourceTypeFilters":["AWS::AllSupported"],"TagFilters":[]}'})[
        "Group"]["GroupArn"]
    try:
        _, check = _grouped(sandbox, arn)
    finally:
        client.delete_group(Group=name)
    assert check.status == "failed"
    assert "is not a Capacity Reservation group (no AWS::EC2::CapacityReservationPool configuration)" in check.summary


def test_cancelled_member_does_not_count(sandbox, groups):
    arn = groups.make(2, 2)
    groups.ec2.cancel_capacity_reservation(CapacityReservationId=groups.reservations[0])
    groups.reservations.pop(0)
    _, check = _grouped(sandbox, arn, nodes=3)
    assert check.status == "warning"
    assert any(d.endswith("not usable, it is cancelled") for d in check.details), check.details
    assert check.summary.endswith("1 would run On-Demand")


def test_without_a_subnet_the_network_goes_where_the_group_reserves(sandbox, groups):
    """fmcluster's own network goes to the AZ of the group's reservations of the queue's type (here not the
    first AZ by name), so the nodes can run in them."""
    arn = groups.make(2, zone="us-east-1b")
    spec = preflight_spec(queues=[{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2,
                                   "capacity": {"type": "reservation", "resource_group_arn": arn}}])
    results = run_checks(sandbox, spec)
    assert "us-east-1b" in by_name(results, "subnet").summary
    assert by_name(results, "reservation train").status == "passed"


def test_a_queue_with_its_own_subnet_is_judged_by_that_subnets_zone(sandbox, groups):
    """Reservations in us-east-1b serve a queue whose own subnet is in us-east-1b, whatever network.subnet_id's
    zone (the same rule as a queue's single reservation)."""
    arn = groups.make(4, zone="us-east-1b")
    spec = preflight_spec(network={"subnet_id": private_subnet(sandbox, "us-east-1a")},
                          queues=[{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2,
                                   "subnet_id": private_subnet(sandbox, "us-east-1b"),
                                   "capacity": {"type": "reservation", "resource_group_arn": arn}}])
    check = by_name(run_checks(sandbox, spec), "reservation train")
    assert check.status == "passed", (check.summary, check.details)
    assert "in us-east-1b reserved" in check.summary
