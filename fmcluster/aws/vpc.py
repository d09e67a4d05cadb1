"""The network fmcluster creates for a cluster (``fmcluster.render.network``) as engine resources: VPC,
subnets, internet gateway, Elastic IP, NAT gateway, route tables and the S3 gateway endpoint.

None of them has a name AWS keeps unique, so each finds itself by its ``fmcluster:resource`` tag together
with this cluster's ownership tags (a leftover of another cluster, or anything untagged, is never adopted),
and creates carry the create-time tags, so a crash between create and record is found again, not repeated.
Teardown order without documents (``destroy`` from tags) follows ``teardown_rank``: endpoint and route
tables, then the NAT gateway, then its Elastic IP, the internet gateway (detached first), subnets, the VPC.
"""

from __future__ import annotations

from typing import Any, ClassVar

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code, tolerate
from fmcluster.aws.ownership import is_ours, require_ours, tag_dict
from fmcluster.engine import UNKNOWN, AttributeChange, Context, Observed, Resource, Unknown, reads
from fmcluster.engine.waiting import pause
from fmcluster.render.common import CLUSTER_TAG, RESOURCE_TAG
from fmcluster.render.documents import Document

# AWS keeps a deleted NAT gateway (and endpoint) visible for about an hour in these states.
GONE_STATES = {"deleted", "rejected", "expired"}
FAILED_STATES = {"failed"}
PENDING_STATES = {"pending", "pendingacceptance", "deleting"}
# Network interfaces of terminating instances and a deleted NAT gateway hold subnets, gateways and
# addresses for a while after they are gone: AWS answers DependencyViolation (or InUse) until then.
BUSY_CODES = ("DependencyViolation", "InvalidIPAddress.InUse", "AuthFailure")
BUSY_RETRIES = 90


def phase_of(state: str) -> str:
    state = (state or "available").lower()
    if state in GONE_STATES:
        return "gone"
    if state in FAILED_STATES:
        return "failed"
    if state in PENDING_STATES:
        return "pending"
    return "ready"


def retry_busy(ctx: Context, call: Any, *gone_codes: str) -> None:
    """Delete-type ``call``: retried while AWS says something still uses the resource (pausing on the command's
    stop); done when it is gone."""
    for attempt in range(BUSY_RETRIES + 1):
        try:
            call()
            return
        except ClientError as exc:
            code = error_code(exc)
            if code in gone_codes or code.endswith(".NotFound"):
                return
            if code not in BUSY_CODES or attempt == BUSY_RETRIES:
                raise
            pause(2, ctx.stop)


class NetworkResource(Resource):
    """Shared read/find/delete of one EC2 networking resource type."""

    describe: ClassVar[str]  # the EC2 Describe call
    ids_param: ClassVar[str]  # its ids parameter
    items_key: ClassVar[str]  # the list in its answer
    id_field: ClassVar[str]
    label: ClassVar[str]

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        self.key = key
        self.document = document
        self.known_id = known_id

    def _items(self, ctx: Context, **query: Any) -> list[dict[str, Any]]:
        try:
            return getattr(ctx.client("ec2"), self.describe)(**query)[self.items_key]
        except ClientError as exc:
            if error_code(exc).endswith(".NotFound") or error_code(exc).endswith("Malformed"):
                return []
            raise

    def _find(self, ctx: Context, known_id: str | None) -> dict[str, Any] | None:
        if known_id:
            listed = reads.kept(ctx, f"ec2.{self.items_key}", known_id)  # what discovery listed in this pass
            found = [listed] if listed is not reads.MISSING and listed is not None else \
                [i for i in self._items(ctx, **{self.ids_param: [known_id]}) if i[self.id_field] == known_id]
            if found:
                require_ours(f"{self.label} {known_id}", tag_dict(found[0].get("Tags")), ctx)
                return found[0]
            return None
        if self.document is None:
            return None
        # Describe filters narrow the answer; the tags are checked here too (not every Describe filters by tag).
        filters = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [ctx.cluster]},
                   {"Name": f"tag:{RESOURCE_TAG}", "Values": [self.name]}]
        for item in self._items(ctx, Filters=filters):
            tags = tag_dict(item.get("Tags"))
            if tags.get(RESOURCE_TAG) == self.name and is_ours(tags, ctx) and phase_of(self._state(item)) != "gone":
                return item
        return None

    def _state(self, item: dict[str, Any]) -> str:
        return str(item.get("State", "available"))

    def outputs(self, item: dict[str, Any]) -> dict[str, Any]:
        return {f"{self.kind}.{self.key}.id": item[self.id_field]}

    def attributes(self, ctx: Context, item: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Live attributes (as :meth:`desired` names them) and the parts a crash left unmade."""
        return {}, []

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        item = self._find(ctx, known_id or self.known_id)
        if item is None:
            return None
        state = self._state(item)
        phase = phase_of(state)
        if phase == "gone":
            return None
        attributes, missing = self.attributes(ctx, item) if phase == "ready" and self.document else ({}, [])
        return Observed(item[self.id_field], state, phase, self.outputs(item),
                        detail=str(item.get("FailureMessage") or ""), attributes=attributes, missing=missing)

    def _request(self, ctx: Context, section: str = "") -> dict[str, Any]:
        body = self.document.body[section] if section else self.document.body
        return ctx.resolve(body)

    def _known_request(self, ctx: Context, section: str = "") -> dict[str, Any]:
        body = self.document.body[section] if section else self.document.body
        return ctx.resolve(body, partial=True)

    def _after_create(self, ctx: Context, ident: str) -> Observed:
        ctx.publish({f"{self.kind}.{self.key}.id": ident})
        self._complete(ctx, ident)
        return self.read(ctx, ident) or Observed(ident, "pending", "pending")

    def _complete(self, ctx: Context, ident: str) -> None:
        """Make the parts beyond the create call (attributes, routes, attachments); safe to repeat."""

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        self._complete(ctx, observed.id or "")
        return self.read(ctx, observed.id) or observed


class Vpc(NetworkResource):
    kind = "vpc"
    teardown_rank = 140
    replace_on = ("CidrBlock",)
    describe, ids_param, items_key, id_field, label = "describe_vpcs", "VpcIds", "Vpcs", "VpcId", "VPC"

    def desired(self, ctx: Context) -> dict[str, Any]:
        return {"CidrBlock": self.document.body["create"]["CidrBlock"], "EnableDnsSupport": True,
                "EnableDnsHostnames": True}

    def attributes(self, ctx: Context, item: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        ec2 = ctx.client("ec2")
        found = {"CidrBlock": item.get("CidrBlock")}
        for attribute in ("enableDnsSupport", "enableDnsHostnames"):
            answer = ec2.describe_vpc_attribute(VpcId=item["VpcId"], Attribute=attribute)
            found[attribute[0].upper() + attribute[1:]] = answer[attribute[0].upper() + attribute[1:]]["Value"]
        return found, []

    def create(self, ctx: Context, token: str) -> Observed:
        vpc = ctx.client("ec2").create_vpc(**self._request(ctx, "create"))["Vpc"]
        return self._after_create(ctx, vpc["VpcId"])

    def _complete(self, ctx: Context, ident: str) -> None:
        ec2 = ctx.client("ec2")
        for section in ("dns_support", "dns_hostnames"):
            ec2.modify_vpc_attribute(**self._request(ctx, section))

    def delete(self, ctx: Context, observed: Observed) -> None:
        retry_busy(ctx, lambda: ctx.client("ec2").delete_vpc(VpcId=observed.id))


class Subnet(NetworkResource):
    kind = "subnet"
    teardown_rank = 130
    replace_on = ("CidrBlock", "AvailabilityZone", "VpcId")
    describe, ids_param, items_key, id_field, label = "describe_subnets", "SubnetIds", "Subnets", "SubnetId", "subnet"

    def desired(self, ctx: Context) -> dict[str, Any]:
        create = self._known_request(ctx, "create")
        return {"CidrBlock": create["CidrBlock"], "AvailabilityZone": create["AvailabilityZone"],
                "VpcId": create["VpcId"], "MapPublicIpOnLaunch": "public_ips" in self.document.body}

    def attributes(self, ctx: Context, item: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        return {k: item.get(k) for k in ("CidrBlock", "AvailabilityZone", "VpcId")} | {
            "MapPublicIpOnLaunch": bool(item.get("MapPublicIpOnLaunch"))}, []

    def create(self, ctx: Context, token: str) -> Observed:
        subnet = ctx.client("ec2").create_subnet(**self._request(ctx, "create"))["Subnet"]
        return self._after_create(ctx, subnet["SubnetId"])

    def _complete(self, ctx: Context, ident: str) -> None:
        if "public_ips" in self.document.body:
            ctx.client("ec2").modify_subnet_attribute(**self._request(ctx, "public_ips"))

    def delete(self, ctx: Context, observed: Observed) -> None:
        retry_busy(ctx, lambda: ctx.client("ec2").delete_subnet(SubnetId=observed.id))


class InternetGateway(NetworkResource):
    kind = "internet_gateway"
    teardown_rank = 120
    describe, ids_param, items_key = "describe_internet_gateways", "InternetGatewayIds", "InternetGateways"
    id_field, label = "InternetGatewayId", "internet gateway"

    def desired(self, ctx: Context) -> dict[str, Any]:
        return {"attached_to": self._known_request(ctx, "attach")["VpcId"]}

    def attributes(self, ctx: Context, item: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        attached = [a["VpcId"] for a in item.get("Attachments") or [] if a.get("State") in ("available", "attached")]
        return {"attached_to": attached[0] if attached else None}, []

    def create(self, ctx: Context, token: str) -> Observed:
        gateway = ctx.client("ec2").create_internet_gateway(**self._request(ctx, "create"))["InternetGateway"]
        return self._after_create(ctx, gateway["InternetGatewayId"])

    def _complete(self, ctx: Context, ident: str) -> None:
        ec2 = ctx.client("ec2")
        attach = self._request(ctx, "attach")
        gateway = ec2.describe_internet_gateways(InternetGatewayIds=[ident])["InternetGateways"][0]
        for attachment in gateway.get("Attachments") or []:
            if attachment["VpcId"] != attach["VpcId"]:
                ec2.detach_internet_gateway(InternetGatewayId=ident, VpcId=attachment["VpcId"])
        tolerate(lambda: ec2.attach_internet_gateway(**attach), "Resource.AlreadyAssociated")

    def delete(self, ctx: Context, observed: Observed) -> None:
        ec2 = ctx.client("ec2")
        gateways = self._items(ctx, InternetGatewayIds=[observed.id])
        for attachment in (gateways[0].get("Attachments") or []) if gateways else []:
            # AWS refuses to detach while the VPC still has mapped public addresses (a NAT gateway's).
            retry_busy(ctx, lambda vpc=attachment["VpcId"]: ec2.detach_internet_gateway(
                InternetGatewayId=observed.id, VpcId=vpc), "Gateway.NotAttached")
        retry_busy(ctx, lambda: ec2.delete_internet_gateway(InternetGatewayId=observed.id))


class ElasticIp(NetworkResource):
    kind = "elastic_ip"
    teardown_rank = 115
    describe, ids_param, items_key, id_field, label = ("describe_addresses", "AllocationIds", "Addresses",
                                                       "AllocationId", "Elastic IP")

    def outputs(self, item: dict[str, Any]) -> dict[str, Any]:
        return {f"elastic_ip.{self.key}.id": item["AllocationId"],
                f"elastic_ip.{self.key}.allocation_id": item["AllocationId"],
                f"elastic_ip.{self.key}.public_ip": item.get("PublicIp")}

    def create(self, ctx: Context, token: str) -> Observed:
        address = ctx.client("ec2").allocate_address(**self._request(ctx))
        return self.read(ctx, address["AllocationId"]) or Observed(address["AllocationId"], "available", "ready",
                                                                   self.outputs(address))

    def delete(self, ctx: Context, observed: Observed) -> None:
        # Deleting a NAT gateway disassociates its address; releasing waits until it has.
        retry_busy(ctx, lambda: ctx.client("ec2").release_address(AllocationId=observed.id))


class NatGateway(NetworkResource):
    kind = "nat_gateway"
    teardown_rank = 110
    replace_on = ("SubnetId", "AllocationId")
    describe, ids_param, items_key, id_field, label = ("describe_nat_gateways", "NatGatewayIds", "NatGateways",
                                                       "NatGatewayId", "NAT gateway")

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        super().__init__(key, document, known_id)
        # A public NAT gateway needs the VPC's internet gateway attached (Amazon VPC guide, "NAT gateways").
        self.extra_edges = (f"internet_gateway:{key}",) if document is not None else ()

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = self._known_request(ctx)
        return {"SubnetId": body["SubnetId"], "AllocationId": body["AllocationId"]}

    def attributes(self, ctx: Context, item: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        addresses = item.get("NatGatewayAddresses") or [{}]
        return {"SubnetId": item.get("SubnetId"), "AllocationId": addresses[0].get("AllocationId")}, []

    def create(self, ctx: Context, token: str) -> Observed:
        gateway = ctx.client("ec2").create_nat_gateway(ClientToken=token, **self._request(ctx))["NatGateway"]
        ident = gateway["NatGatewayId"]
        return self.read(ctx, ident) or Observed(ident, gateway.get("State", "pending"), "pending",
                                                 {f"nat_gateway.{self.key}.id": ident})

    def delete(self, ctx: Context, observed: Observed) -> None:
        tolerate(lambda: ctx.client("ec2").delete_nat_gateway(NatGatewayId=observed.id), "NatGatewayNotFound",
                 "InvalidNatGatewayID.NotFound")


class RouteTable(NetworkResource):
    kind = "route_table"
    teardown_rank = 105
    replace_on = ("VpcId",)
    describe, ids_param, items_key, id_field, label = ("describe_route_tables", "RouteTableIds", "RouteTables",
                                                       "RouteTableId", "route table")
    TARGETS = ("NatGatewayId", "GatewayId")

    def desired(self, ctx: Context) -> dict[str, Any]:
        route = self._known_request(ctx, "route")
        target = next(k for k in self.TARGETS if k in route)
        return {"VpcId": self._known_request(ctx, "create")["VpcId"], f"route.{target}": route[target],
                "associated_subnet": self._known_request(ctx, "associate")["SubnetId"]}

    def attributes(self, ctx: Context, item: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        found: dict[str, Any] = {"VpcId": item.get("VpcId")}
        default = next((r for r in item.get("Routes") or [] if r.get("DestinationCidrBlock") == "0.0.0.0/0"), {})
        for target in self.TARGETS:
            found[f"route.{target}"] = default.get(target)
        subnets = [a["SubnetId"] for a in item.get("Associations") or [] if a.get("SubnetId")]
        found["associated_subnet"] = subnets[0] if subnets else None
        return found, []

    def create(self, ctx: Context, token: str) -> Observed:
        table = ctx.client("ec2").create_route_table(ClientToken=token, **self._request(ctx, "create"))["RouteTable"]
        return self._after_create(ctx, table["RouteTableId"])

    def _complete(self, ctx: Context, ident: str) -> None:
        ec2 = ctx.client("ec2")
        route = self._request(ctx, "route")
        table = ec2.describe_route_tables(RouteTableIds=[ident])["RouteTables"][0]
        if any(r.get("DestinationCidrBlock") == "0.0.0.0/0" for r in table.get("Routes") or []):
            ec2.replace_route(**route)
        else:
            ec2.create_route(**route)
        associate = self._request(ctx, "associate")
        if not any(a.get("SubnetId") == associate["SubnetId"] for a in table.get("Associations") or []):
            ec2.associate_route_table(**associate)

    def delete(self, ctx: Context, observed: Observed) -> None:
        ec2 = ctx.client("ec2")
        for table in self._items(ctx, RouteTableIds=[observed.id]):
            for association in table.get("Associations") or []:
                if not association.get("Main"):
                    tolerate(lambda a=association: ec2.disassociate_route_table(
                        AssociationId=a["RouteTableAssociationId"]), "InvalidAssociationID.NotFound")
        retry_busy(ctx, lambda: ec2.delete_route_table(RouteTableId=observed.id))


class VpcEndpoint(NetworkResource):
    kind = "vpc_endpoint"
    teardown_rank = 100
    replace_on = ("ServiceName", "VpcEndpointType", "VpcId")
    describe, ids_param, items_key, id_field, label = ("describe_vpc_endpoints", "VpcEndpointIds", "VpcEndpoints",
                                                       "VpcEndpointId", "VPC endpoint")

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = self._known_request(ctx)
        tables = body["RouteTableIds"]
        return {"ServiceName": body["ServiceName"], "VpcEndpointType": body["VpcEndpointType"],
                "VpcId": body["VpcId"],
                "RouteTableIds": UNKNOWN if any(isinstance(t, Unknown) for t in tables) else sorted(tables)}

    def attributes(self, ctx: Context, item: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        return {"ServiceName": item.get("ServiceName"), "VpcEndpointType": item.get("VpcEndpointType"),
                "VpcId": item.get("VpcId"), "RouteTableIds": sorted(item.get("RouteTableIds") or [])}, []

    def create(self, ctx: Context, token: str) -> Observed:
        endpoint = ctx.client("ec2").create_vpc_endpoint(ClientToken=token, **self._request(ctx))["VpcEndpoint"]
        ident = endpoint["VpcEndpointId"]
        return self.read(ctx, ident) or Observed(ident, endpoint.get("State", "pending"), "pending",
                                                 {f"vpc_endpoint.{self.key}.id": ident})

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        wanted = set(self._request(ctx)["RouteTableIds"])
        live = set(observed.attributes.get("RouteTableIds") or [])
        ctx.client("ec2").modify_vpc_endpoint(VpcEndpointId=observed.id, AddRouteTableIds=sorted(wanted - live),
                                              RemoveRouteTableIds=sorted(live - wanted))
        return self.read(ctx, observed.id) or observed

    def delete(self, ctx: Context, observed: Observed) -> None:
        answer = ctx.client("ec2").delete_vpc_endpoints(VpcEndpointIds=[observed.id])
        for failure in answer.get("Unsuccessful") or []:
            code = (failure.get("Error") or {}).get("Code", "")
            if "NotFound" not in code:
                raise ClientError({"Error": failure.get("Error") or {}}, "DeleteVpcEndpoints")
