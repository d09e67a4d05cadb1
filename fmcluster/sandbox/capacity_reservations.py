"""EC2 capacity reservations (ODCRs) and Capacity Blocks, which moto 5.2.5 does not implement.

Speaks the EC2 query protocol for CreateCapacityReservation, DescribeCapacityReservations and
CancelCapacityReservation. A Capacity Block cannot be bought in a sandbox, so tests and demos seed one
through the control route ``POST /_fmcluster/capacity-reservations`` (see :meth:`seed`), with the
instance type, AZ, count, type (``default`` or ``capacity-block``), state and start/end dates they need.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from fmcluster.sandbox.ec2_query import error, ok, tag_set

ACTIONS = ("CreateCapacityReservation", "DescribeCapacityReservations", "CancelCapacityReservation")


@dataclass
class _Reservation:
    reservation_id: str
    account: str
    region: str
    instance_type: str
    availability_zone: str
    total: int
    available: int
    state: str = "active"
    reservation_type: str = "default"
    start: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    end: dt.datetime | None = None
    platform: str = "Linux/UNIX"
    tenancy: str = "default"
    match_criteria: str = "open"
    tags: dict[str, str] = field(default_factory=dict)

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
            f"<availableInstanceCount>{self.available}</availableInstanceCount><ebsOptimized>true</ebsOptimized>"
            f"<state>{self.state}</state><startDate>{_iso(self.start)}</startDate>{end}"
            f"<instanceMatchCriteria>{self.match_criteria}</instanceMatchCriteria>"
            f"<createDate>{_iso(self.start)}</createDate><reservationType>{self.reservation_type}</reservationType>"
            f"{tag_set(self.tags)}"
        )


class CapacityReservations:
    def __init__(self) -> None:
        self._reservations: dict[str, _Reservation] = {}
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._reservations.clear()

    def seed(self, payload: dict[str, Any], account: str) -> dict[str, Any]:
        """Add a reservation as AWS would hold it, e.g. ``{"instance_type": "p5en.48xlarge",
        "availability_zone": "us-east-1a", "count": 8, "type": "capacity-block", "state": "active",
        "start": "2026-12-01T00:00:00Z", "end": "2026-12-15T00:00:00Z", "region": "us-east-1",
        "reservation_id": "cr-0123456789abcdef0"}``. Returns the reservation id."""
        try:
            region = payload.get("region", "us-east-1")
            count = int(payload["count"])
            reservation = _Reservation(
                reservation_id=payload.get("reservation_id") or _new_id(),
                account=account, region=region, instance_type=str(payload["instance_type"]),
                availability_zone=str(payload.get("availability_zone", f"{region}a")), total=count,
                available=int(payload.get("available", count)), state=str(payload.get("state", "active")),
                reservation_type=str(payload.get("type", "default")),
                start=_parse(payload.get("start")) or dt.datetime.now(dt.timezone.utc),
                end=_parse(payload.get("end")),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"a reservation needs instance_type and count (and valid dates): {exc}") from None
        if not re.fullmatch(r"cr-[0-9a-f]{8,17}", reservation.reservation_id):
            raise ValueError(f"reservation_id {reservation.reservation_id!r} is not like cr-0123456789abcdef0")
        with self._lock:
            self._reservations[reservation.reservation_id] = reservation
        return {"reservation_id": reservation.reservation_id}

    def handle(self, action: str, params: dict[str, str], region: str, account: str) -> tuple[int, dict, bytes]:
        with self._lock:
            if action == "CreateCapacityReservation":
                return self._create(params, region, account)
            if action == "DescribeCapacityReservations":
                return self._describe(params, region, account)
            return self._cancel(params)

    def _create(self, params: dict[str, str], region: str, account: str):
        for required in ("InstanceType", "InstancePlatform", "InstanceCount"):
            if required not in params:
                return error("MissingParameter", f"The request must contain the parameter {required}")
        zone = params.get("AvailabilityZone") or f"{region}a"
        count = int(params["InstanceCount"])
        tags = {}
        for key, value in params.items():
            if re.fullmatch(r"TagSpecifications\.\d+\.Tag\.\d+\.Key", key):
                tags[value] = params.get(f"{key[:-4]}.Value", "")
        reservation = _Reservation(_new_id(), account, region, params["InstanceType"], zone, count, count,
                                   platform=params["InstancePlatform"], tags=tags,
                                   end=_parse(params.get("EndDate")),
                                   match_criteria=params.get("InstanceMatchCriteria", "open"))
        self._reservations[reservation.reservation_id] = reservation
        return ok("CreateCapacityReservationResponse", f"<capacityReservation>{reservation.to_xml()}"
                                                        "</capacityReservation>")

    def _describe(self, params: dict[str, str], region: str, account: str):
        ids = [v for k, v in params.items() if re.fullmatch(r"CapacityReservationId\.\d+", k)]
        mine = {rid: r for rid, r in self._reservations.items() if r.region == region and r.account == account}
        for rid in ids:
            if rid not in mine:
                return error("InvalidCapacityReservationId.NotFound",
                              f"The capacity reservation ID '{rid}' does not exist")
        selected = [mine[rid] for rid in ids] if ids else list(mine.values())
        items = "".join(f"<item>{r.to_xml()}</item>" for r in selected)
        return ok("DescribeCapacityReservationsResponse", f"<capacityReservationSet>{items}</capacityReservationSet>")

    def _cancel(self, params: dict[str, str]):
        rid = params.get("CapacityReservationId", "")
        reservation = self._reservations.get(rid)
        if reservation is None:
            return error("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{rid}' does not exist")
        reservation.state = "cancelled"
        return ok("CancelCapacityReservationResponse", "<return>true</return>")


def _new_id() -> str:
    return "cr-" + uuid.uuid4().hex[:17]


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _parse(value: Any) -> dt.datetime | None:
    if value in (None, ""):
        return None
    parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)
