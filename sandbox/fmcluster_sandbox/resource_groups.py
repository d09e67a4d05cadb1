"""AWS Resource Groups as a team uses it to group On-Demand Capacity Reservations.

moto 5.2.5's resource-groups backend routes only some of the service's REST paths: its url map has no
``/group-resources``, ``/ungroup-resources`` or ``/list-group-resources``, so Flask answered those with an HTML
404 page, and its ListGroupResources raises NotImplementedError; its GetGroup also reads only the deprecated
``GroupName``, not ``Group``. The sandbox therefore serves these operations itself (in front of moto, by the
operation botocore's model gives the method and path), with one store for groups:

CreateGroup, GetGroup, GetGroupConfiguration, ListGroups, GroupResources, UngroupResources,
ListGroupResources and DeleteGroup. Every other Resource Groups operation goes to moto (and does not see
these groups). Requests are checked against botocore's model (:mod:`fmcluster_sandbox.model_check`), and the
service's rules, each from AWS's documentation:

* a group has a resource query or a service configuration, not both (API reference, CreateGroup
  ``Configuration``/``ResourceQuery``); a group name is unique in the account and Region;
* a configuration of type ``AWS::EC2::CapacityReservationPool`` needs an ``AWS::ResourceGroups::Generic``
  item with ``allowed-resource-types`` = ``AWS::EC2::CapacityReservation`` (Resource Groups user guide,
  "Supported configuration types and parameters"; EC2 user guide, "Create a Capacity Reservation group");
* GroupResources/UngroupResources work only on service-linked groups (API reference, GroupResources:
  ``AWS::EC2::CapacityReservationPool`` among them), and a group that allows only some resource types
  takes only those (user guide, ``allowed-resource-types``): others come back in ``Failed``;
* an unknown group is ``NotFoundException`` (the operations' documented errors).

Launches that target a group (``CapacityReservationTarget.CapacityReservationResourceGroupArn``) draw on its
reservations: see :func:`install`.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from fmcluster_sandbox import model_check, protocols

SERVICE = "resource-groups"
POOL = "AWS::EC2::CapacityReservationPool"
GENERIC = "AWS::ResourceGroups::Generic"
RESERVATION_TYPE = "AWS::EC2::CapacityReservation"
#: What GroupResources accepts (API reference, GroupResources).
SERVICE_LINKED = ("AWS::EC2::HostManagement", POOL, "AWS::ResourceGroups::ApplicationGroup")
SERVED = ("CreateGroup", "GetGroup", "GetGroupConfiguration", "ListGroups", "GroupResources", "UngroupResources",
          "ListGroupResources", "DeleteGroup")
_ARN = re.compile(r"arn:aws[a-z-]*:resource-groups:(?P<region>[^:]+):(?P<account>\d{12}):group/(?P<name>.+)")
_RESOURCE_TYPES = {("ec2", "capacity-reservation"): RESERVATION_TYPE, ("ec2", "instance"): "AWS::EC2::Instance",
                   ("ec2", "dedicated-host"): "AWS::EC2::Host"}


class ServiceError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class Group:
    name: str
    account: str
    region: str
    description: str = ""
    configuration: list[dict[str, Any]] = field(default_factory=list)
    query: dict[str, Any] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)

    @property
    def arn(self) -> str:
        return f"arn:aws:resource-groups:{self.region}:{self.account}:group/{self.name}"

    @property
    def types(self) -> set[str]:
        return {item.get("Type", "") for item in self.configuration}

    def allowed_types(self) -> list[str] | None:
        for item in self.configuration:
            if item.get("Type") == GENERIC:
                for parameter in item.get("Parameters") or []:
                    if parameter.get("Name") == "allowed-resource-types":
                        return list(parameter.get("Values") or [])
        return None

    def describe(self) -> dict[str, Any]:
        out = {"GroupArn": self.arn, "Name": self.name}
        if self.description:
            out["Description"] = self.description
        return out

    def group_configuration(self) -> dict[str, Any]:
        return {"Configuration": self.configuration, "Status": "UPDATE_COMPLETE"}


def resource_type(arn: str) -> str | None:
    """``AWS::EC2::CapacityReservation`` for ``arn:aws:ec2:…:capacity-reservation/cr-…``, and so on."""
    parts = arn.split(":", 5)
    if len(parts) < 6 or not parts[0] == "arn":
        return None
    return _RESOURCE_TYPES.get((parts[2], parts[5].split("/", 1)[0]))


class ResourceGroups:
    def __init__(self) -> None:
        self._groups: dict[tuple[str, str, str], Group] = {}
        self._lock = threading.RLock()

    def reset(self) -> None:
        with self._lock:
            self._groups.clear()

    def find(self, identifier: str, account: str, region: str) -> Group | None:
        """A group by name or ARN, as the operations' ``Group`` parameter takes it; None when unknown."""
        found = _ARN.fullmatch(identifier)
        if found:
            if (found["account"], found["region"]) != (account, region):
                return None
            identifier = found["name"]
        with self._lock:
            return self._groups.get((account, region, identifier))

    # -- HTTP ---------------------------------------------------------------------------------------
    @staticmethod
    def operation(method: str, path: str) -> str | None:
        """The operation botocore's model routes ``method path`` to, if the sandbox serves it."""
        model = model_check.service_model(SERVICE)
        for name in SERVED:
            http = model.operation_model(name).http
            if http["method"] == method and http["requestUri"].split("?")[0] == path:
                return name
        return None

    def handle(self, environ: dict[str, Any], region: str, account: str) -> tuple[int, dict, bytes] | None:
        name = self.operation(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", ""))
        if name is None:
            return None
        try:
            body = json.loads(protocols.read_body(environ) or b"{}")
        except json.JSONDecodeError as exc:
            return _error("BadRequestException", f"request body is not JSON: {exc}")
        problems = model_check.check(SERVICE, name, body)
        if problems:
            where, message = problems[0]
            return _error("BadRequestException", f"{where}: {message}")
        try:
            with self._lock:
                answer = getattr(self, "_" + re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower())(body, account, region)
        except ServiceError as exc:
            return _error(exc.code, exc.message)
        return 200, {"Content-Type": "application/json", "x-amzn-RequestId": protocols.request_id()}, \
            json.dumps(answer).encode()

    # -- operations ---------------------------------------------------------------------------------
    def _group(self, body: dict[str, Any], account: str, region: str) -> Group:
        identifier = body.get("Group") or body.get("GroupName")
        if not identifier:
            raise ServiceError("BadRequestException", "Group is required")
        group = self.find(identifier, account, region)
        if group is None:
            raise ServiceError("NotFoundException", f"Cannot find group {identifier}.")
        return group

    def _create_group(self, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
        configuration, query = body.get("Configuration") or [], body.get("ResourceQuery")
        if configuration and query:
            raise ServiceError("BadRequestException", "A resource group can contain either a Configuration or a "
                                                      "ResourceQuery, but not both.")
        if (account, region, body["Name"]) in self._groups:
            raise ServiceError("BadRequestException", f"Cannot create group: group {body['Name']} already exists")
        group = Group(body["Name"], account, region, body.get("Description") or "", configuration, query,
                      dict(body.get("Tags") or {}))
        if POOL in group.types and group.allowed_types() != [RESERVATION_TYPE]:
            raise ServiceError("BadRequestException", f"A {POOL} configuration needs a {GENERIC} configuration with "
                                                      f"allowed-resource-types [{RESERVATION_TYPE}].")
        self._groups[(account, region, group.name)] = group
        answer: dict[str, Any] = {"Group": group.describe(), "Tags": group.tags}
        if configuration:
            answer["GroupConfiguration"] = group.group_configuration()
        if query:
            answer["ResourceQuery"] = query
        return answer

    def _get_group(self, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
        return {"Group": self._group(body, account, region).describe()}

    def _get_group_configuration(self, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
        return {"GroupConfiguration": self._group(body, account, region).group_configuration()}

    def _list_groups(self, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
        mine = [g for (a, r, _), g in sorted(self._groups.items()) if (a, r) == (account, region)]
        return {"GroupIdentifiers": [{"GroupName": g.name, "GroupArn": g.arn} for g in mine],
                "Groups": [g.describe() for g in mine]}

    def _delete_group(self, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
        group = self._group(body, account, region)
        del self._groups[(account, region, group.name)]  # its members are left as they are (API: DeleteGroup)
        return {"Group": group.describe()}

    def _membership(self, body: dict[str, Any], account: str, region: str, add: bool) -> dict[str, Any]:
        group = self._group(body, account, region)
        if not group.types & set(SERVICE_LINKED):
            raise ServiceError("BadRequestException", f"Group {group.name} is not a service-linked group "
                                                      f"({', '.join(SERVICE_LINKED)}); its members come from its "
                                                      "resource query.")
        allowed = group.allowed_types()
        succeeded, failed = [], []
        for arn in body["ResourceArns"]:
            kind = resource_type(arn)
            if add and allowed is not None and kind not in allowed:
                failed.append({"ResourceArn": arn, "ErrorCode": "InvalidParameter",
                               "ErrorMessage": f"Resource {arn} is of type {kind or 'unknown'}; group {group.name} "
                                               f"allows only {', '.join(allowed)}"})
                continue
            if add and arn not in group.members:
                group.members.append(arn)
            elif not add and arn in group.members:
                group.members.remove(arn)
            succeeded.append(arn)
        return {"Succeeded": succeeded, "Failed": failed, "Pending": []}

    def _group_resources(self, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
        return self._membership(body, account, region, add=True)

    def _ungroup_resources(self, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
        return self._membership(body, account, region, add=False)

    def _list_group_resources(self, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
        group = self._group(body, account, region)
        start = int(base64.b64decode(body["NextToken"]).decode()) if body.get("NextToken") else 0
        size = body.get("MaxResults") or 50
        page = group.members[start:start + size]
        identifiers = [{"ResourceArn": arn, "ResourceType": resource_type(arn) or "AWS::Unknown"} for arn in page]
        answer: dict[str, Any] = {"Resources": [{"Identifier": i} for i in identifiers],
                                  "ResourceIdentifiers": identifiers}
        if start + size < len(group.members):
            answer["NextToken"] = base64.b64encode(str(start + size).encode()).decode()
        return answer

    # -- what launches draw on ----------------------------------------------------------------------
    def reservation_ids(self, group_arn: str, account: str, region: str) -> list[str] | None:
        """The ids of the capacity reservations in a group, None when the group is unknown here."""
        group = self.find(group_arn, account, region)
        if group is None:
            return None
        return [arn.rsplit("/", 1)[-1] for arn in group.members if resource_type(arn) == RESERVATION_TYPE]


#: The sandbox's one store of groups.
REGISTRY = ResourceGroups()


def _error(code: str, message: str) -> tuple[int, dict, bytes]:
    status = model_check.service_model(SERVICE).shape_for(code).metadata.get("error", {}).get("httpStatusCode", 400)
    return status, {"Content-Type": "application/json", "x-amzn-ErrorType": code,
                    "x-amzn-RequestId": protocols.request_id()}, json.dumps({"Message": message}).encode()
