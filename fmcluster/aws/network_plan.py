"""The created network within a plan: which resource makes each network document, the edges that make
launches wait for the routes, and the scan that finds every network resource tagged for a cluster."""

from __future__ import annotations

from typing import Any

from fmcluster.aws.ownership import tag_dict, tagged_for_cluster
from fmcluster.aws.vpc import (
    ElasticIp,
    InternetGateway,
    NatGateway,
    NetworkResource,
    RouteTable,
    Subnet,
    Vpc,
    VpcEndpoint,
    phase_of,
)
from fmcluster.engine import Context, Resource, reads
from fmcluster.render.common import CLUSTER_TAG

RESOURCES: dict[str, type[NetworkResource]] = {
    cls.kind: cls for cls in (Vpc, Subnet, InternetGateway, ElasticIp, NatGateway, RouteTable, VpcEndpoint)}
# Kinds that launch into the subnets and need the routes in place first (nodes register with PCS at boot).
ROUTE_TABLE_NAMES = ("route_table:compute", "route_table:public")


def after_routes(resources: list[Resource]) -> None:
    """Make everything that launches into a created subnet wait for both route tables: a node that boots
    before its default route exists cannot reach PCS (or anything) to finish its setup."""
    names = {r.name for r in resources}
    if not set(ROUTE_TABLE_NAMES) <= names:
        return
    for resource in resources:
        if resource.kind in RESOURCES:
            continue
        if any(ref.startswith("subnet.") for ref in resource.references()):
            resource.extra_edges = tuple(sorted(set(resource.extra_edges) | set(ROUTE_TABLE_NAMES)))


def scan_network(ctx: Context) -> list[tuple[str, str, str, dict[str, str], str, Any]]:
    """Every networking resource tagged for the cluster: (kind, id, state, tags, description, created), created
    being when it started to bill where EC2 says (a NAT gateway's CreateTime), else None."""
    ec2 = ctx.client("ec2")
    found = []
    tag_filter = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [ctx.cluster]}]
    for cls in RESOURCES.values():
        if ec2.can_paginate(cls.describe):
            pages = list(ec2.get_paginator(cls.describe).paginate(Filters=tag_filter))
        else:  # DescribeAddresses answers with every address at once
            pages = [getattr(ec2, cls.describe)(Filters=tag_filter)]
        for item in (i for page in pages for i in page[cls.items_key]):
            reads.keep(ctx, f"ec2.{cls.items_key}", item, item[cls.id_field])  # NetworkResource.read by id
            tags = tag_dict(item.get("Tags"))
            state = str(item.get("State", "available"))
            if not tagged_for_cluster(tags, ctx) or phase_of(state) == "gone":
                continue
            found.append((cls.kind, item[cls.id_field], state, tags, f"{cls.label} {item[cls.id_field]}",
                          item.get("CreateTime")))
    return found
