"""Spec → the request documents of the network fmcluster creates when the spec names no subnet.

The network: a VPC; a private compute subnet in the Availability Zone chosen at create time
(``${network.availability_zone}``: the one that offers the types or holds the reservation) and a public
head/login subnet in ``${network.head_availability_zone}`` (the same AZ, unless the reservation's AZ does not
offer the head/login type: then one that does); an internet gateway; a NAT gateway with its Elastic IP in the
public subnet; a route table per subnet; and an S3 gateway endpoint. Everything that launches into a subnet refers
to it by ``${subnet.<key>.id}``, which is what orders the graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fmcluster.pricing.network import NAT_GATEWAY_USD_PER_GB, NAT_GATEWAY_USD_PER_HOUR, PUBLIC_IPV4_USD_PER_HOUR
from fmcluster.render.common import resource_tags
from fmcluster.render.documents import Document
from fmcluster.render.templates import render_yaml
from fmcluster.spec.models import Spec
from fmcluster.spec.networking import creates_network, subnet_cidrs

VPC_KEY = "cluster"
COMPUTE_SUBNET = "compute"
PUBLIC_SUBNET = "public"
COMPUTE_SUBNET_REF = f"${{subnet.{COMPUTE_SUBNET}.id}}"
HEAD_ZONE_REF = "${network.head_availability_zone}"
PUBLIC_SUBNET_REF = f"${{subnet.{PUBLIC_SUBNET}.id}}"
VPC_REF = f"${{vpc.{VPC_KEY}.id}}"
# Route tables whose routes must exist before anything launches into the subnets (nodes register at boot).
ROUTE_TABLES = ("route_table:compute", "route_table:public")


@dataclass
class NetworkDocuments:
    vpc_id: str
    compute_subnet_id: str
    head_subnet_id: str
    cidr: str
    documents: list[Document] = field(default_factory=list)


def render_network(spec: Spec) -> NetworkDocuments | None:
    """The network's documents, or None when the spec names its subnet (or opts out of a created network)."""
    if not creates_network(spec):
        return None
    private_cidr, public_cidr = subnet_cidrs(spec.network.vpc_cidr)
    network = NetworkDocuments(VPC_REF, COMPUTE_SUBNET_REF, PUBLIC_SUBNET_REF, spec.network.vpc_cidr)

    def add(filename: str, kind: str, key: str, operations: dict[str, str], template: str, **context: object) -> None:
        tags = {**resource_tags(spec, f"{kind}:{key}"), "Name": f"{spec.name}-{key}"}
        text, body = render_yaml(f"network/{template}", tags=tags, key=key, **context)
        network.documents.append(Document(filename, kind, key, "ec2", operations, text, body))

    add("vpc.yaml", "vpc", VPC_KEY, {"create": "CreateVpc", "dns_support": "ModifyVpcAttribute",
                                     "dns_hostnames": "ModifyVpcAttribute"}, "vpc.yaml.j2", cidr=spec.network.vpc_cidr)
    add("subnet-compute.yaml", "subnet", COMPUTE_SUBNET, {"create": "CreateSubnet"}, "subnet.yaml.j2",
        vpc_key=VPC_KEY, cidr=private_cidr, public=False,
        purpose="private subnet for compute nodes (no public addresses; out through the NAT gateway)")
    add("subnet-public.yaml", "subnet", PUBLIC_SUBNET,
        {"create": "CreateSubnet", "public_ips": "ModifySubnetAttribute"}, "subnet.yaml.j2",
        vpc_key=VPC_KEY, cidr=public_cidr, public=True, availability_zone=HEAD_ZONE_REF,
        purpose="public subnet for the head/login node and the NAT gateway")
    add("internet-gateway.yaml", "internet_gateway", VPC_KEY,
        {"create": "CreateInternetGateway", "attach": "AttachInternetGateway"}, "internet_gateway.yaml.j2",
        vpc_key=VPC_KEY)
    add("elastic-ip-nat.yaml", "elastic_ip", "nat", {"": "AllocateAddress"}, "elastic_ip.yaml.j2")
    add("nat-gateway.yaml", "nat_gateway", VPC_KEY, {"": "CreateNatGateway"}, "nat_gateway.yaml.j2",
        subnet_key=PUBLIC_SUBNET, eip_key="nat")
    add("route-table-public.yaml", "route_table", PUBLIC_SUBNET,
        {"create": "CreateRouteTable", "route": "CreateRoute", "associate": "AssociateRouteTable"},
        "route_table.yaml.j2", vpc_key=VPC_KEY, subnet_key=PUBLIC_SUBNET, nat_key=None, igw_key=VPC_KEY,
        purpose="public subnet's routes: the internet through the internet gateway")
    add("route-table-compute.yaml", "route_table", COMPUTE_SUBNET,
        {"create": "CreateRouteTable", "route": "CreateRoute", "associate": "AssociateRouteTable"},
        "route_table.yaml.j2", vpc_key=VPC_KEY, subnet_key=COMPUTE_SUBNET, nat_key=VPC_KEY, igw_key=None,
        purpose="compute subnet's routes: the internet (and the PCS API) through the NAT gateway")
    add("vpc-endpoint-s3.yaml", "vpc_endpoint", "s3", {"": "CreateVpcEndpoint"}, "vpc_endpoint.yaml.j2",
        vpc_key=VPC_KEY, region=spec.region, route_tables=[COMPUTE_SUBNET, PUBLIC_SUBNET])
    return network


def network_note(network: NetworkDocuments, public_subnet_for: str = "the head/login node") -> str:
    return (f"network: fmcluster creates a VPC ({network.cidr}) with a private compute subnet behind a NAT gateway "
            f"and a public subnet for {public_subnet_for}, in the AZ chosen at create time (the reservations' AZ, "
            f"else the first that offers every type; the public subnet in another AZ when the reservations' AZ does "
            f"not offer the other nodes' type); the NAT gateway costs ${NAT_GATEWAY_USD_PER_HOUR}/h plus "
            f"${NAT_GATEWAY_USD_PER_GB}/GB processed (us-east-1) and its public IPv4 address "
            f"${PUBLIC_IPV4_USD_PER_HOUR}/h while the cluster exists")
