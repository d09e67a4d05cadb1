"""EC2 placement groups, which moto 5.2.5 does not implement (its EC2 responses raise NotImplementedError).

Speaks the EC2 query protocol for CreatePlacementGroup, DescribePlacementGroups and DeletePlacementGroup,
with AWS's error codes, so fmcluster's real boto3 calls run unchanged against the sandbox. RunInstances
(``ec2_launch``) places instances in these groups: a cluster placement group lives in the one Availability
Zone of its first instance, and a group with running instances cannot be deleted ("Placement groups",
EC2 user guide).
"""

from __future__ import annotations

import re
import threading
import uuid
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from fmcluster_sandbox import model_check
from fmcluster_sandbox.ec2_query import error, ok, tag_set

ACTIONS = ("CreatePlacementGroup", "DescribePlacementGroups", "DeletePlacementGroup")


@dataclass
class _Group:
    name: str
    group_id: str
    strategy: str
    arn: str
    tags: dict[str, str] = field(default_factory=dict)
    zone: str | None = None
    instances: set[str] = field(default_factory=set)


class PlacementGroups:
    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], dict[str, _Group]] = {}
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._groups.clear()

    def get(self, name: str, account: str, region: str) -> _Group | None:
        with self._lock:
            return self._groups.get((account, region), {}).get(name)

    def place(self, group: _Group, zone: str, instance_ids: list[str]) -> None:
        with self._lock:
            group.zone = group.zone or zone
            group.instances.update(instance_ids)

    def release(self, instance_ids: list[str]) -> None:
        with self._lock:
            for groups in self._groups.values():
                for group in groups.values():
                    group.instances.difference_update(instance_ids)
                    if not group.instances:
                        group.zone = None

    def handle(self, action: str, params: dict[str, str], region: str, account: str) -> tuple[int, dict, bytes]:
        request, unknown = model_check.from_query("ec2", action, params)
        problems = unknown + model_check.check("ec2", action, request)
        if problems:
            name, message = problems[0]
            return error("InvalidParameterValue" if name in request else "UnknownParameter", f"{name}: {message}")
        with self._lock:
            groups = self._groups.setdefault((account, region), {})
            if action == "CreatePlacementGroup":
                return self._create(groups, params, region, account)
            if action == "DescribePlacementGroups":
                return self._describe(groups, params)
            return self._delete(groups, params)

    def _create(self, groups: dict[str, _Group], params: dict[str, str], region: str, account: str):
        name = params.get("GroupName") or f"pg-{uuid.uuid4().hex[:8]}"
        if name in groups:
            return error("InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
        strategy = params.get("Strategy", "cluster")
        group_id = "pg-" + uuid.uuid4().hex[:17]
        tags = {}
        for key, value in params.items():
            match = re.fullmatch(r"TagSpecification\.\d+\.Tag\.(\d+)\.Key", key)
            if match:
                tags[value] = params.get(f"{key[:-4]}.Value", "")
        group = _Group(name, group_id, strategy, f"arn:aws:ec2:{region}:{account}:placement-group/{name}", tags)
        groups[name] = group
        return ok("CreatePlacementGroupResponse", f"<placementGroup>{_item_body(group)}</placementGroup>")

    def _describe(self, groups: dict[str, _Group], params: dict[str, str]):
        names = [v for k, v in params.items() if re.fullmatch(r"GroupName\.\d+", k)]
        ids = [v for k, v in params.items() if re.fullmatch(r"GroupId\.\d+", k)]
        for name in names:
            if name not in groups:
                return error("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
        selected = [g for g in groups.values() if (not names or g.name in names) and (not ids or g.group_id in ids)]
        for index in range(1, 50):
            filter_name = params.get(f"Filter.{index}.Name")
            if filter_name is None:
                break
            values = {v for k, v in params.items() if k.startswith(f"Filter.{index}.Value.")}
            selected = [g for g in selected if _matches(g, filter_name, values)]
        items = "".join(f"<item>{_item_body(g)}</item>" for g in selected)
        return ok("DescribePlacementGroupsResponse", f"<placementGroupSet>{items}</placementGroupSet>")

    def _delete(self, groups: dict[str, _Group], params: dict[str, str]):
        name = params.get("GroupName", "")
        if name not in groups:
            return error("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
        if groups[name].instances:
            return error("InvalidPlacementGroup.InUse", f"The placement group '{name}' is in use and may not be "
                                                         "deleted.")
        del groups[name]
        return ok("DeletePlacementGroupResponse", "<return>true</return>")


def _matches(group: _Group, filter_name: str, values: set[str]) -> bool:
    if filter_name.startswith("tag:"):
        return group.tags.get(filter_name[4:]) in values
    field_value = {"group-name": group.name, "group-id": group.group_id, "strategy": group.strategy,
                   "state": "available"}.get(filter_name)
    return field_value in values if field_value is not None else True


def _item_body(group: _Group) -> str:
    return (f"<groupName>{escape(group.name)}</groupName><state>available</state>"
            f"<strategy>{group.strategy}</strategy><groupId>{group.group_id}</groupId>"
            f"<groupArn>{group.arn}</groupArn>{tag_set(group.tags)}")


#: The sandbox's one store: the HTTP actions above and RunInstances (``ec2_launch``) share it.
REGISTRY = PlacementGroups()
