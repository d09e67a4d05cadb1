"""EC2 DescribeInstanceTopology and DescribeCapacityReservationTopology, which moto 5.2.5 lacks, over the sandbox's
network layout (:mod:`fmcluster_sandbox.topology`).

Rules, from the EC2 API reference and the EC2 user guide ("Amazon EC2 topology", "Prerequisites for Amazon EC2
topology"):

* DescribeInstanceTopology answers for running instances of the topology types only ("Topology views are only
  available for: Instances in the running state"; "Instance topology is supported for specific instance types
  only"): others are not in the answer. Each InstanceTopology has ``instanceId``, ``instanceType``, ``groupName``
  (its placement group), ``networkNodeSet`` (top-down), ``availabilityZone``, ``zoneId`` and, for UltraServer
  instances, ``capacityBlockId`` ("This parameter is only supported for UltraServer instances").
* InstanceIds: "Maximum 100 explicitly specified instance IDs"; GroupNames: "Maximum 100 explicitly specified
  placement group names"; MaxResults 1 to 100 (botocore's model), "Default: 20", and "You can't specify this
  parameter and the instance IDs parameter in the same request". Filters ``availability-zone``, ``instance-type``
  ("instance type ... or instance family (for example, p4d*). You can use the * wildcard to match zero or more
  characters, or the ? wildcard to match zero or one character") and ``zone-id``.
* DescribeCapacityReservationTopology lists the account's Capacity Reservations in the Region (CapacityReservationIds:
  "Default: Describes all your Capacity Reservations", "Maximum 10"); MaxResults 1 to 10, "Default: 10", not with
  the ids; filters ``availability-zone`` and ``instance-type``. ``networkNodeSet`` is empty when "The instance type
  is not supported" or "The Capacity Reservation is in a state other than active or pending"; otherwise, since AWS
  says only "Depending on the type of Capacity Reservation, you might see only 1, 2, or 3 network nodes", the
  sandbox answers the nodes every slot of the reservation shares, from the top, at most 3 (so a reservation within
  one leaf shows 3, one across middles of a spine 1, one across spines none: the sandbox's choice).

Error codes AWS does not publish for these calls are EC2's usual ones: ``InvalidParameterCombination``,
``InvalidParameterValue``, ``InvalidCapacityReservationId.NotFound``.
"""

from __future__ import annotations

import re
from typing import Any
from xml.sax.saxutils import escape

from fmcluster_sandbox import capacity_blocks, paging, topology
from fmcluster_sandbox.capacity_reservations import REGISTRY, Reservation
from fmcluster_sandbox.ec2_query import error, ok
from fmcluster_sandbox.faults import Faults
from fmcluster_sandbox.moto_backends import ec2

ACTIONS = ("DescribeInstanceTopology", "DescribeCapacityReservationTopology")
MAX_INSTANCE_IDS = MAX_GROUP_NAMES = 100
INSTANCE_PAGE = 20
MAX_RESERVATION_IDS = RESERVATION_PAGE = 10
RESERVATION_NODES = 3


def handle(operation: str, params: dict[str, str], region: str, account: str,
           faults: Faults) -> tuple[int, dict, bytes]:
    request, refused = capacity_blocks.checked(operation, params)
    if refused:
        return refused
    if request.get("DryRun"):
        return error("DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
    if operation == "DescribeInstanceTopology":
        return _instances(request, region, account, faults)
    return _reservations(request, region, account)


def _wildcard(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else ".?" if c == "?" else re.escape(c) for c in pattern) + r"\Z")


def _filtered(values: dict[str, str], filters: list[dict[str, Any]], known: tuple[str, ...]) -> bool | str:
    """True when ``values`` pass every filter (values OR-ed, filters AND-ed); the name of an unknown filter."""
    for item in filters:
        name, wanted = item.get("Name", ""), item.get("Values") or []
        if name not in known:
            return name
        if name == "instance-type":
            if not any(_wildcard(w).match(values[name]) for w in wanted):
                return False
        elif values[name] not in wanted:
            return False
    return True


def _zone_id(backend: Any, region: str, zone: str) -> str:
    found = backend.get_zone_by_name(zone)
    if found is not None:
        return found.zone_id
    from fmcluster_sandbox import local_zones

    local = local_zones.local_zone(region, zone)
    return local.zone_id if local is not None else ""


def _page(items: list[str], request: dict[str, Any], size: int) -> tuple[list[str], str] | tuple[None, tuple]:
    try:
        start = paging.offset(request.get("NextToken"))
    except ValueError:
        return None, error("InvalidParameterValue", "The NextToken is not valid")
    end = start + int(request.get("MaxResults") or size)
    token = f"<nextToken>{paging.token(end)}</nextToken>" if end < len(items) else ""
    return items[start:end], token


def _limits(request: dict[str, Any], ids_field: str, most: int) -> tuple | None:
    if request.get(ids_field) and request.get("MaxResults") is not None:
        return error("InvalidParameterCombination", f"You can't specify MaxResults and {ids_field} in the same "
                                                     "request")
    if len(request.get(ids_field) or []) > most:
        return error("InvalidParameterValue", f"{ids_field}: at most {most} may be given")
    return None


def _instances(request: dict[str, Any], region: str, account: str, faults: Faults) -> tuple[int, dict, bytes]:
    refused = _limits(request, "InstanceIds", MAX_INSTANCE_IDS)
    if refused:
        return refused
    if len(request.get("GroupNames") or []) > MAX_GROUP_NAMES:
        return error("InvalidParameterValue", f"GroupNames: at most {MAX_GROUP_NAMES} may be given")
    ids, groups = set(request.get("InstanceIds") or []), set(request.get("GroupNames") or [])
    backend = ec2(account, region)
    found: list[tuple[str, list[str], str]] = []
    for reservation in list(backend.reservations.values()):
        for instance in reservation.instances:
            if instance.state != "running" or (ids and instance.id not in ids):
                continue
            zone, group = instance.placement.zone, instance.placement.group_name or ""
            if groups and group not in groups:
                continue
            nodes = topology.LAYOUT.nodes(account, zone, instance.id, faults.moved_to(instance.id))
            if not nodes:
                continue
            values = {"availability-zone": zone, "instance-type": instance.instance_type,
                      "zone-id": _zone_id(backend, region, zone)}
            passed = _filtered(values, request.get("Filters") or [], tuple(values))
            if isinstance(passed, str):
                return error("InvalidParameterValue", f"The filter '{escape(passed)}' is invalid")
            if passed:
                found.append((instance.id, nodes, _instance_xml(instance, nodes, values, group)))
    found.sort(key=lambda item: (item[1], item[0]))  # neighbours together, as a tree is read
    page, token = _page([xml for _, _, xml in found], request, INSTANCE_PAGE)
    if page is None:
        return token
    return ok("DescribeInstanceTopologyResponse", f"<instanceSet>{''.join(page)}</instanceSet>{token}")


def _instance_xml(instance: Any, nodes: list[str], values: dict[str, str], group: str) -> str:
    held = REGISTRY.holding(instance.id)
    block = held.block_id if held is not None and held.ultraserver else None
    return (f"<item><instanceId>{instance.id}</instanceId><instanceType>{instance.instance_type}</instanceType>"
            + (f"<groupName>{escape(group)}</groupName>" if group else "")
            + _node_set(nodes)
            + f"<availabilityZone>{values['availability-zone']}</availabilityZone>"
            f"<zoneId>{values['zone-id']}</zoneId>"
            + (f"<capacityBlockId>{block}</capacityBlockId>" if block else "") + "</item>")


def _node_set(nodes: list[str]) -> str:
    return f"<networkNodeSet>{''.join(f'<item>{n}</item>' for n in nodes)}</networkNodeSet>"


def _reservations(request: dict[str, Any], region: str, account: str) -> tuple[int, dict, bytes]:
    refused = _limits(request, "CapacityReservationIds", MAX_RESERVATION_IDS)
    if refused:
        return refused
    mine = {r.reservation_id: r for r in REGISTRY.listed(account, region)}
    wanted = request.get("CapacityReservationIds") or []
    for reservation_id in wanted:
        if reservation_id not in mine:
            return error("InvalidCapacityReservationId.NotFound",
                         f"The capacity reservation ID '{escape(reservation_id)}' does not exist")
    backend = ec2(account, region)
    items = []
    for reservation in [mine[r] for r in wanted] if wanted else list(mine.values()):
        values = {"availability-zone": reservation.availability_zone, "instance-type": reservation.instance_type}
        passed = _filtered(values, request.get("Filters") or [], tuple(values))
        if isinstance(passed, str):
            return error("InvalidParameterValue", f"The filter '{escape(passed)}' is invalid")
        if passed:
            items.append(_reservation_xml(reservation, account, _zone_id(backend, region,
                                                                          reservation.availability_zone)))
    page, token = _page(items, request, RESERVATION_PAGE)
    if page is None:
        return token
    return ok("DescribeCapacityReservationTopologyResponse",
              f"<capacityReservationSet>{''.join(page)}</capacityReservationSet>{token}")


def reservation_nodes(reservation: Reservation, account: str) -> list[str]:
    """The network nodes all of a reservation's capacity shares, top-down, at most :data:`RESERVATION_NODES`."""
    depth = topology.layers(reservation.instance_type)
    if not depth or reservation.state not in topology.RESERVATION_STATES:
        return []
    zone = reservation.availability_zone
    paths = [topology.path(account, zone, slot, depth)
             for slot in topology.LAYOUT.reservation_slots(account, zone, reservation.reservation_id,
                                                           reservation.total)]
    shared = []
    for level in zip(*paths, strict=True):
        if len(set(level)) != 1 or len(shared) == RESERVATION_NODES:
            break
        shared.append(level[0])
    return shared


def _reservation_xml(reservation: Reservation, account: str, zone_id: str) -> str:
    block = reservation.block_id if reservation.ultraserver else None
    return (f"<item><capacityReservationId>{reservation.reservation_id}</capacityReservationId>"
            + (f"<capacityBlockId>{block}</capacityBlockId>" if block else "")
            + f"<state>{reservation.state}</state><instanceType>{escape(reservation.instance_type)}</instanceType>"
            + _node_set(reservation_nodes(reservation, account))
            + f"<availabilityZoneId>{zone_id}</availabilityZoneId>"
            f"<availabilityZone>{escape(reservation.availability_zone)}</availabilityZone></item>")
