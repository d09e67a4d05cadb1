"""What the sandbox holds for one cluster, read with boto3 (never from fmcluster's output): the leftover scan
that the kill tests and the chaos benchmarks (bench/common.py re-exports it) both use."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

TAG = "fmcluster:cluster"


def inventory_of(client: Callable[[str], Any], name: str, region: str = "us-east-1") -> dict[str, list[str]]:
    """Live resources tagged (or named) for cluster *name*, as readable strings per kind. Every list
    call pages through to the end, so a busy account cannot hide a leftover behind the first page."""
    ec2, pcs, cfn, iam = (client(s) for s in ("ec2", "pcs", "cloudformation", "iam"))

    def pages(api: Any, operation: str, key: str, **kwargs: Any) -> list[dict]:
        return [item for page in api.get_paginator(operation).paginate(**kwargs) for item in page[key]]

    tag = [{"Name": f"tag:{TAG}", "Values": [name]}]
    inventory: dict[str, list[str]] = {}
    instances = set()
    for filters in (tag, [{"Name": "tag:parallelcluster:cluster-name", "Values": [name]}]):
        instances |= {f"{i['InstanceId']} {i['State']['Name']}"
                      for r in pages(ec2, "describe_instances", "Reservations", Filters=filters)
                      for i in r["Instances"] if i["State"]["Name"] != "terminated"}
    inventory["instances"] = sorted(instances)
    inventory["security_groups"] = [g["GroupName"] for g in
                                    pages(ec2, "describe_security_groups", "SecurityGroups", Filters=tag)]
    inventory["launch_templates"] = [t["LaunchTemplateName"] for t in
                                     pages(ec2, "describe_launch_templates", "LaunchTemplates", Filters=tag)]
    inventory["placement_groups"] = [g["GroupName"] for g in
                                     ec2.describe_placement_groups(Filters=tag)["PlacementGroups"]
                                     if g.get("State") not in ("deleted",)]
    clusters = [c for c in pages(pcs, "list_clusters", "clusters") if c["name"] == name]
    inventory["pcs_clusters"] = [f"{c['name']} {c['id']} {c['status']}" for c in clusters]
    groups, queues = [], []
    for cluster in clusters:
        groups += [g["name"] for g in pages(pcs, "list_compute_node_groups", "computeNodeGroups",
                                            clusterIdentifier=cluster["id"])]
        queues += [q["name"] for q in pages(pcs, "list_queues", "queues", clusterIdentifier=cluster["id"])]
    inventory["pcs_node_groups"], inventory["pcs_queues"] = groups, queues
    # the PCS node role and its instance profile carry the cluster's name and region, not only its tags
    role = f"AWSPCS-{name}-{region}"
    inventory["iam_roles"] = [r["RoleName"] for r in pages(iam, "list_roles", "Roles")
                              if r["RoleName"] == role]
    inventory["iam_instance_profiles"] = [p["InstanceProfileName"] for p in
                                          pages(iam, "list_instance_profiles", "InstanceProfiles")
                                          if p["InstanceProfileName"] == role]
    stacks = []
    for stack in pages(cfn, "list_stacks", "StackSummaries"):
        if stack["StackStatus"] != "DELETE_COMPLETE" and (
                stack["StackName"] == name or stack["StackName"].startswith(f"{name}-")):
            stacks.append(f"{stack['StackName']} {stack['StackStatus']}")
    inventory["cfn_stacks"] = stacks
    inventory.update(_eks_inventory(client, name, region, tag, pages))
    return inventory

def _eks_inventory(client: Callable[[str], Any], name: str, region: str, tag: list[dict],
                   pages: Any) -> dict[str, list[str]]:
    """What an EKS cluster (and any backend that makes a network or Lustre) leaves when it leaks: the EKS
    cluster, its node groups and add-ons, EKS's own cluster security group and nodes (tagged by EKS, not by
    fmcluster), the network fmcluster made, FSx file systems, and the two IAM roles named after the cluster."""
    ec2, eks, fsx, iam = (client(s) for s in ("ec2", "eks", "fsx", "iam"))
    inventory: dict[str, list[str]] = {}
    clusters = [c for c in pages(eks, "list_clusters", "clusters") if c == name]
    described = []
    for cluster in clusters:
        try:
            described.append(eks.describe_cluster(name=cluster)["cluster"])
        except eks.exceptions.ResourceNotFoundException:
            continue  # gone between the list and the read
    inventory["eks_clusters"] = [f"{c['name']} {c['status']}" for c in described]
    groups, addons = [], []
    for cluster in described:
        if cluster["status"] == "DELETING":
            continue
        groups += [f"{g} {cluster['name']}" for g in pages(eks, "list_nodegroups", "nodegroups",
                                                            clusterName=cluster["name"])]
        addons += [f"{a} {cluster['name']}" for a in pages(eks, "list_addons", "addons",
                                                           clusterName=cluster["name"])]
    inventory["eks_node_groups"], inventory["eks_addons"] = groups, addons
    eks_tag = [{"Name": "tag:eks:cluster-name", "Values": [name]}]
    inventory["eks_instances"] = sorted(
        f"{i['InstanceId']} {i['State']['Name']}" for r in pages(ec2, "describe_instances", "Reservations",
                                                                 Filters=eks_tag)
        for i in r["Instances"] if i["State"]["Name"] != "terminated")
    inventory["eks_security_groups"] = [g["GroupName"] for g in pages(
        ec2, "describe_security_groups", "SecurityGroups", Filters=eks_tag)]

    def named(item: dict, key: str) -> str:
        tags = {t["Key"]: t["Value"] for t in item.get("Tags", [])}
        return f"{tags.get('Name', '-')} {item[key]}"

    inventory["vpcs"] = [named(v, "VpcId") for v in pages(ec2, "describe_vpcs", "Vpcs", Filters=tag)]
    inventory["subnets"] = [named(s, "SubnetId") for s in pages(ec2, "describe_subnets", "Subnets", Filters=tag)]
    inventory["internet_gateways"] = [named(g, "InternetGatewayId") for g in pages(
        ec2, "describe_internet_gateways", "InternetGateways", Filters=tag)]
    inventory["nat_gateways"] = [named(g, "NatGatewayId") + f" {g['State']}" for g in pages(
        ec2, "describe_nat_gateways", "NatGateways", Filter=tag) if g["State"] not in ("deleted",)]
    inventory["elastic_ips"] = [named(a, "AllocationId") for a in ec2.describe_addresses(Filters=tag)["Addresses"]]
    inventory["route_tables"] = [named(t, "RouteTableId") for t in pages(
        ec2, "describe_route_tables", "RouteTables", Filters=tag)]
    inventory["vpc_endpoints"] = [named(e, "VpcEndpointId") + f" {e['State']}" for e in pages(
        ec2, "describe_vpc_endpoints", "VpcEndpoints", Filters=tag) if e["State"].lower() != "deleted"]
    file_systems = []
    for fs in pages(fsx, "describe_file_systems", "FileSystems"):
        tags = {t["Key"]: t["Value"] for t in fs.get("Tags", [])}
        if tags.get(TAG) == name and fs.get("Lifecycle") != "DELETED":
            file_systems.append(f"{tags.get('Name', fs['FileSystemType'])} {fs['FileSystemId']} {fs['Lifecycle']}")
    inventory["fsx_file_systems"] = file_systems
    roles = {f"{name}-{region}-eks-{purpose}" for purpose in ("cluster", "nodes")}
    inventory["eks_iam_roles"] = [r["RoleName"] for r in pages(iam, "list_roles", "Roles")
                                  if r["RoleName"] in roles]
    return inventory


def duplicates(inventory: dict[str, list[str]]) -> dict[str, list[str]]:
    """More than one PCS or EKS cluster, security group, launch template, node group, queue, add-on, IAM role or
    instance profile, stack, VPC or file system of the same name."""
    found = {}
    keyed = {"pcs_clusters": lambda s: s.split()[0], "security_groups": str, "launch_templates": str,
             "cfn_stacks": lambda s: s.split()[0], "pcs_node_groups": str, "pcs_queues": str,
             "iam_roles": str, "iam_instance_profiles": str, "eks_clusters": lambda s: s.split()[0],
             "eks_node_groups": str, "eks_addons": str, "eks_iam_roles": str, "vpcs": lambda s: s.split()[0],
             "fsx_file_systems": lambda s: s.split()[0]}
    for kind, key in keyed.items():
        counts = Counter(key(item) for item in inventory.get(kind, []))
        extra = [f"{item} x{n}" for item, n in counts.items() if n > 1]
        if extra:
            found[kind] = extra
    return found
