"""Taking a VPC's gateways apart, as a boto3 client meets it in the sandbox (fmcluster_sandbox.vpc_teardown):
a NAT gateway's address is freed by its deletion, an internet gateway does not detach while a public address
is mapped in the VPC, and a VPC is not deleted while a gateway is attached."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError


@pytest.fixture
def ec2(sandbox):
    return sandbox.client("ec2", "us-east-1", retries={"max_attempts": 1})


def _network(ec2) -> dict[str, str]:
    vpc = ec2.create_vpc(CidrBlock="10.201.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.201.0.0/24", AvailabilityZone="us-east-1a")["Subnet"]
    gateway = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=vpc)
    allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=subnet["SubnetId"], AllocationId=allocation)["NatGateway"]["NatGatewayId"]
    return {"vpc": vpc, "subnet": subnet["SubnetId"], "igw": gateway, "eip": allocation, "nat": nat}


def _code(call) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"]


def test_teardown_in_aws_order(ec2):
    net = _network(ec2)
    # the NAT gateway's address is mapped in the VPC: the internet gateway stays
    assert _code(lambda: ec2.detach_internet_gateway(InternetGatewayId=net["igw"], VpcId=net["vpc"])) == \
        "DependencyViolation"
    assert _code(lambda: ec2.delete_vpc(VpcId=net["vpc"])) == "DependencyViolation"
    ec2.delete_nat_gateway(NatGatewayId=net["nat"])
    address = ec2.describe_addresses(AllocationIds=[net["eip"]])["Addresses"][0]
    assert not address.get("AssociationId") and not address.get("NetworkInterfaceId")  # disassociated, kept
    interfaces = ec2.describe_network_interfaces(Filters=[{"Name": "subnet-id", "Values": [net["subnet"]]}])
    assert interfaces["NetworkInterfaces"] == []
    ec2.release_address(AllocationId=net["eip"])
    ec2.detach_internet_gateway(InternetGatewayId=net["igw"], VpcId=net["vpc"])
    ec2.delete_internet_gateway(InternetGatewayId=net["igw"])
    ec2.delete_subnet(SubnetId=net["subnet"])
    ec2.delete_vpc(VpcId=net["vpc"])
