"""Find where a cluster's nodes go: the spec's subnet, or the default VPC's subnet in an AZ that
offers every instance type the spec asks for (what a new AWS account, and the sandbox, have) — the AZ of
the spec's capacity reservations / Capacity Blocks (and of its Capacity Reservation groups' reservations of
the queues' types) when they share one, as reserved capacity is usable only there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fmcluster.errors import AwsError, UsageError
from fmcluster.spec import decisions
from fmcluster.spec.backend_rules import backend_rules
from fmcluster.spec.models import Spec, instance_types_of
from fmcluster.spec.networking import creates_network


@dataclass(frozen=True)
class Placement:
    subnet_id: str
    vpc_id: str
    availability_zone: str
    # The VPC's IPv4 blocks: NFS file systems fmcluster creates admit clients from them.
    vpc_cidrs: tuple[str, ...] = ()
    # A network fmcluster creates (fmcluster.aws.vpc): its ids are references filled at create time.
    created: bool = False
    # A created network's AZ for the nodes that are not compute nodes (head/login node, EKS system nodes) when
    # the compute AZ (a reservation's) does not offer their types; None: the compute AZ.
    head_zone: str | None = None

    @property
    def head_availability_zone(self) -> str:
        return self.head_zone or self.availability_zone

    def values(self) -> dict[str, Any]:
        """What documents refer to as ``${network.…}``."""
        return {"network.vpc_id": self.vpc_id, "network.subnet_id": self.subnet_id,
                "network.availability_zone": self.availability_zone,
                "network.head_availability_zone": self.head_availability_zone,
                "network.vpc_ip_ranges": [{"CidrIp": block, "Description": "clients in the VPC"}
                                          for block in self.vpc_cidrs]}

    def describe(self) -> str:
        if self.created and self.head_zone:
            return (f"a new VPC ({', '.join(self.vpc_cidrs)}) with its compute subnet in {self.availability_zone} "
                    f"and its public subnet in {self.head_zone}")
        if self.created:
            return f"a new VPC ({', '.join(self.vpc_cidrs)}) with its subnets in {self.availability_zone}"
        return f"{self.subnet_id} in {self.availability_zone} ({self.vpc_id})"


def vpc_cidrs(ec2: Any, vpc_id: str) -> tuple[str, ...]:
    vpc = ec2.describe_vpcs(VpcIds=[vpc_id])["Vpcs"][0]
    blocks = [a["CidrBlock"] for a in vpc.get("CidrBlockAssociationSet") or []
              if a.get("CidrBlockState", {}).get("State", "associated") == "associated"] or [vpc["CidrBlock"]]
    return tuple(dict.fromkeys(blocks))


def instance_types(spec: Spec) -> list[str]:
    """The types whose nodes go in the cluster's subnet: the head (or login) node's, an EKS cluster's system node
    group's (it shares the nodes' subnet, and EKS's control plane takes it), and those of the queues without a
    subnet of their own."""
    return sorted({*head_types(spec), *compute_types(spec)})


def head_types(spec: Spec) -> list[str]:
    """The types of the cluster's own nodes besides the queues': the head (or login) node's, an EKS cluster's
    system node group's. In a network fmcluster creates they may go to a subnet in another AZ of the VPC."""
    head = decisions.head_node_type(spec)
    system = backend_rules(spec.backend).system_nodes(spec)
    return sorted({*([head] if head else []), *([system[0]] if system else [])})


def compute_types(spec: Spec) -> list[str]:
    # A queue in its own subnet (queues[].subnet_id, e.g. in the Local Zone that sells its type) is not placed here.
    return sorted({t for q in spec.queues if not q.subnet_id for t in instance_types_of(q)})


def _common_zones(ec2: Any, types: list[str]) -> set[str] | None:
    """The zones that offer every one of ``types``; None for no types."""
    zones: set[str] | None = None
    for instance_type in types:
        offered = offering_zones(ec2, instance_type)
        zones = offered if zones is None else zones & offered
    return zones


def offering_zones(ec2: Any, instance_type: str) -> set[str]:
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [instance_type]}]
    )
    return {offer["Location"] for page in pages for offer in page["InstanceTypeOfferings"]}


def zone_label(ec2: Any, zone: str) -> str:
    """``zone``, or ``Local Zone <zone>`` when EC2 says it is one (DescribeAvailabilityZones ZoneType)."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    try:
        found = ec2.describe_availability_zones(ZoneNames=[zone], AllAvailabilityZones=True)["AvailabilityZones"]
    except (ClientError, BotoCoreError, ResponseParserError):
        return zone
    return f"Local Zone {zone}" if found and found[0].get("ZoneType") == "local-zone" else zone


def no_common_zone(spec: Spec, ec2: Any, where: str) -> str:
    """Why no one zone ``where`` takes every type of the spec, naming the zones each type is sold in."""
    sold = {t: sorted(offering_zones(ec2, t)) for t in instance_types(spec)}
    places = "; ".join(f"{t} in {', '.join(zone_label(ec2, z) for z in zones) or 'no zone of ' + spec.region}"
                       for t, zones in sold.items())
    return (f"no Availability Zone of {spec.region} offers all of {', '.join(sold)} {where}({places}): a queue "
            "of a type sold elsewhere needs its own queues[].subnet_id in that zone (a Local Zone only after "
            "the account opts in to its zone group), with network.subnet_id in an Availability Zone of the "
            "same VPC")


def reservation_zone(spec: Spec, ec2: Any, groups: Callable[[], Any] | None = None) -> str | None:
    """The one AZ every queue's reservation is in; None when no queue has one, they span AZs, or the
    lookup fails (unknown id, no permission: preflight reports the bad reservation). A queue's Capacity
    Reservation group (read with the resource-groups client ``groups()`` makes) counts by its active
    reservations of the queue's instance type, the ones its nodes can run in."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    ids = sorted({q.capacity.reservation_id for q in spec.queues if q.capacity.reservation_id})
    grouped = [q for q in spec.queues if q.capacity.resource_group_arn]
    if not ids and not (grouped and groups is not None):
        return None
    try:
        zones: set[str | None] = set()
        if ids:
            found = ec2.describe_capacity_reservations(CapacityReservationIds=ids)["CapacityReservations"]
            if {r.get("CapacityReservationId") for r in found} != set(ids):
                return None
            zones |= {r.get("AvailabilityZone") for r in found}
        for queue in grouped if groups is not None else []:
            zones |= _group_zones(queue.capacity.resource_group_arn or "", queue.instance_type, ec2, groups())
    except (ClientError, BotoCoreError, ResponseParserError):
        return None
    return zones.pop() if len(zones) == 1 else None


def _group_zones(arn: str, instance_type: str, ec2: Any, groups: Any) -> set[str | None]:
    members = [item["Identifier"]["ResourceArn"] for page in groups.get_paginator("list_group_resources").paginate(
        Group=arn) for item in page.get("Resources") or []
        if item["Identifier"].get("ResourceType") == "AWS::EC2::CapacityReservation"]
    if not members:
        return set()
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[m.rsplit("/", 1)[-1] for m in members])
    return {r.get("AvailabilityZone") for r in found["CapacityReservations"]
            if r.get("InstanceType") == instance_type and r.get("State") == "active"}


def resolve_placement(spec: Spec, ec2: Any, groups: Callable[[], Any] | None = None) -> Placement:
    """Raise :class:`UsageError`/:class:`AwsError` with the fix when no placement works.

    Without a subnet in the spec: the default VPC's subnet in the reservations' AZ (see
    :func:`reservation_zone`) when that AZ offers every type, else in the first AZ that does."""
    from botocore.exceptions import ClientError

    if creates_network(spec):
        return _created_network_placement(spec, ec2, groups)
    if spec.network.subnet_id:
        try:
            subnet = ec2.describe_subnets(SubnetIds=[spec.network.subnet_id])["Subnets"][0]
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            raise AwsError(f"subnet {spec.network.subnet_id}", code, exc.response["Error"]["Message"],
                           "check network.subnet_id and the region; `aws ec2 describe-subnets` lists yours") from None
        return Placement(subnet["SubnetId"], subnet["VpcId"], subnet["AvailabilityZone"],
                         vpc_cidrs(ec2, subnet["VpcId"]))

    vpcs = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    if not vpcs:
        raise UsageError(f"the spec names no subnet and region {spec.region} has no default VPC: "
                         "set network.subnet_id")
    vpc_id = vpcs[0]["VpcId"]
    subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]
    zones: set[str] | None = None
    for instance_type in instance_types(spec):
        offered = offering_zones(ec2, instance_type)
        zones = offered if zones is None else zones & offered
    candidates = sorted((s for s in subnets if s["AvailabilityZone"] in (zones or set())),
                        key=lambda s: s["AvailabilityZone"])
    if not candidates:
        raise UsageError(no_common_zone(spec, ec2, "in the default VPC "))
    reserved = reservation_zone(spec, ec2, groups)
    chosen = next((s for s in candidates if s["AvailabilityZone"] == reserved), candidates[0])
    return Placement(chosen["SubnetId"], vpc_id, chosen["AvailabilityZone"], vpc_cidrs(ec2, vpc_id))


def _created_network_placement(spec: Spec, ec2: Any, groups: Callable[[], Any] | None = None) -> Placement:
    """The AZs of the network fmcluster creates. Its compute subnet goes to the AZ of the spec's reservations
    (reserved capacity is usable only there), else to the first AZ (by name) that offers every type. The public
    subnet, where the head/login node (or EKS's system nodes, beside the control plane's second subnet) go, is
    in the same AZ when it offers their types, else in the first AZ that does: a VPC's subnets may be in
    different AZs, and each backend lets those nodes live in a subnet of their own (ParallelCluster
    HeadNode.Networking.SubnetId, the PCS login node group's subnetIds, an EKS node group's subnets). Its ids are
    references to the resources that make it."""
    from fmcluster.render.network import COMPUTE_SUBNET_REF, VPC_REF

    compute = _common_zones(ec2, compute_types(spec)) or set()
    head = _common_zones(ec2, head_types(spec))
    everything = compute & head if head is not None else compute
    reserved = reservation_zone(spec, ec2, groups)
    if reserved is None or reserved in everything:
        # Without reservations the AZ is free: one that offers every type keeps the cluster in one AZ.
        if not everything:
            raise UsageError(no_common_zone(spec, ec2, ""))
        zone = reserved or sorted(everything)[0]
        return Placement(COMPUTE_SUBNET_REF, VPC_REF, zone, (spec.network.vpc_cidr,), created=True)
    problem = layout_problem(spec, ec2, reserved)
    if problem:
        raise UsageError(problem)
    return Placement(COMPUTE_SUBNET_REF, VPC_REF, reserved, (spec.network.vpc_cidr,), created=True,
                     head_zone=sorted(head_zones(spec, ec2))[0])


def head_zones(spec: Spec, ec2: Any) -> set[str]:
    """The Availability Zones (not Local Zones: a created network's public subnet and NAT gateway, and EKS's
    second control-plane subnet, go to an AZ) that offer every head type of the spec."""
    head = _common_zones(ec2, head_types(spec))
    if head is None:
        return set()
    regular = {z["ZoneName"] for z in ec2.describe_availability_zones(Filters=[
        {"Name": "zone-type", "Values": ["availability-zone"]}, {"Name": "state", "Values": ["available"]}],
    )["AvailabilityZones"]}
    return head & regular


def layout_problem(spec: Spec, ec2: Any, zone: str) -> str | None:
    """Why no network fmcluster creates can put the spec's compute nodes in ``zone`` (a reservation's AZ), or
    None when one can: the compute subnet there, the head/login (or EKS system) nodes in an AZ that offers
    their types. A Local Zone takes only a subnet the user made (after opting in to its zone group)."""
    missing = [t for t in compute_types(spec) if zone not in offering_zones(ec2, t)]
    if missing:
        places = "; ".join(f"{t} in {', '.join(sorted(offering_zones(ec2, t))) or 'no zone of ' + spec.region}"
                           for t in missing)
        return (f"the spec's capacity reservations are in {zone}, which does not offer {', '.join(missing)} "
                f"({places}): give each queue a reservation in an AZ that offers its type")
    if zone_label(ec2, zone) != zone:
        return no_common_zone(spec, ec2, "")
    if head_types(spec) and not head_zones(spec, ec2):
        return no_common_zone(spec, ec2, "")
    return None


def zone_problem(spec: Spec, ec2: Any, zone: str, queue: str) -> str | None:
    """Why a Capacity Block in ``zone`` could not serve ``queue`` of the spec, or None when the spec's network
    can put the queue's nodes there: a named subnet must be in that AZ; a created network must have a layout
    with the compute subnet there (:func:`layout_problem`); the default VPC's subnet must offer every type."""
    from botocore.exceptions import ClientError

    found = next(q for q in spec.queues if q.name == queue)
    subnet = found.subnet_id or spec.network.subnet_id
    if subnet:
        field = "queues[].subnet_id" if found.subnet_id else "network.subnet_id"
        try:
            subnets = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"]
        except ClientError as exc:
            # A subnet EC2 does not have (EC2 API error codes: InvalidSubnetID.NotFound) leaves the nodes' AZ
            # unknown, so no block can be judged usable; other refusals (permissions) stay preflight's to report.
            if not str(exc.response.get("Error", {}).get("Code", "")).startswith("InvalidSubnetID."):
                return None
            return (f"the spec's subnet {subnet} does not exist in {ec2.meta.region_name}, so the nodes' AZ is "
                    f"unknown: point {field} at a subnet in {zone}, or remove it and fmcluster creates the network")
        where = subnets[0]["AvailabilityZone"] if subnets else None
        if where and where != zone:
            return (f"the queue's subnet {subnet} is in {where}: point {field} at a subnet in {zone} first, or "
                    f"choose an offering in {where}")
        return None
    if creates_network(spec):
        return _other_reservations_problem(spec, ec2, zone, queue) or layout_problem(spec, ec2, zone)
    missing = [t for t in instance_types(spec) if zone not in offering_zones(ec2, t)]
    if missing:
        return (f"the default VPC's subnet in {zone} would take every node, and {zone} does not offer "
                f"{', '.join(missing)}")
    return None


def _other_reservations_problem(spec: Spec, ec2: Any, zone: str, queue: str) -> str | None:
    """A created network has one compute subnet: the other queues' reservations must be in ``zone`` too."""
    from botocore.exceptions import ClientError

    others = {q.capacity.reservation_id: q.name for q in spec.queues
              if q.name != queue and not q.subnet_id and q.capacity.reservation_id}
    for rid, name in sorted(others.items()):
        try:
            found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
        except ClientError:  # a placeholder or unknown id: preflight reports it
            continue
        where = found[0].get("AvailabilityZone") if found else None
        if where and where != zone:
            return (f"queue {name}'s reservation {rid} is in {where}, and the network fmcluster creates has one "
                    f"compute subnet: choose an offering in {where}, or give the queues subnets of their own "
                    "(network.subnet_id, queues[].subnet_id)")
    return None
