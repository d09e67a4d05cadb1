"""End-to-end: a queue that launches into a Capacity Reservation group (``capacity.resource_group_arn``), with the
installed ``fmcluster`` command against the sandbox, on PCS and on ParallelCluster.

The group and its two ODCRs are the user's, made here as a team makes them (CreateCapacityReservation, Resource
Groups CreateGroup with the ``AWS::EC2::CapacityReservationPool`` configuration, GroupResources). fmcluster
neither creates nor deletes them: after destroy the group still holds both reservations, and they are active
with all their instances free again.
"""

from __future__ import annotations

import uuid

import pytest
import yaml
from fixtures.lifecycle import PclusterCli, PcsCli, _ok, cli_fixture

POOL = [{"Type": "AWS::EC2::CapacityReservationPool"},
        {"Type": "AWS::ResourceGroups::Generic",
         "Parameters": [{"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}]}]
TYPE = "p5.4xlarge"

pcs_cli = cli_fixture(PcsCli)
pcluster_cli = cli_fixture(PclusterCli)


def _compute_zone(sandbox) -> str:
    """An AZ that offers every instance type of the spec (m7i.xlarge head/login, p5.4xlarge compute), but not
    the first by name, where fmcluster's own network would go without reservations to follow."""
    ec2 = sandbox.client("ec2")
    zones = None
    for instance_type in ("m7i.xlarge", TYPE):
        offers = ec2.describe_instance_type_offerings(LocationType="availability-zone", Filters=[
            {"Name": "instance-type", "Values": [instance_type]}])["InstanceTypeOfferings"]
        found = {o["Location"] for o in offers}
        zones = found if zones is None else zones & found
    assert len(zones) > 1, zones
    return sorted(zones)[1]


@pytest.fixture
def odcr_group(sandbox):
    """The user's group of two ODCRs (1 × p5.4xlarge each, targeted), in an AZ fmcluster's network goes to only
    because the group's reservations are there."""
    ec2, groups = sandbox.client("ec2"), sandbox.client("resource-groups")
    zone = _compute_zone(sandbox)
    reservations = [ec2.create_capacity_reservation(
        InstanceType=TYPE, InstancePlatform="Linux/UNIX", AvailabilityZone=zone, InstanceCount=1,
        InstanceMatchCriteria="targeted")["CapacityReservation"] for _ in range(2)]
    name = f"e2e-odcrs-{uuid.uuid4().hex[:8]}"
    arn = groups.create_group(Name=name, Configuration=POOL)["Group"]["GroupArn"]
    groups.group_resources(Group=arn, ResourceArns=[r["CapacityReservationArn"] for r in reservations])
    ids = [r["CapacityReservationId"] for r in reservations]
    try:
        yield arn, ids
    finally:
        groups.delete_group(Group=arn)
        for rid in ids:
            ec2.cancel_capacity_reservation(CapacityReservationId=rid)


def _use_group(cli, arn: str, nodes) -> None:
    data = yaml.safe_load(cli.spec.read_text())
    data["queues"][0]["nodes"] = nodes
    data["queues"][0]["capacity"] = {"type": "reservation", "resource_group_arn": arn}
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))


def _free(sandbox, ids: list[str]) -> list[int]:
    found = sandbox.client("ec2").describe_capacity_reservations(CapacityReservationIds=ids)["CapacityReservations"]
    by_id = {r["CapacityReservationId"]: (r["State"], r["AvailableInstanceCount"]) for r in found}
    assert all(by_id[rid][0] == "active" for rid in ids), by_id
    return [by_id[rid][1] for rid in ids]


def _group_is_untouched(sandbox, arn: str, ids: list[str]) -> None:
    members = sandbox.client("resource-groups").list_group_resources(Group=arn)["Resources"]
    assert [m["Identifier"]["ResourceArn"].rsplit("/", 1)[-1] for m in members] == ids
    assert _free(sandbox, ids) == [1, 1]


def test_pcs_cluster_launches_into_the_group_and_destroy_leaves_it(pcs_cli, sandbox, odcr_group):
    arn, ids = odcr_group
    _use_group(pcs_cli, arn, 2)  # the gpu queue: 2 nodes that stay up, one in each reservation

    checks = _ok(pcs_cli.run_in_process("preflight", str(pcs_cli.spec)))  # its answer; create is the command
    assert f"capacity reservation group {arn.rsplit('/', 1)[-1]}: 2 × {TYPE}" in checks.stdout + checks.stderr

    _ok(pcs_cli.create())
    report = pcs_cli.status()
    assert report["status"] == "ACTIVE", report
    inventory = pcs_cli.inventory()
    templates = sandbox.client("ec2")
    gpu = next(t for t in inventory["launch_templates"] if t["LaunchTemplateName"].endswith("-gpu"))
    data = templates.describe_launch_template_versions(LaunchTemplateId=gpu["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": arn}}
    gpu_nodes = [i for i in inventory["instances"] if i["InstanceType"] == TYPE]
    assert len(gpu_nodes) == 2, gpu_nodes
    assert _free(sandbox, ids) == [0, 0]  # the nodes run in the group's reservations
    # reserved capacity bills at the On-Demand rate: plan, status and destroy say the same figure
    planned = pcs_cli.assert_plan_and_status_cost_agree()

    pcs_cli.destroy_stops_billing(planned)
    pcs_cli.assert_nothing_left()
    _group_is_untouched(sandbox, arn, ids)


def test_pcs_preflight_refuses_a_missing_group_before_creating_anything(pcs_cli):
    arn = f"arn:aws:resource-groups:us-east-1:123456789012:group/no-such-group-{uuid.uuid4().hex[:6]}"
    _use_group(pcs_cli, arn, 1)
    result = pcs_cli.create()
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout + result.stderr
    assert "NotFoundException" in out and "aws resource-groups create-group" in out, out
    pcs_cli.assert_nothing_left()


def test_parallelcluster_cluster_targets_the_group_and_destroy_leaves_it(pcluster_cli, sandbox, odcr_group):
    """ParallelCluster's own validators read the group (GetGroupConfiguration, ListGroupResources,
    DescribeCapacityReservations) at create; its compute nodes are launched by the head node's clustermgtd,
    which the sandbox does not run, so no instance draws on the reservations here."""
    arn, ids = odcr_group
    _use_group(pcluster_cli, arn, {"min": 0, "max": 2})
    rendered = _ok(pcluster_cli.run_in_process("render", str(pcluster_cli.spec))).stdout
    assert f"CapacityReservationResourceGroupArn: {arn}" in rendered

    _ok(pcluster_cli.create_here())  # the PCS tests above run the installed create; here what is read matters
    report = pcluster_cli.status()
    assert report["status"] == "ACTIVE", report

    _ok(pcluster_cli.destroy_here())
    pcluster_cli.wait_until_gone()
    _group_is_untouched(sandbox, arn, ids)


def test_parallelcluster_validators_read_the_group(pcluster_cli, sandbox):
    """ParallelCluster's CapacityReservationResourceGroupValidator reads the sandbox's group: a group without a
    reservation of the queue's type is its error, as on AWS."""
    ec2, groups = sandbox.client("ec2"), sandbox.client("resource-groups")
    other = ec2.create_capacity_reservation(InstanceType="p5en.48xlarge", InstancePlatform="Linux/UNIX",
                                            AvailabilityZone=_compute_zone(sandbox), InstanceCount=1,
                                            InstanceMatchCriteria="targeted")["CapacityReservation"]
    arn = groups.create_group(Name=f"e2e-other-{uuid.uuid4().hex[:8]}", Configuration=POOL)["Group"]["GroupArn"]
    groups.group_resources(Group=arn, ResourceArns=[other["CapacityReservationArn"]])
    try:
        _use_group(pcluster_cli, arn, {"min": 0, "max": 2})
        result = pcluster_cli.run_in_process("validate", str(pcluster_cli.spec))
    finally:
        groups.delete_group(Group=arn)
        ec2.cancel_capacity_reservation(CapacityReservationId=other["CapacityReservationId"])
    text = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, text
    assert "Traceback" not in result.stderr
    assert f"must have at least one capacity reservation for {TYPE}" in text, text
