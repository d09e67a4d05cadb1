"""Subnet ids for ParallelCluster's validators when fmcluster creates the network at create time.

The validators read live subnets (AZ, VPC, route to the internet, public-IP setting). Once the cluster's
network exists (a re-run, or ``validate`` after ``create``) its own subnets are used. Before that there is
nothing to read, so the default VPC's subnet in the same Availability Zone stands in, and the details say
so: what the validators say about that subnet is about the stand-in, not the network fmcluster will make.
"""

from __future__ import annotations

from typing import Any

from fmcluster.connection import aws
from fmcluster.engine.references import references
from fmcluster.render.common import CLUSTER_TAG, RESOURCE_TAG

SUBNET_PREFIX = "subnet."


def network_stand_ins(config: dict[str, Any], name: str, region: str,
                      zone: str | None) -> tuple[dict[str, str], list[str]]:
    """(values for the config's ``${subnet.*.id}`` references, notes)."""
    wanted = sorted(ref for ref in references(config) if ref.startswith(SUBNET_PREFIX))
    if not wanted:
        return {}, []
    ec2 = aws.client("ec2", region)
    subnets = ec2.describe_subnets(Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": [name]}])["Subnets"]
    mine = {}
    for subnet in subnets:
        tags = {t["Key"]: t["Value"] for t in subnet.get("Tags", [])}
        mine[f"subnet.{tags.get(RESOURCE_TAG, '').partition(':')[2]}.id"] = subnet["SubnetId"]
    if all(ref in mine for ref in wanted):
        return {ref: mine[ref] for ref in wanted}, [
            "the network fmcluster created for this cluster: " + ", ".join(mine[ref] for ref in wanted)]
    filters = [{"Name": "default-for-az", "Values": ["true"]}]
    if zone:
        filters.append({"Name": "availability-zone", "Values": [zone]})
    defaults = sorted(ec2.describe_subnets(Filters=filters)["Subnets"], key=lambda s: s["AvailabilityZone"])
    if not defaults:
        return {}, []
    stand_in = defaults[0]
    return {ref: stand_in["SubnetId"] for ref in wanted}, [
        f"the network fmcluster creates does not exist before create: the default VPC's {stand_in['SubnetId']} "
        f"({stand_in['AvailabilityZone']}) stood in for its subnets, so what the validators say about that subnet "
        "(public IPs, routes) is about the stand-in; create runs them again on the real subnets"]
