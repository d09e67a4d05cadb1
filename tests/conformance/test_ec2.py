"""EC2 as a boto3 client meets it in the sandbox: RunInstances rules, reservations, placement groups, instance
types (including p6e-gb200) and Capacity Block offerings."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from botocore.exceptions import ClientError

REGION = "us-east-1"


@pytest.fixture
def ec2(sandbox):
    client = sandbox.client("ec2", REGION, retries={"max_attempts": 1})
    launched: list[str] = []
    client.launched = launched
    yield client
    if launched:
        client.terminate_instances(InstanceIds=launched)


def _ami(ec2) -> str:
    return ec2.describe_images(Owners=["amazon"], Filters=[
        {"Name": "name", "Values": ["aws-pcs-sample_ami-al2023-x86_64*"]}])["Images"][0]["ImageId"]


def _subnet(ec2, zone: str = "us-east-1a") -> dict:
    return ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                         {"Name": "availability-zone", "Values": [zone]}])["Subnets"][0]


def _run(ec2, count: int = 1, **kwargs):
    answer = ec2.run_instances(ImageId=_ami(ec2), MinCount=count, MaxCount=count, **kwargs)
    ec2.launched.extend(i["InstanceId"] for i in answer["Instances"])
    return answer["Instances"]


def _refused(call, code: str) -> str:
    with pytest.raises(ClientError) as excinfo:
        call()
    assert excinfo.value.response["Error"]["Code"] == code, excinfo.value.response
    return excinfo.value.response["Error"]["Message"]


def _nics(subnet: str, group: str, layout: list[tuple[int, int, str]]) -> list[dict]:
    return [{"NetworkCardIndex": card, "DeviceIndex": device, "InterfaceType": kind, "SubnetId": subnet,
             "Groups": [group]} for card, device, kind in layout]


def test_unknown_and_unsold_instance_types(ec2):
    """DescribeInstanceTypes / DescribeInstanceTypeOfferings (EC2 API reference): a type EC2 does not have is
    an invalid value; a type not sold in the subnet's zone is Unsupported there (p6-b200.48xlarge is sold in
    us-east-1c only, per AWS's offerings data)."""
    _refused(lambda: _run(ec2, InstanceType="p9.huge", SubnetId=_subnet(ec2)["SubnetId"]), "InvalidParameterValue")
    message = _refused(lambda: _run(ec2, InstanceType="p6-b200.48xlarge", SubnetId=_subnet(ec2)["SubnetId"]),
                       "Unsupported")
    assert "us-east-1c" in message


def test_network_interface_rules(ec2):
    """EC2 user guide, "Network cards", "Elastic Fabric Adapter", "Maximize network bandwidth on Amazon EC2
    instances with multiple network cards": card indexes below MaximumNetworkCards; EFA only on types that
    support it; "You can't use an EFA-only network interface as the primary network interface"; one
    interface per (card, device index); no instance-level security groups beside interfaces."""
    subnet = _subnet(ec2)
    group = ec2.create_security_group(GroupName=f"efa-{uuid.uuid4().hex[:8]}", Description="efa",
                                      VpcId=subnet["VpcId"])["GroupId"]
    sid = subnet["SubnetId"]
    _refused(lambda: _run(ec2, InstanceType="m7i.2xlarge", NetworkInterfaces=_nics(sid, group, [(0, 0, "efa")])),
             "InvalidParameterCombination")
    _refused(lambda: _run(ec2, InstanceType="p5.4xlarge", NetworkInterfaces=_nics(sid, group, [(0, 0, "interface"),
                                                                                                  (1, 1, "efa")])),
             "InvalidParameterValue")  # p5.4xlarge has one network card
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", NetworkInterfaces=_nics(sid, group, [(0, 0, "efa-only")])),
             "InvalidParameterCombination")
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", NetworkInterfaces=_nics(
        sid, group, [(0, 0, "efa"), (1, 1, "efa"), (1, 1, "efa")])), "InvalidParameterValue")
    # p6-b300's card 0 carries no EFA (DescribeInstanceTypes NetworkCards[0].InterfaceTypes: interface)
    _refused(lambda: _run(ec2, InstanceType="p6-b300.48xlarge", NetworkInterfaces=_nics(sid, group, [(0, 0, "efa")])),
             "InvalidParameterCombination")
    [node] = _run(ec2, InstanceType="p5.48xlarge",
                  NetworkInterfaces=_nics(sid, group, [(card, 0 if card == 0 else 1, "efa") for card in range(32)]))
    assert node["InstanceType"] == "p5.48xlarge"


def test_public_ipv4_only_for_single_interface_launches(ec2):
    """EC2 user guide, "Public IPv4 addresses": the subnet's auto-assign setting applies to a launch with one
    network interface; with several, no public address is assigned, and asking for one is refused."""
    subnet = _subnet(ec2)
    group = ec2.create_security_group(GroupName=f"ip-{uuid.uuid4().hex[:8]}", Description="ip",
                                      VpcId=subnet["VpcId"])["GroupId"]
    [single] = _run(ec2, InstanceType="m7i.large", SubnetId=subnet["SubnetId"])
    assert single.get("PublicIpAddress") or ec2.describe_instances(InstanceIds=[single["InstanceId"]])[
        "Reservations"][0]["Instances"][0].get("PublicIpAddress")
    layout = [(card, 0 if card == 0 else 1, "efa") for card in range(2)]
    [multi] = _run(ec2, InstanceType="p5.48xlarge", NetworkInterfaces=_nics(subnet["SubnetId"], group, layout))
    described = ec2.describe_instances(InstanceIds=[multi["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert "PublicIpAddress" not in described
    nics = _nics(subnet["SubnetId"], group, layout)
    nics[0]["AssociatePublicIpAddress"] = True
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", NetworkInterfaces=nics), "InvalidParameterCombination")


def test_default_vpc_routes_to_its_internet_gateway(ec2):
    """Amazon VPC user guide, "Default VPCs": an internet gateway is attached to the default VPC and the main
    route table sends 0.0.0.0/0 to it."""
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    gateways = ec2.describe_internet_gateways(Filters=[{"Name": "attachment.vpc-id", "Values": [vpc]}])
    [gateway] = gateways["InternetGateways"]
    [main] = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc]},
                                                {"Name": "association.main", "Values": ["true"]}])["RouteTables"]
    assert {"DestinationCidrBlock": "0.0.0.0/0", "GatewayId": gateway["InternetGatewayId"]}.items() <= next(
        r for r in main["Routes"] if r.get("DestinationCidrBlock") == "0.0.0.0/0").items()


def test_placement_groups(ec2):
    """EC2 user guide, "Placement groups": launching into an unknown group fails; the type must support the
    group's strategy (DescribeInstanceTypes PlacementGroupInfo: t3 has no cluster placement); a cluster
    placement group stays in one Availability Zone; a group with running instances cannot be deleted."""
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", SubnetId=_subnet(ec2)["SubnetId"],
                          Placement={"GroupName": "no-such-group"}), "InvalidPlacementGroup.Unknown")
    name = f"pg-{uuid.uuid4().hex[:8]}"
    ec2.create_placement_group(GroupName=name, Strategy="cluster")
    _refused(lambda: _run(ec2, InstanceType="t3.micro", SubnetId=_subnet(ec2)["SubnetId"],
                          Placement={"GroupName": name}), "InvalidParameterCombination")
    [node] = _run(ec2, InstanceType="p5.48xlarge", SubnetId=_subnet(ec2, "us-east-1a")["SubnetId"],
                  Placement={"GroupName": name})
    described = ec2.describe_instances(InstanceIds=[node["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert described["Placement"]["GroupName"] == name
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", SubnetId=_subnet(ec2, "us-east-1b")["SubnetId"],
                          Placement={"GroupName": name}), "InvalidParameterValue")
    _refused(lambda: ec2.delete_placement_group(GroupName=name), "InvalidPlacementGroup.InUse")
    ec2.terminate_instances(InstanceIds=[node["InstanceId"]])
    ec2.delete_placement_group(GroupName=name)


def _seed(sandbox, **payload) -> str:
    now = dt.datetime.now(dt.timezone.utc)
    body = {"region": REGION, "availability_zone": "us-east-1a", "reservation_id": "cr-" + uuid.uuid4().hex[:17],
            "start": (now - dt.timedelta(hours=1)).isoformat(), "end": (now + dt.timedelta(days=1)).isoformat(),
            **payload}
    return sandbox.control("POST", "/_fmcluster/capacity-reservations", body)["reservation_id"]


def test_capacity_reservations_and_blocks_at_launch(ec2, sandbox):
    """EC2 user guide, "Capacity Reservations" and "Capacity Blocks for ML": a targeted launch needs the
    reservation's instance type and zone, an active reservation with room (ReservationCapacityExceeded
    otherwise), and instances count against it until they terminate; Capacity Blocks launch only with
    MarketType capacity-block, and that market type only into a Capacity Block."""
    sid = _subnet(ec2)["SubnetId"]
    block = _seed(sandbox, instance_type="p5.48xlarge", count=2, type="capacity-block")
    target = {"CapacityReservationTarget": {"CapacityReservationId": block}}
    market = {"MarketType": "capacity-block"}
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", SubnetId=sid, CapacityReservationSpecification=target),
             "InvalidParameterCombination")
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", SubnetId=sid, InstanceMarketOptions=market),
             "InvalidParameterCombination")
    _refused(lambda: _run(ec2, InstanceType="p5en.48xlarge", SubnetId=sid, CapacityReservationSpecification=target,
                          InstanceMarketOptions=market), "InvalidParameterCombination")
    nodes = _run(ec2, InstanceType="p5.48xlarge", SubnetId=sid, CapacityReservationSpecification=target,
                 InstanceMarketOptions=market, count=2)
    held = ec2.describe_capacity_reservations(CapacityReservationIds=[block])["CapacityReservations"][0]
    assert held["AvailableInstanceCount"] == 0
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", SubnetId=sid, CapacityReservationSpecification=target,
                          InstanceMarketOptions=market), "ReservationCapacityExceeded")
    ec2.terminate_instances(InstanceIds=[n["InstanceId"] for n in nodes])
    held = ec2.describe_capacity_reservations(CapacityReservationIds=[block])["CapacityReservations"][0]
    assert held["AvailableInstanceCount"] == 2
    now = dt.datetime.now(dt.timezone.utc)
    scheduled = _seed(sandbox, instance_type="p5.48xlarge", count=1, type="capacity-block",
                      start=(now + dt.timedelta(days=1)).isoformat(), end=(now + dt.timedelta(days=2)).isoformat())
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[scheduled])["CapacityReservations"][0][
        "State"] == "scheduled"
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", SubnetId=sid, InstanceMarketOptions=market,
                          CapacityReservationSpecification={"CapacityReservationTarget": {
                              "CapacityReservationId": scheduled}}), "InvalidCapacityReservationId.Unavailable")
    elsewhere = _subnet(ec2, "us-east-1b")["SubnetId"]
    _refused(lambda: _run(ec2, InstanceType="p5.48xlarge", SubnetId=elsewhere, CapacityReservationSpecification=target,
                          InstanceMarketOptions=market), "InvalidParameterCombination")


def test_p6e_gb200_is_known_where_aws_sells_it(sandbox):
    """EKS user guide ("p6e-gb200.36xlarge ... is only available as part of P6e-GB200 UltraServers") and the EC2
    accelerated-computing specifications: 4 NVIDIA GPUs, NVIDIA Grace (arm64), 144 vCPUs, 960 GiB, 17 network
    cards, card 0 without EFA; sold through Capacity Blocks in the Dallas Local Zone us-east-1-dfw-2a."""
    ec2 = sandbox.client("ec2", REGION)
    facts = ec2.describe_instance_types(InstanceTypes=["p6e-gb200.36xlarge"])["InstanceTypes"][0]
    assert facts["ProcessorInfo"]["SupportedArchitectures"] == ["arm64"]
    assert (facts["VCpuInfo"]["DefaultVCpus"], facts["MemoryInfo"]["SizeInMiB"]) == (144, 960 * 1024)
    assert facts["GpuInfo"]["Gpus"][0]["Count"] == 4 and facts["SupportedUsageClasses"] == ["capacity-block"]
    network = facts["NetworkInfo"]
    assert network["MaximumNetworkCards"] == 17 and network["EfaSupported"]
    assert network["NetworkCards"][0]["InterfaceTypes"] == ["interface"]
    offered = ec2.describe_instance_type_offerings(LocationType="availability-zone", Filters=[
        {"Name": "instance-type", "Values": ["p6e-gb200.36xlarge"]}])["InstanceTypeOfferings"]
    assert [o["Location"] for o in offered] == ["us-east-1-dfw-2a"]


@pytest.mark.parametrize("ultraserver, instance_type, per_server", [
    ("u-p6e-gb200x36", "p6e-gb200.36xlarge", 9), ("u-p6e-gb200x72", "p6e-gb200.36xlarge", 18)])
def test_ultraserver_capacity_block_offerings(sandbox, ultraserver, instance_type, per_server):
    """DescribeCapacityBlockOfferings (EC2 API reference) with UltraserverType/UltraserverCount: P6e-GB200
    UltraServers hold 9 (x36) or 18 (x72) p6e-gb200.36xlarge (EKS user guide); durations are 1-14 days in
    1-day steps, then up to 182 days in 7-day steps."""
    ec2 = sandbox.client("ec2", REGION, retries={"max_attempts": 1})
    offers = ec2.describe_capacity_block_offerings(UltraserverType=ultraserver, UltraserverCount=1,
                                                   CapacityDurationHours=48)["CapacityBlockOfferings"]
    assert offers, "no offering"
    offer = offers[0]
    assert (offer["InstanceType"], offer["InstanceCount"], offer["UltraserverType"]) == (
        instance_type, per_server, ultraserver)
    assert offer["AvailabilityZone"] == "us-east-1-dfw-2a" and offer["CapacityBlockDurationHours"] == 48
    assert not ec2.describe_capacity_block_offerings(InstanceType=instance_type, InstanceCount=per_server,
                                                     CapacityDurationHours=48)["CapacityBlockOfferings"]
    _refused(lambda: ec2.describe_capacity_block_offerings(UltraserverType=ultraserver, UltraserverCount=1,
                                                           CapacityDurationHours=36), "InvalidParameterValue")


def test_trn2_ultraserver_offerings(sandbox):
    """DescribeCapacityBlockOfferings: u-trn2x64 UltraServers are 4 trn2u.48xlarge (AWS Neuron "Trn2
    architecture"), offered where AWS sells trn2u.48xlarge (ap-south-2 in AWS's offerings data)."""
    ec2 = sandbox.client("ec2", "ap-south-2", retries={"max_attempts": 1})
    offers = ec2.describe_capacity_block_offerings(UltraserverType="u-trn2x64", UltraserverCount=2,
                                                   CapacityDurationHours=24 * 7)["CapacityBlockOfferings"]
    assert offers and {(o["InstanceType"], o["InstanceCount"]) for o in offers} == {("trn2u.48xlarge", 8)}


def test_capacity_block_offerings_for_single_instances(sandbox):
    """DescribeCapacityBlockOfferings: "Each Capacity Block can have up to 64 instances"; offerings come in the
    zones that sell the type (p5en.48xlarge: us-east-1a and us-east-1c)."""
    ec2 = sandbox.client("ec2", REGION, retries={"max_attempts": 1})
    offers = ec2.describe_capacity_block_offerings(InstanceType="p5en.48xlarge", InstanceCount=4,
                                                   CapacityDurationHours=24 * 21)["CapacityBlockOfferings"]
    assert sorted({o["AvailabilityZone"] for o in offers}) == ["us-east-1a", "us-east-1c"]
    _refused(lambda: ec2.describe_capacity_block_offerings(InstanceType="p5en.48xlarge", InstanceCount=65,
                                                           CapacityDurationHours=24), "InvalidParameterValue")
