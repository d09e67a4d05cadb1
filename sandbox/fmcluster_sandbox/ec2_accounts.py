"""What a new AWS account's EC2 holds where moto's differs: the default VPC's way to the internet.

"Default VPCs" (Amazon VPC user guide): AWS creates the default VPC with a default subnet per
Availability Zone, an internet gateway attached to it, and a route in the main route table that sends all
traffic (0.0.0.0/0) to that internet gateway. moto creates the VPC and subnets but no gateway and no route.
"""

from __future__ import annotations

_installed = False


def install() -> None:
    """Give every default VPC moto creates from now on its internet gateway and default route (idempotent)."""
    global _installed
    if _installed:
        return
    from moto.ec2.models.vpcs import VPCBackend

    original = VPCBackend.create_default_vpc

    def create_default_vpc(self):
        vpc = original(self)
        gateway = self.create_internet_gateway()
        self.attach_internet_gateway(gateway.id, vpc.id)
        main = next(t for t in self.route_tables.values() if t.vpc_id == vpc.id and t.main_association_id)
        self.create_route(main.id, "0.0.0.0/0", gateway_id=gateway.id)
        return vpc

    VPCBackend.create_default_vpc = create_default_vpc
    _installed = True
