"""EC2 capacity reservations (ODCRs) and Capacity Blocks, which moto 5.2.5 does not implement.

Speaks the EC2 query protocol for CreateCapacityReservation, DescribeCapacityReservations,
ModifyCapacityReservation and CancelCapacityReservation. Capacity Blocks are bought with PurchaseCapacityBlock
(:mod:`fmcluster_sandbox.capacity_blocks`), or seeded as AWS would hold them (a busy one, an expired one)
through the control route ``POST /_fmcluster/capacity-reservations`` (see :meth:`CapacityReservations.seed`).

Instances launched into a reservation count against it (``availableInstanceCount`` goes down, and back up
when they terminate), as the EC2 user guide describes for targeted ODCRs and Capacity Blocks. A Capacity
Block's state follows its dates unless the seed says otherwise: ``scheduled`` before its start, ``active``
until its end, ``expired`` after ("Capacity Blocks for ML", EC2 user guide).

What may be modified or cancelled, and when (:func:`modify_refusal`, :func:`cancel_refusal`): "You can't modify or
cancel a Capacity Block" (EC2 API CancelCapacityReservation; EC2 guide "Cancel a Capacity Reservation"); an ODCR is
cancelled only while ``assessing`` or ``active`` (the same pages), and modified as "Modify an active Capacity
Reservation" allows by state: ``assessing``/``scheduled`` tags only, ``pending`` and ``expired``/``cancelled``/
``unsupported``/``failed`` not at all; its instance eligibility changes only while no instance uses it. AWS
publishes no error code for these refusals: ``UnsupportedOperation`` and ``IncorrectState`` (EC2 API "Error codes",
common client errors) are the sandbox's choice.

Before a Capacity Block begins (EC2 guide "View Capacity Blocks"): "the available capacity appears as zero. You can see
how many instances will be available in your Capacity Block by the tag value for the tag key
``aws:ec2capacityreservation:incrementalRequestedQuantity``" (:meth:`Reservation.shown_available`,
:meth:`Reservation.shown_tags`).
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from fmcluster_sandbox import model_check
from fmcluster_sandbox.ec2_query import error, ok, tag_set

ACTIONS = ("CreateCapacityReservation", "DescribeCapacityReservations", "ModifyCapacityReservation",
           "CancelCapacityReservation")
# States in which "Modify an active Capacity Reservation" allows a change beyond tags (active), or any at all.
_MODIFIABLE = ("active",)
_CANCELLABLE = ("assessing", "active")
REQUESTED_QUANTITY_TAG = "aws:ec2capacityreservation:incrementalRequestedQuantity"


@dataclass
class Reservation:
    reservation_id: str
    account: str
    region: str
    instance_type: str
    availability_zone: str
    total: int
    explicit_state: str | None = None
    reservation_type: str = "default"
    start: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    end: dt.datetime | None = None
    platform: str = "Linux/UNIX"
    tenancy: str = "default"
    match_criteria: str = "open"
    tags: dict[str, str] = field(default_factory=dict)
    instances: set[str] = field(default_factory=set)
    held: int = 0  # in use by instances the sandbox does not hold (a seeded busy reservation)
    capacity_block_id: str | None = None  # an UltraServer Capacity Block bought with PurchaseCapacityBlock
    ultraserver: str | None = None
    created: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))

    @property
    def block_id(self) -> str | None:
        """The Capacity Block's id (DescribeCapacityBlocks): every Capacity Block has one, an instance block too
        (see :mod:`fmcluster_sandbox.capacity_block_status`); None for an ODCR."""
        if self.capacity_block_id:
            return self.capacity_block_id
        return "cb-" + self.reservation_id[3:] if self.is_capacity_block else None

    @property
    def available(self) -> int:
        return max(self.total - self.held - len(self.instances), 0)

    @property
    def shown_available(self) -> int:
        """What DescribeCapacityReservations answers as available: zero for a Capacity Block before its start."""
        return 0 if self.is_capacity_block and self.state == "scheduled" else self.available

    @property
    def shown_tags(self) -> dict[str, str]:
        """The reservation's tags; a scheduled Capacity Block's include the size it will have."""
        if self.is_capacity_block and self.state == "scheduled":
            return {**self.tags, REQUESTED_QUANTITY_TAG: str(self.total)}
        return self.tags

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == "capacity-block"

    @property
    def state(self) -> str:
        if self.explicit_state:
            return self.explicit_state
        now = dt.datetime.now(dt.timezone.utc)
        if self.end is not None and now >= self.end:
            return "expired"
        if self.is_capacity_block and now < self.start:
            return "scheduled"
        return "active"

    def to_xml(self) -> str:
        end = (f"<endDate>{_iso(self.end)}</endDate><endDateType>limited</endDateType>" if self.end
               else "<endDateType>unlimited</endDateType>")
        return (
            f"<capacityReservationId>{self.reservation_id}</capacityReservationId>"
            f"<ownerId>{self.account}</ownerId>"
            f"<capacityReservationArn>arn:aws:ec2:{self.region}:{self.account}:capacity-reservation/"
            f"{self.reservation_id}</capacityReservationArn>"
            f"<instanceType>{escape(self.instance_type)}</instanceType>"
            f"<instancePlatform>{escape(self.platform)}</instancePlatform>"
            f"<availabilityZone>{escape(self.availability_zone)}</availabilityZone>"
            f"<tenancy>{self.tenancy}</tenancy><totalInstanceCount>{self.total}</totalInstanceCount>"
            f"<availableInstanceCount>{self.shown_available}</availableInstanceCount>"
            "<ebsOptimized>true</ebsOptimized>"
            f"<state>{self.state}</state><startDate>{_iso(self.start)}</startDate>{end}"
            f"<instanceMatchCriteria>{self.match_criteria}</instanceMatchCriteria>"
            f"<createDate>{_iso(self.start)}</createDate><reservationType>{self.reservation_type}</reservationType>"
            + (f"<capacityBlockId>{self.block_id}</capacityBlockId>" if self.block_id else "")
            + f"{tag_set(self.shown_tags)}"
        )


class CapacityReservations:
    def __init__(self) -> None:
        self._reservations: dict[str, Reservation] = {}
        self._lock = threading.RLock()

    def reset(self) -> None:
        with self._lock:
            self._reservations.clear()

    def get(self, reservation_id: str, account: str, region: str) -> Reservation | None:
        with self._lock:
            found = self._reservations.get(reservation_id)
            return found if found and found.account == account and found.region == region else None

    def seed(self, payload: dict[str, Any], account: str) -> dict[str, Any]:
        """Add a reservation as AWS would hold it, e.g. ``{"instance_type": "p5en.48xlarge",
        "availability_zone": "us-east-1a", "count": 8, "type": "capacity-block",
        "start": "2026-12-01T00:00:00Z", "end": "2026-12-15T00:00:00Z", "region": "us-east-1",
        "reservation_id": "cr-0123456789abcdef0"}``; ``"state"`` overrides the state the dates give and
        ``"available"`` leaves fewer instances free than ``count``, as if others used them. Returns the
        reservation id."""
        try:
            region = payload.get("region", "us-east-1")
            reservation = Reservation(
                reservation_id=payload.get("reservation_id") or new_id(),
                account=account, region=region, instance_type=str(payload["instance_type"]),
                availability_zone=str(payload.get("availability_zone", f"{region}a")), total=int(payload["count"]),
                explicit_state=payload.get("state"), reservation_type=str(payload.get("type", "default")),
                start=_parse(payload.get("start")) or dt.datetime.now(dt.timezone.utc), end=_parse(payload.get("end")),
            )
            reservation.held = reservation.total - int(payload.get("available", reservation.total))
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"a reservation needs instance_type and count (and valid dates): {exc}") from None
        if not re.fullmatch(r"cr-[0-9a-f]{17}", reservation.reservation_id):
            raise ValueError(f"reservation_id {reservation.reservation_id!r} is not like cr-0123456789abcdef0")
        if reservation.reservation_type not in ("default", "capacity-block"):
            raise ValueError("type must be 'default' (an ODCR) or 'capacity-block'")
        with self._lock:
            self._reservations[reservation.reservation_id] = reservation
        return {"reservation_id": reservation.reservation_id}

    def add(self, reservation: Reservation) -> Reservation:
        with self._lock:
            self._reservations[reservation.reservation_id] = reservation
        return reservation

    def capacity_blocks(self, account: str, region: str) -> list[Reservation]:
        with self._lock:
            return [r for r in self._reservations.values()
                    if r.account == account and r.region == region and r.is_capacity_block]

    def listed(self, account: str, region: str) -> list[Reservation]:
        """The account's reservations in the Region, in the order they were made."""
        with self._lock:
            return [r for r in self._reservations.values() if r.account == account and r.region == region]

    def holding(self, instance_id: str) -> Reservation | None:
        """The reservation the instance counts against, if any."""
        with self._lock:
            return next((r for r in self._reservations.values() if instance_id in r.instances), None)

    # -- instances counted against a reservation --------------------------------------------------------
    def claim(self, reservation: Reservation, instance_ids: list[str]) -> None:
        with self._lock:
            reservation.instances.update(instance_ids)

    def release(self, instance_ids: list[str]) -> None:
        with self._lock:
            for reservation in self._reservations.values():
                reservation.instances.difference_update(instance_ids)

    # -- the EC2 API ------------------------------------------------------------------------------------
    def handle(self, action: str, params: dict[str, str], region: str, account: str) -> tuple[int, dict, bytes]:
        request, unknown = model_check.from_query("ec2", action, params)
        problems = unknown + model_check.check("ec2", action, request)
        if problems:
            name, message = problems[0]
            return error("InvalidParameterValue" if name in request else "UnknownParameter", f"{name}: {message}")
        with self._lock:
            if action == "CreateCapacityReservation":
                return self._create(request, region, account)
            if action == "DescribeCapacityReservations":
                return self._describe(request, region, account)
            if action == "ModifyCapacityReservation":
                return self._modify(request, region, account)
            return self._cancel(request, region, account)

    def _create(self, request: dict[str, Any], region: str, account: str):
        tags = {t["Key"]: t.get("Value", "") for spec in request.get("TagSpecifications") or []
                for t in spec.get("Tags") or []}
        end = request.get("EndDate")
        reservation = Reservation(new_id(), account, region, request["InstanceType"],
                                  request.get("AvailabilityZone") or f"{region}a", request["InstanceCount"],
                                  platform=request["InstancePlatform"], tags=tags,
                                  end=_parse(end) if end else None,
                                  match_criteria=request.get("InstanceMatchCriteria", "open"))
        self._reservations[reservation.reservation_id] = reservation
        return ok("CreateCapacityReservationResponse", f"<capacityReservation>{reservation.to_xml()}"
                                                        "</capacityReservation>")

    def _describe(self, request: dict[str, Any], region: str, account: str):
        ids = request.get("CapacityReservationIds") or []
        mine = {rid: r for rid, r in self._reservations.items() if r.region == region and r.account == account}
        for rid in ids:
            if rid not in mine:
                return error("InvalidCapacityReservationId.NotFound",
                             f"The capacity reservation ID '{rid}' does not exist")
        selected = [mine[rid] for rid in ids] if ids else list(mine.values())
        items = "".join(f"<item>{r.to_xml()}</item>" for r in selected)
        return ok("DescribeCapacityReservationsResponse", f"<capacityReservationSet>{items}</capacityReservationSet>")

    def _modify(self, request: dict[str, Any], region: str, account: str):
        reservation = self.get(request.get("CapacityReservationId", ""), account, region)
        if reservation is None:
            return error("InvalidCapacityReservationId.NotFound",
                         f"The capacity reservation ID '{request.get('CapacityReservationId')}' does not exist")
        refusal = modify_refusal(reservation, request)
        if refusal:
            return error(*refusal)
        if "InstanceCount" in request:
            reservation.total = int(request["InstanceCount"])
        if request.get("EndDateType") == "unlimited":
            reservation.end = None
        elif request.get("EndDate"):
            reservation.end = _parse(request["EndDate"])
        if request.get("InstanceMatchCriteria"):
            reservation.match_criteria = request["InstanceMatchCriteria"]
        return ok("ModifyCapacityReservationResponse", "<return>true</return>")

    def _cancel(self, request: dict[str, Any], region: str, account: str):
        reservation = self.get(request.get("CapacityReservationId", ""), account, region)
        if reservation is None:
            return error("InvalidCapacityReservationId.NotFound",
                         f"The capacity reservation ID '{request.get('CapacityReservationId')}' does not exist")
        refusal = cancel_refusal(reservation)
        if refusal:
            return error(*refusal)
        reservation.explicit_state = "cancelled"
        return ok("CancelCapacityReservationResponse", "<return>true</return>")


def _block_is_fixed(reservation: Reservation) -> tuple[str, str]:
    return ("UnsupportedOperation", f"You can't modify or cancel a Capacity Block: {reservation.reservation_id} is one")


def cancel_refusal(reservation: Reservation) -> tuple[str, str] | None:
    """Why EC2 refuses to cancel the reservation: a Capacity Block never, an ODCR only while assessing or active."""
    if reservation.is_capacity_block:
        return _block_is_fixed(reservation)
    if reservation.state not in _CANCELLABLE:
        return ("IncorrectState", f"Capacity Reservation {reservation.reservation_id} is {reservation.state}: only an "
                                  f"assessing or active Capacity Reservation can be cancelled")
    return None


def modify_refusal(reservation: Reservation, request: dict[str, Any]) -> tuple[str, str] | None:
    """Why EC2 refuses the modification: any of a Capacity Block; of an ODCR, any outside ``active`` (tags are
    changed with CreateTags, not here); its eligibility while instances use it."""
    if reservation.is_capacity_block:
        return _block_is_fixed(reservation)
    if reservation.state not in _MODIFIABLE:
        return ("IncorrectState", f"Capacity Reservation {reservation.reservation_id} is {reservation.state}: only "
                                  f"its tags can change now")
    if request.get("InstanceMatchCriteria") and request["InstanceMatchCriteria"] != reservation.match_criteria \
            and (reservation.instances or reservation.held):
        return ("IncorrectState", "To change the instance eligibility, the Capacity Reservation must be completely "
                                  "idle (zero usage)")
    return None


#: The sandbox's one store: the HTTP actions above and RunInstances (``ec2_launch``) share it.
REGISTRY = CapacityReservations()


def new_id(prefix: str = "cr-") -> str:
    return prefix + uuid.uuid4().hex[:17]


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _parse(value: Any) -> dt.datetime | None:
    if value in (None, ""):
        return None
    parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)
