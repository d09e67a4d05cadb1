"""Where a cluster's nodes go, decided from the spec alone: whether fmcluster creates the network, how it
splits it into subnets, and which queues need a private subnet with a NAT gateway.

A node with several network interfaces (a multi-EFA p5/p5en/p6 node) gets no public IPv4 address: EC2
assigns one only to a launch with a single interface ("Assign a public IPv4 address during instance
launch", EC2 user guide). Such a node reaches the PCS API and S3 only through a NAT gateway or VPC endpoints.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from fmcluster.spec import decisions
from fmcluster.spec.backend_rules import backend_rules
from fmcluster.spec.models import Queue, Spec

Report = Callable[[tuple, str], None]
# The widest and narrowest VPC fmcluster splits: AWS allows /16 to /28; a /20 still leaves the compute
# subnet 2,043 addresses (AWS keeps five per subnet).
VPC_PREFIX_RANGE = (16, 20)


def creates_network(spec: Spec) -> bool:
    """fmcluster makes the network unless the spec names a subnet or opts out with ``create_vpc: false``."""
    if spec.network.create_vpc is not None:
        return spec.network.create_vpc
    return spec.network.subnet_id is None


def subnet_cidrs(vpc_cidr: str) -> tuple[str, str]:
    """(private compute subnet, public head/login subnet): the first half, then a sixteenth after it."""
    network = ipaddress.ip_network(vpc_cidr)
    private = next(network.subnets(prefixlen_diff=1))
    public = list(network.subnets(prefixlen_diff=4))[8]
    return str(private), str(public)


def interface_count(queue: Queue) -> int:
    """Network interfaces a node of the queue launches with (an unknown EFA layout counts as several)."""
    try:
        return max(1, len(decisions.efa_network_interfaces(queue)))
    except LookupError:
        return 2


def multi_interface_queues(spec: Spec) -> list[tuple[int, Queue]]:
    return [(index, q) for index, q in enumerate(spec.queues) if interface_count(q) > 1]


def check_network(spec: Spec, error: Report, warn: Report) -> None:
    """Load-time rules of the network fields (run with :mod:`fmcluster.spec.rules`)."""
    network = spec.network
    given = network.model_fields_set
    if network.create_vpc and network.subnet_id:
        error(("network", "create_vpc"), "a created network has its own subnets: remove network.subnet_id, or "
                                         "remove create_vpc to use the subnet")
    if creates_network(spec) and network.head_subnet_id:
        error(("network", "head_subnet_id"), "the head/login node goes to the public subnet of the network "
              "fmcluster creates; a head subnet needs network.subnet_id (a compute subnet of the same VPC)")
    if "vpc_cidr" in given:
        if not creates_network(spec):
            error(("network", "vpc_cidr"), "only a network fmcluster creates takes vpc_cidr; with network.subnet_id "
                                           "(or create_vpc: false) the VPC is yours")
        else:
            _check_vpc_cidr(network.vpc_cidr, error)
    for index, queue in enumerate(spec.queues):
        if queue.subnet_id and not network.subnet_id:
            error(("queues", index, "subnet_id"), "a queue's own subnet must be in the VPC of network.subnet_id: "
                  "set network.subnet_id too (a network fmcluster creates has one compute subnet)")
    if network.subnet_id is None and network.create_vpc is False:
        for index, queue in multi_interface_queues(spec):
            message = (f"'{queue.instance_type}' launches with {interface_count(queue)} network interfaces, so it "
                       "gets no public IPv4 address, and the default VPC's subnets have no NAT gateway: its nodes "
                       "could not reach the internet")
            remedy = ("remove create_vpc: false (fmcluster then creates a private subnet with a NAT gateway), or "
                      "set network.subnet_id to a private subnet with a route to a NAT gateway")
            backend_rules(spec.backend).nodes_without_internet(("queues", index, "instance_type"), message, remedy,
                                                               error, warn)


def _check_vpc_cidr(cidr: str, error: Report) -> None:
    path = ("network", "vpc_cidr")
    try:
        network = ipaddress.ip_network(cidr, strict=True)
    except ValueError as exc:
        error(path, f"'{cidr}' is not a network address: {exc}")
        return
    low, high = VPC_PREFIX_RANGE
    if network.version != 4:
        error(path, f"'{cidr}' is IPv6; a VPC's primary block is IPv4")
    elif not low <= network.prefixlen <= high:
        error(path, f"'{cidr}' is a /{network.prefixlen}; fmcluster splits a /{low} to a /{high} into its subnets")


def check_access(spec: Spec, error: Report, warn: Report) -> None:
    """Load-time rules of the IAM policies and security groups the spec adds."""
    network = spec.network
    for field in ("additional_security_groups", "security_groups"):
        groups = getattr(network, field)
        if groups and creates_network(spec):
            error(("network", field), "security groups belong to a VPC, and the network fmcluster creates is new: "
                  "set network.subnet_id to a subnet in their VPC")
        for index, group in enumerate(groups):
            if group in groups[:index]:
                error(("network", field, index), f"{group} is listed twice")
    policies = list(spec.iam.additional_policies)
    for index, arn in enumerate(policies):
        if arn in policies[:index]:
            error(("iam", "additional_policies", index), f"{arn} is listed twice")
