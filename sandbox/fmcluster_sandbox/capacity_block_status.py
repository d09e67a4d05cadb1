"""EC2 DescribeCapacityBlocks and DescribeCapacityBlockStatus, which moto 5.2.5 lacks: the account's Capacity
Blocks for ML and the health of each one's capacity and accelerator interconnect.

The blocks are the ``capacity-block`` reservations of :mod:`fmcluster_sandbox.capacity_reservations` (bought with
PurchaseCapacityBlock, or seeded). Rules, from the EC2 API reference:

* CapacityBlock: ``capacityBlockId``, ``ultraserverType`` (UltraServer blocks only), ``availabilityZone``,
  ``capacityReservationIdSet``, ``startDate``, ``endDate``, ``createDate``, ``state`` (CapacityBlockResourceState:
  active | expired | unavailable | cancelled | failed | scheduled | payment-pending | payment-failed) and ``tagSet``.
  DescribeCapacityBlocks' ``ultraserver-type`` filter takes ``instances`` or ``ultraservers`` and the SDKs' Instance
  ``CapacityBlockId`` reads "For P5 instances, a Capacity Block ID refers to a group of instances": an instance
  Capacity Block has an id too, so every block here has one (its reservation's id with ``cb-`` for ``cr-``, the
  sandbox's choice).
* Filters of DescribeCapacityBlocks: ``capacity-block-id``, ``ultraserver-type``, ``availability-zone``, ``state``
  and ``tag:<key>``; of DescribeCapacityBlockStatus: ``interconnect-status``. An id that is not one of the
  account's blocks in the Region is refused (``InvalidCapacityBlockId.NotFound``: the sandbox's code; AWS does not
  publish the one it uses).
* CapacityBlockStatus: ``interconnectStatus`` (ok | impaired | insufficient-data), ``totalCapacity``,
  ``totalAvailableCapacity`` ("the number of resources that can be launched into the Capacity Block"),
  ``totalUnavailableCapacity`` ("unavailable for use due to a system status check failure"), and the same per
  reservation in ``capacityReservationStatusSet``. The reference calls ``totalCapacity`` "the combined amount of
  Available and Unavailable capacity" yet the per-reservation ``totalUnavailableCapacity`` "the used capacity"; the
  sandbox answers the block's size for ``totalCapacity`` (running instances are neither free nor impaired).

DescribeCapacityBlockStatus answers for active blocks only: ParallelCluster's ``CapacityBlockHealthStatusValidator``
(aws-parallelcluster 3.16.1 ``ec2_validators.py``) reads a block missing from its answer as one not yet active
("For scheduled capacity blocks ... health status cannot be checked until the capacity block becomes active").

The interconnect is ``ok`` and nothing is unavailable unless the fault ``capacity_block_health`` (see
:class:`fmcluster_sandbox.faults.Faults`) impairs a block, by its capacity block id or its reservation id: a
test can then see what fmcluster says of an impaired block. Unavailable capacity is taken from what is free.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from xml.sax.saxutils import escape

from fmcluster_sandbox import capacity_blocks
from fmcluster_sandbox.capacity_reservations import REGISTRY, Reservation
from fmcluster_sandbox.ec2_query import error, ok, tag_set
from fmcluster_sandbox.faults import Faults

#: A reservation's state as its Capacity Block's (CapacityBlockResourceState has no ``pending``/``assessing``…).
_BLOCK_STATES = {"active", "expired", "unavailable", "cancelled", "failed", "scheduled", "payment-pending",
                 "payment-failed"}


def _blocks(request: dict[str, Any], account: str, region: str) -> tuple[list[Reservation], tuple | None]:
    blocks = REGISTRY.capacity_blocks(account, region)
    wanted = request.get("CapacityBlockIds") or []
    known = {b.block_id for b in blocks}
    for block_id in wanted:
        if block_id not in known:
            return [], error("InvalidCapacityBlockId.NotFound", f"The Capacity Block ID '{escape(block_id)}' "
                                                                "does not exist")
    return [b for b in blocks if not wanted or b.block_id in wanted], None


def _state(block: Reservation) -> str:
    return block.state if block.state in _BLOCK_STATES else "unavailable"


def _matches(block: Reservation, filters: list[dict[str, Any]]) -> tuple[bool, str | None]:
    """Whether ``block`` passes every filter (values OR-ed, filters AND-ed, as EC2 filters are); or the unknown
    filter's name."""
    for item in filters:
        name, values = item.get("Name", ""), item.get("Values") or []
        if name == "capacity-block-id":
            value = block.block_id
        elif name == "ultraserver-type":
            value = "ultraservers" if block.ultraserver else "instances"
        elif name == "availability-zone":
            value = block.availability_zone
        elif name == "state":
            value = _state(block)
        elif name.startswith("tag:"):
            value = block.tags.get(name[4:])
        else:
            return False, name
        if value not in values:
            return False, None
    return True, None


def describe_blocks(params: dict[str, str], region: str, account: str) -> tuple[int, dict, bytes]:
    """DescribeCapacityBlocks."""
    request, refused = capacity_blocks.checked("DescribeCapacityBlocks", params)
    if refused:
        return refused
    blocks, refused = _blocks(request, account, region)
    if refused:
        return refused
    items = []
    for block in blocks:
        passed, unknown = _matches(block, request.get("Filters") or [])
        if unknown:
            return error("InvalidParameterValue", f"The filter '{escape(unknown)}' is invalid")
        if not passed:
            continue
        end = f"<endDate>{_iso(block.end)}</endDate>" if block.end else ""
        server = f"<ultraserverType>{block.ultraserver}</ultraserverType>" if block.ultraserver else ""
        items.append(f"<item><capacityBlockId>{block.block_id}</capacityBlockId>{server}"
                     f"<availabilityZone>{escape(block.availability_zone)}</availabilityZone>"
                     f"<capacityReservationIdSet><item>{block.reservation_id}</item></capacityReservationIdSet>"
                     f"<startDate>{_iso(block.start)}</startDate>{end}"
                     f"<createDate>{_iso(min(block.created, block.start))}</createDate>"
                     f"<state>{_state(block)}</state>{tag_set(block.tags)}</item>")
    return ok("DescribeCapacityBlocksResponse", f"<capacityBlockSet>{''.join(items)}</capacityBlockSet>")


def describe_status(params: dict[str, str], region: str, account: str, faults: Faults) -> tuple[int, dict, bytes]:
    """DescribeCapacityBlockStatus."""
    request, refused = capacity_blocks.checked("DescribeCapacityBlockStatus", params)
    if refused:
        return refused
    blocks, refused = _blocks(request, account, region)
    if refused:
        return refused
    wanted_status: list[str] | None = None
    for item in request.get("Filters") or []:
        if item.get("Name") != "interconnect-status":
            return error("InvalidParameterValue", f"The filter '{escape(str(item.get('Name')))}' is invalid")
        wanted_status = list(item.get("Values") or [])
    items = []
    for block in blocks:
        if _state(block) != "active":  # no health before the start, nor after the end (see the module's docstring)
            continue
        health = faults.block_health(block.block_id, block.reservation_id)
        interconnect = health.get("interconnect_status", "ok")
        if wanted_status is not None and interconnect not in wanted_status:
            continue
        unavailable = min(int(health.get("unavailable", 0)), block.available)
        available = block.available - unavailable
        counts = (f"<totalCapacity>{block.total}</totalCapacity>"
                  f"<totalAvailableCapacity>{available}</totalAvailableCapacity>"
                  f"<totalUnavailableCapacity>{unavailable}</totalUnavailableCapacity>")
        items.append(f"<item><capacityBlockId>{block.block_id}</capacityBlockId>"
                     f"<interconnectStatus>{interconnect}</interconnectStatus>{counts}"
                     f"<capacityReservationStatusSet><item><capacityReservationId>{block.reservation_id}"
                     f"</capacityReservationId>{counts}</item></capacityReservationStatusSet></item>")
    return ok("DescribeCapacityBlockStatusResponse",
              f"<capacityBlockStatusSet>{''.join(items)}</capacityBlockStatusSet>")


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
