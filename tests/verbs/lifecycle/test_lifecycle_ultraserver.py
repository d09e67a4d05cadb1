"""End to end in the sandbox: a p6e-gb200 UltraServer cluster in the Dallas Local Zone, as AWS sells it.

The account opts in to the Local Zone group us-east-1-dfw-2, makes a private subnet there in the VPC whose
Availability Zone subnet holds the head and login nodes, buys an UltraServer Capacity Block (PCS: a u-p6e-gb200x36,
9 instances; ParallelCluster: a u-p6e-gb200x72, 18) from DescribeCapacityBlockOfferings/PurchaseCapacityBlock, and
the installed ``fmcluster`` creates the cluster,
reports it, and destroys it. The Local Zone rules themselves are tested at the sandbox level.
"""

from __future__ import annotations

import datetime as dt

import pytest
import yaml
from botocore.exceptions import ClientError
from fixtures.lifecycle import PclusterCli, PcsCli, _ok, cli_fixture

DALLAS, DALLAS_GROUP = "us-east-1-dfw-2a", "us-east-1-dfw-2"
GB200 = "p6e-gb200.36xlarge"

pcs_cli = cli_fixture(PcsCli)


def _zones(ec2, **kwargs) -> dict[str, dict]:
    return {z["ZoneName"]: z for z in ec2.describe_availability_zones(**kwargs)["AvailabilityZones"]}


def _dallas_subnet(sandbox, network: dict[str, str], cidr_index: int = 1) -> str:
    """A private subnet in the Dallas Local Zone of the network's VPC, routed like its private subnet (NAT)."""
    ec2 = sandbox.client("ec2")
    ec2.modify_availability_zone_group(GroupName=DALLAS_GROUP, OptInStatus="opted-in")
    block = ec2.describe_vpcs(VpcIds=[network["vpc"]])["Vpcs"][0]["CidrBlock"].split(".")[1]
    subnet = ec2.create_subnet(VpcId=network["vpc"], CidrBlock=f"10.{block}.{16 * cidr_index + 16}.0/20",
                               AvailabilityZone=DALLAS)["Subnet"]["SubnetId"]
    private_routes = ec2.describe_route_tables(Filters=[
        {"Name": "association.subnet-id", "Values": [network["private_subnet"]]}])["RouteTables"][0]
    ec2.associate_route_table(RouteTableId=private_routes["RouteTableId"], SubnetId=subnet)
    return subnet


def _buy_block(sandbox, ultraserver: str = "u-p6e-gb200x72", instances: int = 18) -> str:
    """Buy the UltraServer Capacity Block offering that starts now (AWS's blocks end at 11:30 UTC)."""
    ec2 = sandbox.client("ec2")
    offers = ec2.describe_capacity_block_offerings(UltraserverType=ultraserver, UltraserverCount=1,
                                                   CapacityDurationHours=24)["CapacityBlockOfferings"]
    now = dt.datetime.now(dt.timezone.utc)
    offer = next(o for o in offers if o["StartDate"] <= now)
    assert (offer["AvailabilityZone"], offer["InstanceCount"]) == (DALLAS, instances)
    block = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                        InstancePlatform="Linux/UNIX")["CapacityReservation"]
    assert (block["State"], block["ReservationType"], block["TotalInstanceCount"]) == ("active", "capacity-block",
                                                                                        instances)
    return block["CapacityReservationId"]


def _spec(cli, network: dict[str, str], dallas_subnet: str, reservation_id: str) -> None:
    data = {"name": cli.name, "backend": "pcs", "region": "us-east-1",
            "head_node": {"instance_type": "m7g.2xlarge"},
            "network": {"subnet_id": network["public_subnet"]},
            "queues": [{"name": "train", "instance_type": GB200, "nodes": 9, "subnet_id": dallas_subnet,
                        "capacity": {"type": "capacity-block", "reservation_id": reservation_id,
                                     "ultraserver": "u-p6e-gb200x36"}}]}
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))


def test_gb200_ultraserver_cluster_in_the_dallas_local_zone_on_pcs(pcs_cli, sandbox):
    network = sandbox.private_network()
    dallas = _dallas_subnet(sandbox, network)
    # the smaller UltraServer (9 instances): the same checks, half the instances to launch and end
    _spec(pcs_cli, network, dallas, _buy_block(sandbox, "u-p6e-gb200x36", 9))

    preflight = _ok(pcs_cli.run("preflight", str(pcs_cli.spec)))
    assert f"{dallas} in Local Zone {DALLAS} offers {GB200}" in preflight.stdout, preflight.stdout
    _ok(pcs_cli.create())

    status = pcs_cli.status()
    assert status["status"] == "ACTIVE", status
    train = next(q for q in status["queues"] if q["name"] == "train")
    assert (train["instance_type"], train["min"], train["max"]) == (GB200, 9, 9)
    ec2 = sandbox.client("ec2")
    instances = [i for r in ec2.describe_instances(Filters=[
        {"Name": "tag:fmcluster:cluster", "Values": [pcs_cli.name]},
        {"Name": "instance-type", "Values": [GB200]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"] for i in r["Instances"]]
    assert len(instances) == 9
    for instance in instances:
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        assert tags.get("fmcluster:ultraserver") == "u-p6e-gb200x36", tags
        assert (instance["Placement"]["AvailabilityZone"], instance["SubnetId"]) == (DALLAS, dallas)
        efa = [nic for nic in instance["NetworkInterfaces"] if nic.get("InterfaceType") in ("efa", "efa-only")]
        assert len(efa) == 16, instance["NetworkInterfaces"]
    # a Capacity Block queue: plan, status and destroy price it at the block's rate, from the one cost model
    planned = pcs_cli.assert_plan_and_status_cost_agree()

    pcs_cli.destroy_stops_billing(planned)
    pcs_cli.assert_nothing_left()


# The Local Zone rules, at the sandbox level ------------------------------------------------------------------
@pytest.fixture
def fresh_account(sandbox):
    """EC2 in an account of its own (credentials of a role assumed there): the zone-group opt-in belongs to the
    account, as on AWS, so the session account's opt-in (the end-to-end test's) does not show here."""
    ec2 = sandbox.client_in_a_new_account("ec2", retries={"max_attempts": 1})
    assert ec2.describe_vpcs()["Vpcs"][0]["OwnerId"] != sandbox.client("sts").get_caller_identity()["Account"]
    return ec2


def test_local_zone_needs_the_opt_in(fresh_account, tmp_path, monkeypatch):
    ec2 = fresh_account
    assert DALLAS not in _zones(ec2)
    listed = _zones(ec2, AllAvailabilityZones=True)[DALLAS]
    assert (listed["OptInStatus"], listed["ZoneType"], listed["GroupName"]) == ("not-opted-in", "local-zone",
                                                                                DALLAS_GROUP)
    assert _zones(ec2)["us-east-1a"]["OptInStatus"] == "opt-in-not-required"
    _eks_gb200_before_the_opt_in(ec2, tmp_path, monkeypatch)
    vpc = ec2.create_vpc(CidrBlock="10.250.0.0/16")["Vpc"]["VpcId"]
    with pytest.raises(ClientError) as refused:
        ec2.create_subnet(VpcId=vpc, CidrBlock="10.250.0.0/24", AvailabilityZone=DALLAS)
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert DALLAS in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as opt_out:
        ec2.modify_availability_zone_group(GroupName=DALLAS_GROUP, OptInStatus="not-opted-in")
    assert opt_out.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(ClientError) as dry:
        ec2.modify_availability_zone_group(GroupName=DALLAS_GROUP, OptInStatus="opted-in", DryRun=True)
    assert dry.value.response["Error"]["Code"] == "DryRunOperation" and DALLAS not in _zones(ec2)

    assert ec2.modify_availability_zone_group(GroupName=DALLAS_GROUP, OptInStatus="opted-in")["Return"]
    opted = _zones(ec2)[DALLAS]
    assert (opted["OptInStatus"], opted["NetworkBorderGroup"]) == ("opted-in", DALLAS_GROUP)
    assert list(_zones(ec2, Filters=[{"Name": "zone-type", "Values": ["local-zone"]}])) == [DALLAS]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.250.0.0/24", AvailabilityZone=DALLAS)["Subnet"]
    assert (subnet["AvailabilityZone"], subnet["AvailabilityZoneId"]) == (DALLAS, "use1-dfw2-az1")
    # The first subnet of a zone is not its default subnet: only a default VPC has those, in Availability Zones
    # (formerly its own test; one account serves both, as each new account costs seconds in the sandbox).
    assert not subnet["DefaultForAz"] and not subnet["MapPublicIpOnLaunch"]
    defaults = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    zones = {s["AvailabilityZone"] for s in defaults}
    assert zones and DALLAS not in zones
    assert zones == {name for name, zone in _zones(ec2).items() if zone["ZoneType"] == "availability-zone"}


def _eks_gb200_before_the_opt_in(ec2, tmp_path, monkeypatch) -> None:
    """An EKS spec with a p6e-gb200 queue and no subnet, in this account not yet opted in: EKS's preflight says where
    AWS sells the type and which opt-in comes first, and create's placement finds no zone for both the system nodes'
    m7i.xlarge and p6e-gb200, so it refuses before anything is made
    (tests/backends/eks/test_lifecycle_eks_ultraserver.py makes the cluster once the subnets are right)."""
    from fmcluster.aws.placement import resolve_placement
    from fmcluster.backends.eks.preflight import check_ultraserver_zones
    from fmcluster.errors import UsageError
    from fmcluster.preflight.common import Context
    from fmcluster.spec import load_spec

    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    path = tmp_path / "eks.yaml"
    path.write_text(yaml.safe_dump({"name": "gb-new", "backend": "eks", "region": "us-east-1", "queues": [
        {"name": "train", "instance_type": GB200, "nodes": 9, "capacity": {
            "type": "capacity-block", "reservation_id": "cr-0123456789abcdef0", "ultraserver": "u-p6e-gb200x36"}}]}))
    spec = load_spec(path).spec  # offline: both types are in the bundled catalog
    (result,) = check_ultraserver_zones(Context(spec, "us-east-1", lambda service: ec2))
    said = " ".join([result.summary, *result.details])
    assert result.status == "failed", said
    assert f"AWS sells the type in Local Zone {DALLAS} only" in said and "set queues[].subnet_id" in said
    assert f"--group-name {DALLAS_GROUP} --opt-in-status opted-in" in said
    with pytest.raises(UsageError) as refused:
        resolve_placement(spec, ec2)
    assert f"offers all of m7i.xlarge, {GB200}" in str(refused.value)
    assert f"{GB200} in Local Zone {DALLAS}" in str(refused.value)


def test_capacity_block_offerings_start_now_or_at_the_end_of_block_hour(sandbox):
    """"All Capacity Blocks end at 11:30AM UTC" (EC2 user guide); one can start now, with hours and minutes."""
    ec2 = sandbox.client("ec2", retries={"max_attempts": 1})
    offers = ec2.describe_capacity_block_offerings(UltraserverType="u-p6e-gb200x36", UltraserverCount=1,
                                                   CapacityDurationHours=48)["CapacityBlockOfferings"]
    assert offers and all((o["EndDate"].astimezone(dt.timezone.utc).hour,
                           o["EndDate"].astimezone(dt.timezone.utc).minute) == (11, 30) for o in offers)
    for offer in offers:
        minutes = (offer["EndDate"] - offer["StartDate"]).total_seconds() / 60
        assert minutes == offer["CapacityBlockDurationHours"] * 60 + offer["CapacityBlockDurationMinutes"] >= 48 * 60
    with pytest.raises(ClientError) as unknown:
        ec2.purchase_capacity_block(CapacityBlockOfferingId="cb-0123456789abcdef0", InstancePlatform="Linux/UNIX")
    assert unknown.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_without_subnets_the_local_zone_is_named_and_nothing_is_made(pcs_cli, sandbox):
    """No zone sells both m7g.2xlarge and p6e-gb200 (only the Dallas Local Zone sells the latter): fmcluster says
    where each type is sold and what to do, before creating anything."""
    data = {"name": pcs_cli.name, "backend": "pcs", "region": "us-east-1",
            "head_node": {"instance_type": "m7g.2xlarge"},
            "queues": [{"name": "train", "instance_type": GB200, "nodes": 18,
                        "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0",
                                     "ultraserver": "u-p6e-gb200x72"}}]}
    pcs_cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    result = pcs_cli.create()
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert f"{GB200} in Local Zone {DALLAS}" in result.stderr, result.stderr
    assert "queues[].subnet_id" in result.stderr
    pcs_cli.assert_nothing_left()


pcluster_cli = cli_fixture(PclusterCli)


def test_gb200_ultraserver_cluster_in_the_dallas_local_zone_on_parallelcluster(pcluster_cli, sandbox):
    network = sandbox.private_network()
    dallas = _dallas_subnet(sandbox, network)
    reservation = _buy_block(sandbox)
    data = {"name": pcluster_cli.name, "backend": "parallelcluster", "region": "us-east-1",
            "head_node": {"instance_type": "m7g.2xlarge"},
            "network": {"subnet_id": network["private_subnet"], "head_subnet_id": network["public_subnet"]},
            "queues": [{"name": "train", "instance_type": GB200, "nodes": 18, "subnet_id": dallas,
                        "capacity": {"type": "capacity-block", "reservation_id": reservation,
                                     "ultraserver": "u-p6e-gb200x72"}}]}
    pcluster_cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    _ok(pcluster_cli.create())
    assert pcluster_cli.status()["backend_status"] == "CREATE_COMPLETE"
    # The sandbox's head node runs no clustermgtd, so no compute node launches: the queue's launch template
    # (ParallelCluster's own, from its CloudFormation stack) is what EC2 would launch the 18 nodes from.
    ec2 = sandbox.client("ec2")
    templates = [v["LaunchTemplateData"] for t in ec2.describe_launch_templates()["LaunchTemplates"]
                 for v in ec2.describe_launch_template_versions(LaunchTemplateId=t["LaunchTemplateId"])[
                     "LaunchTemplateVersions"]
                 if v["LaunchTemplateData"].get("InstanceType") == GB200]
    assert len(templates) == 1, templates
    interfaces = templates[0]["NetworkInterfaces"]
    assert {nic.get("SubnetId") for nic in interfaces} == {dallas}
    assert sum(1 for nic in interfaces if nic.get("InterfaceType") in ("efa", "efa-only")) == 16
    assert templates[0]["CapacityReservationSpecification"]["CapacityReservationTarget"][
        "CapacityReservationId"] == reservation
    planned = pcluster_cli.assert_plan_and_status_cost_agree()  # the block's rate, as on PCS
    pcluster_cli.destroy_stops_billing(planned)
    pcluster_cli.wait_until_gone()
    pcluster_cli.assert_nothing_left()
