"""Whether a node can reach the PCS API to register (``RegisterComputeNodeGroupInstance``).

"AWS PCS VPC and subnet requirements and considerations" (PCS user guide): the VPC needs DNS hostnames and
DNS resolution, "otherwise, nodes can't register", and it "might require VPC endpoints using AWS
PrivateLink to be able to contact the AWS PCS API". So a node reaches PCS through one of: a default route
(0.0.0.0/0) to a NAT gateway; a default route to an internet gateway *and* a public IPv4 address on the
instance (which EC2 gives only to single-interface launches); or a PCS interface endpoint
(``com.amazonaws.<region>.pcs``) with private DNS in the VPC. Through a gateway, its security groups must
also let the traffic out (an egress rule to 0.0.0.0/0).
"""

from __future__ import annotations

from typing import Any


def _route_table(ec2: Any, subnet: Any) -> Any | None:
    tables = [t for t in ec2.route_tables.values() if t.vpc_id == subnet.vpc_id]
    for table in tables:
        if subnet.id in table._associations.values():
            return table
    return next((t for t in tables if t.main_association_id is not None), None)


def _default_route_targets(table: Any | None) -> tuple[bool, bool]:
    """(route to a NAT gateway, route to an internet gateway) for 0.0.0.0/0."""
    nat = igw = False
    for route in (table.routes if table is not None else []):
        if route.destination_cidr_block != "0.0.0.0/0":
            continue
        if route.nat_gateway is not None and getattr(route.nat_gateway, "state", "available") == "available":
            nat = True
        if str(getattr(route.gateway, "id", "") or "").startswith("igw-"):
            igw = True
    return nat, igw


def _pcs_endpoint(ec2: Any, vpc_id: str, region: str) -> bool:
    service = f"com.amazonaws.{region}.pcs"
    return any(e.vpc_id == vpc_id and e.service_name == service and (e.vpc_endpoint_type or "").lower() == "interface"
               and e.private_dns_enabled is not False and e.state == "available"
               for e in ec2.vpc_end_points.values())


def _egress_to_internet(instance: Any) -> bool:
    """Whether the security groups of the instance's primary interface let HTTPS out to 0.0.0.0/0 (security
    groups are stateful and deny what no egress rule allows: EC2 guide, "Security group rules"; PCS user
    guide, "Security groups in AWS PCS", allows all outbound traffic to 0.0.0.0/0 in its example)."""
    nics = getattr(instance, "nics", None) or {}
    groups = nics[0].group_set if 0 in nics else getattr(instance, "security_groups", [])
    for group in groups:
        for rule in getattr(group, "egress_rules", []):
            if (rule.ip_range or {}).get("CidrIp") != "0.0.0.0/0":
                continue
            protocol = str(rule.ip_protocol)
            if protocol in ("-1", "all") or (protocol in ("tcp", "6") and rule.from_port is not None
                                               and rule.from_port <= 443 <= rule.to_port):
                return True
    return False


def why_unreachable(ec2: Any, instance: Any, region: str) -> str | None:
    """None when the instance can reach PCS; otherwise what stops it, in PCS's terms."""
    subnet = ec2.get_subnet(instance.subnet_id)
    vpc = ec2.get_vpc(subnet.vpc_id)
    if not (getattr(vpc, "enable_dns_support", True) and getattr(vpc, "enable_dns_hostnames", True)):
        return (f"VPC {vpc.id} does not have both DNS resolution and DNS hostnames enabled; nodes can't resolve "
                "the PCS endpoint to register")
    nat, igw = _default_route_targets(_route_table(ec2, subnet))
    if _pcs_endpoint(ec2, vpc.id, region):
        return None
    if (nat or igw) and not _egress_to_internet(instance):
        return (f"the security groups of instance {instance.id} allow no outbound HTTPS to 0.0.0.0/0, so it cannot "
                "reach the PCS API through the subnet's gateway")
    if nat:
        return None
    if igw and instance.public_ip:
        return None
    if igw:
        return (f"instance {instance.id} in subnet {subnet.id} has no public IPv4 address (EC2 assigns none to an "
                "instance with several network interfaces) and the subnet has no route to a NAT gateway and the "
                f"VPC no PCS interface endpoint (com.amazonaws.{region}.pcs)")
    return (f"subnet {subnet.id} has no route to a NAT gateway or internet gateway and VPC {vpc.id} has no PCS "
            f"interface endpoint (com.amazonaws.{region}.pcs)")
