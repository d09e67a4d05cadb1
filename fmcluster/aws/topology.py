"""Where instances sit in AWS's network, as EC2 DescribeInstanceTopology says (issue 39, "see it").

EC2 answers for running instances of the instance types that have a topology ("Topology views are only available
for: Instances in the running state"; "Instance topology is supported for specific instance types only", EC2 user
guide, "Prerequisites for Amazon EC2 topology"); other instances are simply absent from the answer. Each
InstanceTopology carries ``NetworkNodes`` top-down ("with the bottom node connected to an instance"),
``AvailabilityZone``, ``ZoneId``, ``InstanceType``, ``GroupName`` (its placement group) and, for UltraServer
instances only, ``CapacityBlockId`` (EC2 API reference, InstanceTopology).
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
        hint = _PERMISSION_HINT if code in ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException") else ""
        raise aws.describe_error("EC2 DescribeInstanceTopology", exc, hint) from None
    except BotoCoreError as exc:
        raise aws.describe_error("EC2 DescribeInstanceTopology", exc) from None
    return places
