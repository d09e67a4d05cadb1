"""Where instances sit in AWS's network, as EC2 DescribeInstanceTopology says (issue 39, "see it").

EC2 answers for running instances of the instance types that have a topology ("Topology views are only available
for: Instances in the running state"; "Instance topology is supported for specific instance types only", EC2 user
guide, "Prerequisites for Amazon EC2 topology"); other instances are simply absent from the answer. Each
InstanceTopology carries ``NetworkNodes`` top-down ("with the bottom node connected to an instance"),
``AvailabilityZone``, ``ZoneId``, ``InstanceType``, ``GroupName`` (its placement group) and, for UltraServer
instances only, ``CapacityBlockId`` (EC2 API reference, InstanceTopology).

A Capacity Reservation's place is known before launch: DescribeCapacityReservationTopology gives each pending or
active reservation one ``NetworkNodes`` list, top-down, "null or empty if: The instance type is not supported. The
Capacity Reservation is in a state other than active or pending" (EC2 API reference, CapacityReservationTopology);
"Depending on the type of Capacity Reservation, you might see only 1, 2, or 3 network nodes" (EC2 user guide, "How
Amazon EC2 topology works"). AWS does not say how a reservation's capacity splits below its nodes, nor what an empty
answer for an active reservation of a supported type would mean: readers say "no topology", nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fmcluster.connection import aws

#: DescribeInstanceTopology, InstanceIds: "Maximum 100 explicitly specified instance IDs" (EC2 API reference).
MAX_INSTANCE_IDS = 100

_PERMISSION_HINT = ("fmcluster topology needs ec2:DescribeInstanceTopology on these credentials; ask your AWS admin "
                    "to allow it")
#: DescribeCapacityReservationTopology, CapacityReservationIds: "Maximum 10 explicitly specified Capacity Reservation
#: IDs" (botocore's EC2 model, which the sandbox enforces); the API reference page now says 100. 10 is safe under
#: both.
MAX_RESERVATION_IDS = 10
RESERVATION_PERMISSION = "ec2:DescribeCapacityReservationTopology"
#: The error codes of AWS refusing the caller (the credentials lack the permission).
REFUSED_CODES = ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException")


@dataclass(frozen=True)
class InstancePlace:
    """One instance's place: ``network_nodes`` top-down (the first the top layer, the last the node the instance
    hangs off)."""

    instance_id: str
    instance_type: str
    zone: str
    zone_id: str
    network_nodes: tuple[str, ...]
    group_name: str | None = None
    capacity_block_id: str | None = None

    @classmethod
    def of(cls, item: dict[str, Any]) -> InstancePlace:
        return cls(instance_id=item["InstanceId"], instance_type=item.get("InstanceType", ""),
                   zone=item.get("AvailabilityZone", ""), zone_id=item.get("ZoneId", ""),
                   network_nodes=tuple(item.get("NetworkNodes") or ()), group_name=item.get("GroupName") or None,
                   capacity_block_id=item.get("CapacityBlockId") or None)

    def as_json(self) -> dict[str, Any]:
        return {"id": self.instance_id, "instance_type": self.instance_type, "zone": self.zone,
                "zone_id": self.zone_id, "network_nodes": list(self.network_nodes), "group_name": self.group_name,
                "capacity_block_id": self.capacity_block_id}


@dataclass(frozen=True)
class ReservationPlace:
    """One Capacity Reservation's place before launch: ``network_nodes`` top-down, as AWS gave them (empty when AWS
    gives none)."""

    reservation_id: str
    instance_type: str
    state: str
    zone: str
    network_nodes: tuple[str, ...]
    capacity_block_id: str | None = None

    @classmethod
    def of(cls, item: dict[str, Any]) -> ReservationPlace:
        return cls(reservation_id=item["CapacityReservationId"], instance_type=item.get("InstanceType", ""),
                   state=item.get("State", ""), zone=item.get("AvailabilityZone", ""),
                   network_nodes=tuple(item.get("NetworkNodes") or ()),
                   capacity_block_id=item.get("CapacityBlockId") or None)


def _chunks(ids: list[str], size: int = MAX_INSTANCE_IDS) -> Iterable[list[str]]:
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def instance_topology(ec2_client: Any, instance_ids: Iterable[str]) -> dict[str, InstancePlace]:
    """Instance id -> its place, for those of ``instance_ids`` EC2 gives a topology (the others are absent). The ids
    go at most :data:`MAX_INSTANCE_IDS` per request, each request paged to its end; MaxResults is left out ("You
    can't specify this parameter and the instance IDs parameter in the same request"). AWS refusing the call
    (UnauthorizedOperation, throttling past the retries) is fmcluster's :class:`~fmcluster.errors.AwsError`."""
    from botocore.exceptions import BotoCoreError, ClientError

    wanted = list(dict.fromkeys(instance_ids))
    places: dict[str, InstancePlace] = {}
    try:
        for chunk in _chunks(wanted):
            for page in ec2_client.get_paginator("describe_instance_topology").paginate(InstanceIds=chunk):
                for item in page.get("Instances") or []:
                    places[item["InstanceId"]] = InstancePlace.of(item)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        hint = _PERMISSION_HINT if code in REFUSED_CODES else ""
        raise aws.describe_error("EC2 DescribeInstanceTopology", exc, hint) from None
    except BotoCoreError as exc:
        raise aws.describe_error("EC2 DescribeInstanceTopology", exc) from None
    return places


def reservation_topology(ec2_client: Any, reservation_ids: Iterable[str]) -> dict[str, ReservationPlace]:
    """Reservation id -> its place, for ``reservation_ids``: at most :data:`MAX_RESERVATION_IDS` per request, each
    request followed through its NextToken (botocore has no paginator for the call; MaxResults is left out, as it
    may not go with the ids). AWS refusing the call (UnauthorizedOperation, an unknown id, throttling past the
    retries) is fmcluster's :class:`~fmcluster.errors.AwsError`, naming :data:`RESERVATION_PERMISSION` when the
    credentials may not make it."""
    from botocore.exceptions import BotoCoreError, ClientError

    resource = "EC2 DescribeCapacityReservationTopology"
    places: dict[str, ReservationPlace] = {}
    try:
        for chunk in _chunks(list(dict.fromkeys(reservation_ids)), MAX_RESERVATION_IDS):
            token = None
            while True:
                page = ec2_client.describe_capacity_reservation_topology(
                    CapacityReservationIds=chunk, **({"NextToken": token} if token else {}))
                for item in page.get("CapacityReservations") or []:
                    places[item["CapacityReservationId"]] = ReservationPlace.of(item)
                token = page.get("NextToken")
                if not token:
                    break
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        hint = (f"allow {RESERVATION_PERMISSION} to these credentials (ask your AWS admin)" if code in REFUSED_CODES
                else "")
        raise aws.describe_error(resource, exc, hint) from None
    except BotoCoreError as exc:
        raise aws.describe_error(resource, exc) from None
    return places
