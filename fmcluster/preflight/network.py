"""Can multi-interface nodes in the spec's subnet reach the internet and the PCS API?

A node launched with several network interfaces (multi-EFA) gets no public IPv4 address, whatever the
subnet's auto-assign setting ("Assign a public IPv4 address during instance launch", EC2 user guide;
ParallelCluster's MultiNetworkInterfacesInstancesValidator says the same). It reaches PCS (to register,
``RegisterComputeNodeGroupInstance``), S3 and package mirrors only through a default route to a NAT
gateway, or, for PCS, through a PCS interface endpoint with private DNS ("AWS PCS VPC and subnet
requirements", PCS user guide). PCS nodes that cannot register never join the cluster, so PCS fails the
check; on ParallelCluster it is a warning, as ParallelCluster's own validator gives.
"""

from __future__ import annotations

from typing import Any

from fmcluster.aws.placement import offering_zones, zone_label
from fmcluster.checks import CheckResult
from fmcluster.preflight.common import BackendChecks
from fmcluster.spec.models import Spec, instance_types_of
from fmcluster.spec.networking import interface_count, multi_interface_queues

NAME = "node network"


def _route_table(ec2: Any, subnet: dict[str, Any]) -> dict[str, Any] | None:
    explicit = ec2.describe_route_tables(
        Filters=[{"Name": "association.subnet-id", "Values": [subnet["SubnetId"]]}])["RouteTables"]
    if explicit:
        return explicit[0]
    main = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [subnet["VpcId"]]},
                                              {"Name": "association.main", "Values": ["true"]}])["RouteTables"]
    return main[0] if main else None


def _nat_route(table: dict[str, Any] | None) -> bool:
    return any(r.get("DestinationCidrBlock") == "0.0.0.0/0" and r.get("NatGatewayId") and r.get("State", "active")
               == "active" for r in (table or {}).get("Routes") or [])


def _interface_endpoint(ec2: Any, vpc_id: str, service: str) -> bool:
    endpoints = ec2.describe_vpc_endpoints(Filters=[
        {"Name": "vpc-id", "Values": [vpc_id]},
        {"Name": "service-name", "Values": [service]}])["VpcEndpoints"]
    return any(e.get("VpcEndpointType", "").lower() == "interface" and e.get("PrivateDnsEnabled", True)
               and str(e.get("State", "")).lower() == "available" for e in endpoints)


def check_node_network(spec: Spec, region: str, ec2: Any, subnet_id: str, backend: BackendChecks) -> list[CheckResult]:
    """One result per subnet of the spec that multi-interface queues use (nothing to check for a network
    fmcluster creates); ``backend``: the spec's backend's checks."""
    by_subnet: dict[str, list[tuple[int, Any]]] = {}
    for index, queue in multi_interface_queues(spec):
        by_subnet.setdefault(queue.subnet_id or subnet_id, []).append((index, queue))
    return [result for subnet, queues in by_subnet.items()
            for result in _subnet_reach(region, ec2, subnet, queues, backend)]


def _subnet_reach(region: str, ec2: Any, subnet_id: str, queues: list, backend: BackendChecks) -> list[CheckResult]:
    names = ", ".join(f"{q.name} ({q.instance_type}, {interface_count(q)} interfaces)" for _, q in queues)
    subnet = ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]
    problems = []
    if subnet.get("MapPublicIpOnLaunch"):
        problems.append(f"{subnet_id} auto-assigns public IPv4 addresses, which EC2 cannot give a multi-interface "
                        "node (ParallelCluster refuses to launch them with AssignPublicIp)")
    nat = _nat_route(_route_table(ec2, subnet))
    service = backend.registration_service and f"com.amazonaws.{region}.{backend.registration_service}"
    endpoint = bool(service) and _interface_endpoint(ec2, subnet["VpcId"], service)
    if not nat and not endpoint:
        problems.append(f"{subnet_id} has no default route to a NAT gateway"
                        + (f" and VPC {subnet['VpcId']} no {backend.display} interface endpoint ({service}): "
                           f"the nodes could not register with {backend.display}" if service else
                           ": the nodes could not reach the internet or S3"))
    if not problems:
        how = "a NAT gateway" if nat else f"the {backend.display} interface endpoint"
        return [CheckResult(NAME, "passed", f"{subnet_id} reaches out through {how} for {names}")]
    fix = ("fix: use a private subnet whose route table sends 0.0.0.0/0 to a NAT gateway (and does not auto-assign "
           "public IPs), or remove network.subnet_id and let fmcluster create such a network")
    return [CheckResult(NAME, backend.unreachable_nodes, f"multi-interface queues {names}: " + "; ".join(problems),
                        [fix])]


def check_access(spec: Spec, ec2: Any, iam: Any, vpc_id: str) -> list[CheckResult]:
    """The spec's own security groups exist in the subnet's VPC, and its IAM policies exist."""
    from botocore.exceptions import ClientError

    results: list[CheckResult] = []
    groups = sorted({*spec.network.additional_security_groups, *spec.network.security_groups})
    if groups:
        try:
            found = ec2.describe_security_groups(GroupIds=groups)["SecurityGroups"]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            results.append(CheckResult("security groups", "failed", f"AWS said {code}: "
                                       f"{exc.response.get('Error', {}).get('Message', '')}",
                                       ["fix: list security groups that exist in the subnet's VPC"]))
        else:
            elsewhere = [f"{g['GroupId']} ({g['VpcId']})" for g in found if g.get("VpcId") != vpc_id]
            if elsewhere:
                results.append(CheckResult("security groups", "failed", f"not in the subnet's VPC {vpc_id}: "
                                           + ", ".join(elsewhere), ["fix: use groups of the subnet's VPC"]))
            else:
                results.append(CheckResult("security groups", "passed", f"{', '.join(groups)} in {vpc_id}"))
    policies = list(dict.fromkeys([*spec.iam.additional_policies,
                                   *(arn for q in spec.queues if q.iam for arn in q.iam.additional_policies)]))
    missing = []
    for arn in policies:
        try:
            iam.get_policy(PolicyArn=arn)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "NoSuchEntity":
                raise
            missing.append(arn)
    if missing:
        results.append(CheckResult("iam policies", "failed", f"no such policy: {', '.join(missing)}",
                                   ["fix: check the ARNs (`aws iam get-policy --policy-arn ARN`)"]))
    elif policies:
        results.append(CheckResult("iam policies", "passed", f"{len(policies)} policies exist"))
    return results


def check_queue_subnets(spec: Spec, ec2: Any, vpc_id: str) -> list[CheckResult]:
    """Each queue's own subnet exists, is in the VPC of network.subnet_id, and its AZ offers the queue's types."""
    from botocore.exceptions import ClientError

    results = []
    for queue in (q for q in spec.queues if q.subnet_id):
        name = f"subnet of {queue.name}"
        try:
            subnet = ec2.describe_subnets(SubnetIds=[queue.subnet_id])["Subnets"][0]
        except ClientError as exc:
            error = exc.response.get("Error", {})
            results.append(CheckResult(name, "failed", f"{queue.subnet_id}: AWS said {error.get('Code')}: "
                                       f"{error.get('Message', '')}", ["fix: check queues[].subnet_id and the region"]))
            continue
        zone = subnet["AvailabilityZone"]
        if subnet["VpcId"] != vpc_id:
            results.append(CheckResult(name, "failed", f"{queue.subnet_id} is in {subnet['VpcId']}, network.subnet_id "
                                       f"in {vpc_id}", [f"fix: choose a subnet of {vpc_id} for queue {queue.name}"]))
            continue
        absent = [t for t in instance_types_of(queue) if zone not in offering_zones(ec2, t)]
        label = zone_label(ec2, zone)
        if absent:
            results.append(CheckResult(name, "failed", f"{', '.join(absent)} not offered in {label} "
                                       f"({queue.subnet_id})", ["fix: choose a subnet in a zone that offers them"]))
        else:
            results.append(CheckResult(name, "passed", f"{queue.subnet_id} in {label} offers "
                                       f"{', '.join(instance_types_of(queue))}"))
    return results
