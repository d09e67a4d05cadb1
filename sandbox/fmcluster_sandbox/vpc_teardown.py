"""What AWS refuses, and does, when a VPC's gateways are taken apart, where moto does not.

* DeleteNatGateway: "When you delete a NAT gateway, its Elastic IP address is disassociated, but not
  released" and its network interface is deleted (Amazon VPC guide, "Delete a NAT gateway"). moto marks the
  gateway deleted and leaves both.
* DetachInternetGateway: refused with ``DependencyViolation`` while the VPC has mapped public addresses
  ("Network vpc-… has some mapped public address(es). Please unmap those public address(es) before
  detaching the gateway."; Amazon VPC guide, "Detach an internet gateway from your VPC": "If your VPC has
  resources with associated public IP addresses or Elastic IP addresses, you must first release them").
  Here: Elastic IP addresses associated with an interface in the VPC (a live NAT gateway's).
* DeleteVpc: refused while an internet gateway is attached (EC2 API reference, DeleteVpc: "you must detach
  or delete all gateways and resources that are associated with the VPC"). moto leaves this a TODO.
"""

from __future__ import annotations

from typing import Any

_INSTALLED = False


def _mapped_addresses(backend: Any, vpc_id: str) -> list[str]:
    mapped = []
    for address in backend.addresses:
        eni = getattr(address, "eni", None)
        subnet = getattr(eni, "subnet", None)
        if eni is not None and getattr(subnet, "vpc_id", None) == vpc_id:
            mapped.append(address.public_ip)
    return mapped


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    from moto.ec2.exceptions import DependencyViolationError
    from moto.ec2.models import EC2Backend

    delete_nat_gateway = EC2Backend.delete_nat_gateway
    detach_internet_gateway = EC2Backend.detach_internet_gateway
    delete_vpc = EC2Backend.delete_vpc

    def delete_nat(self: Any, nat_gateway_id: str) -> Any:
        gateway = delete_nat_gateway(self, nat_gateway_id)
        eni = getattr(gateway, "_eni", None)
        if eni is not None:
            for address in list(self.addresses):
                if address.eni is eni:
                    self.disassociate_address(address=address.public_ip)
            self.enis.pop(eni.id, None)
            gateway._eni = None
        return gateway

    def detach_gateway(self: Any, internet_gateway_id: str, vpc_id: str) -> None:
        if _mapped_addresses(self, vpc_id):
            raise DependencyViolationError(f"Network {vpc_id} has some mapped public address(es). Please unmap "
                                           "those public address(es) before detaching the gateway.")
        detach_internet_gateway(self, internet_gateway_id, vpc_id)

    def delete(self: Any, vpc_id: str) -> Any:
        attached = [g.id for g in self.internet_gateways.values() if g.vpc is not None and g.vpc.id == vpc_id]
        if attached:
            raise DependencyViolationError(f"The vpc '{vpc_id}' has dependencies and cannot be deleted.")
        return delete_vpc(self, vpc_id)

    EC2Backend.delete_nat_gateway = delete_nat
    EC2Backend.detach_internet_gateway = detach_gateway
    EC2Backend.delete_vpc = delete
    _INSTALLED = True
