"""Preflight checks of the account, the network, the SSH key and the S3 bucket (each backend adds its own:
see :class:`fmcluster.preflight.common.BackendChecks`).

Capacity (quotas, reservations) lives in :mod:`fmcluster.preflight.capacity`.
"""

from __future__ import annotations

from fmcluster.aws.placement import head_types, offering_zones, resolve_placement
from fmcluster.checks import CheckResult
from fmcluster.errors import AwsError, UsageError
from fmcluster.preflight.common import Context, aws_code, aws_errors, aws_failure, fix, guarded
from fmcluster.preflight.network import check_access, check_node_network, check_queue_subnets
from fmcluster.spec import decisions
from fmcluster.spec.decisions import efa_network_interfaces
from fmcluster.spec.models import instance_types_of, max_nodes

#: AWS CDK (which ParallelCluster runs to synthesize its stack) supports Node.js 18 and later.


@guarded("credentials", "sts:GetCallerIdentity")
def check_credentials(ctx: Context) -> list[CheckResult]:
    identity = ctx.aws("sts").get_caller_identity()
    ctx.account = identity["Account"]
    return [CheckResult("credentials", "passed", f"account {identity['Account']} in {ctx.region}",
                        [f"as {identity.get('Arn', '?')}"])]


def check_subnet(ctx: Context) -> list[CheckResult]:
    """The compute subnet (and the head node's): exists, its AZ; without one, the default VPC's pick."""
    spec = ctx.spec
    ec2 = ctx.aws("ec2")
    named = spec.network.subnet_id
    try:
        placement = resolve_placement(spec, ec2, lambda: ctx.aws("resource-groups"))
    except AwsError as exc:
        return [aws_failure("subnet", f"subnet {named}", exc,
                            f"set network.subnet_id to a subnet of your VPC in {ctx.region} "
                            f"(`aws ec2 describe-subnets --region {ctx.region}` lists them), or remove it to use "
                            "the default VPC")]
    except UsageError as exc:
        message, _, remedy = str(exc).rpartition(": ")
        return [CheckResult("subnet", "failed", message or str(exc), [fix(remedy)] if message else [])]
    except aws_errors() as exc:  # from the default-VPC lookup
        return [aws_failure("subnet", "default VPC", exc)]
    ctx.placement = placement
    ctx.head_zone = placement.head_availability_zone
    if placement.created:
        offers = (f"its AZ offers {', '.join(_types(ctx))} (and holds the spec's capacity reservations, when they "
                  "share one AZ)") if not placement.head_zone else (
                  f"{placement.availability_zone} holds the spec's capacity reservations but does not offer "
                  f"{', '.join(head_types(spec))}, which go to {placement.head_zone}")
        return [CheckResult("subnet", "passed", f"no subnet in the spec: fmcluster creates {placement.describe()}",
                            [f"{offers}; compute nodes go to its private subnet behind a NAT gateway"]),
                *guarded("iam policies")(lambda ctx: check_access(ctx.spec, ec2, ctx.aws("iam"), ""))(ctx)]
    subnet = ec2.describe_subnets(SubnetIds=[placement.subnet_id])["Subnets"][0]
    where = f"{placement.subnet_id} in {placement.availability_zone} ({placement.vpc_id})"
    if named:
        results = [CheckResult("subnet", "passed", where)]
    else:
        results = [CheckResult("subnet", "passed", f"no subnet in the spec: the default VPC's {where} will be used",
                               [f"its AZ offers {', '.join(_types(ctx))} (and holds the spec's capacity "
                                "reservations, when they share one AZ); set network.subnet_id to choose another"])]
    results += _subnet_addresses(ctx, subnet)
    if named:
        results += guarded("node network", named)(
            lambda ctx: check_node_network(ctx.spec, ctx.region, ec2, named, ctx.backend_checks()))(ctx)
        results += guarded("security groups and policies")(
            lambda ctx: check_access(ctx.spec, ec2, ctx.aws("iam"), placement.vpc_id))(ctx)
        results += guarded("queue subnets")(lambda ctx: check_queue_subnets(ctx.spec, ec2, placement.vpc_id))(ctx)
    if spec.network.head_subnet_id:
        results += _head_subnet(ctx)
    return results


def _types(ctx: Context) -> list[str]:
    head = decisions.head_node_type(ctx.spec)
    return sorted({*([head] if head else []), *(q.instance_type for q in ctx.spec.queues)})


def _subnet_addresses(ctx: Context, subnet: dict) -> list[CheckResult]:
    """Every EFA interface takes an address: a p5 node with 32 of them needs 32 IPs of the subnet."""
    needed = 0 if ctx.spec.network.head_subnet_id else 1
    for queue in ctx.spec.queues:
        try:
            per_node = max(1, len(efa_network_interfaces(queue)))
        except LookupError:
            per_node = 1
        needed += per_node * max_nodes(queue)
    available = subnet.get("AvailableIpAddressCount")
    if available is None or available >= needed:
        return []
    return [CheckResult("subnet addresses", "failed",
                        f"{subnet['SubnetId']} has {available} free IPv4 addresses; the nodes need {needed} "
                        "(one per network interface, EFA interfaces included)",
                        [fix(f"use a larger subnet (at least {needed} free addresses) in "
                             f"{subnet['AvailabilityZone']}, or lower the queues' max nodes")])]


@guarded("head subnet")
def _head_subnet(ctx: Context) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    head_id = ctx.spec.network.head_subnet_id
    try:
        head = ctx.aws("ec2").describe_subnets(SubnetIds=[head_id])["Subnets"][0]
    except ClientError as exc:
        return [aws_failure("head subnet", f"subnet {head_id}", exc,
                            "check network.head_subnet_id and the region")]
    ctx.head_zone = head["AvailabilityZone"]
    if ctx.placement and head["VpcId"] != ctx.placement.vpc_id:
        return [CheckResult("head subnet", "failed",
                            f"{head_id} is in {head['VpcId']}, the compute subnet in {ctx.placement.vpc_id}",
                            [fix(f"choose a head subnet in {ctx.placement.vpc_id}")])]
    return [CheckResult("head subnet", "passed", f"{head_id} in {head['AvailabilityZone']} ({head['VpcId']})")]


def check_offerings(ctx: Context) -> list[CheckResult]:
    """Each instance type is offered in the AZ its nodes go to; if not, where it is."""
    if ctx.placement is None:
        return [CheckResult("instance types", "skipped", "needs the subnet's Availability Zone (see the subnet check)")]

    # A queue in its own subnet is checked with that subnet (fmcluster.preflight.network.check_queue_subnets).
    zones = {t: ctx.placement.availability_zone for q in ctx.spec.queues if not q.subnet_id
             for t in instance_types_of(q)}
    head = decisions.head_node_type(ctx.spec)
    if head:
        zones.setdefault(head, ctx.head_zone or ctx.placement.availability_zone)
    return [result for instance_type, zone in sorted(zones.items()) for result in _offering(ctx, instance_type, zone)]


def _offering(ctx: Context, instance_type: str, zone: str) -> list[CheckResult]:
    name = f"offering {instance_type}"

    @guarded(name, f"{instance_type} in {zone}")
    def run(ctx: Context) -> list[CheckResult]:
        ec2 = ctx.aws("ec2")
        offers = ec2.describe_instance_type_offerings(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [instance_type]}, {"Name": "location", "Values": [zone]}],
        )["InstanceTypeOfferings"]
        if offers:
            return [CheckResult(name, "passed", f"offered in {zone}")]
        elsewhere = sorted(offering_zones(ec2, instance_type))
        if not elsewhere:
            return [CheckResult(name, "failed", f"{instance_type} is not offered in any AZ of {ctx.region}",
                                [fix(f"choose a region that offers {instance_type} (`aws ec2 "
                                     f"describe-instance-type-offerings --location-type availability-zone "
                                     f"--filters Name=instance-type,Values={instance_type} --region REGION`), "
                                     "or another instance type")])]
        return [CheckResult(name, "failed", f"{instance_type} is not offered in {zone}",
                            [f"offered in: {', '.join(elsewhere)}",
                             fix(f"set network.subnet_id to a subnet in {' or '.join(elsewhere)}")])]

    return run(ctx)


@guarded("key pair")
def check_key_pair(ctx: Context) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    key = ctx.spec.network.ssh.key_name
    if not key:
        return []
    try:
        pair = ctx.aws("ec2").describe_key_pairs(KeyNames=[key])["KeyPairs"][0]
    except ClientError as exc:
        return [aws_failure("key pair", f"key pair {key}", exc,
                            f"create or import it (`aws ec2 create-key-pair --key-name {key} --region {ctx.region}`, "
                            f"or `aws ec2 import-key-pair`), or fix network.ssh.key_name")]
    return [CheckResult("key pair", "passed", f"{key} exists ({pair.get('KeyType', 'rsa')})")]


def check_buckets(ctx: Context) -> list[CheckResult]:
    lustre = ctx.spec.storage.lustre
    if lustre is None:
        return []
    urls = [(field, url) for field, url in (("s3_import", lustre.s3_import), ("s3_export", lustre.s3_export)) if url]
    results: list[CheckResult] = []
    seen: set[str] = set()
    for field, url in urls:
        bucket = url[len("s3://"):].split("/", 1)[0]
        if bucket not in seen:
            seen.add(bucket)
            results += _bucket(ctx, field, bucket)
    return results


def _bucket(ctx: Context, field: str, bucket: str) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    name = f"bucket {bucket}"
    where = f"storage.lustre.{field}"

    @guarded(name, f"s3://{bucket}")
    def run(ctx: Context) -> list[CheckResult]:
        try:
            answer = ctx.aws("s3").head_bucket(Bucket=bucket)
        except ClientError as exc:
            code = aws_code(exc)
            if code in ("404", "NoSuchBucket", "NotFound"):
                return [CheckResult(name, "failed", f"s3://{bucket} ({where}) does not exist",
                                    [f"AWS said {code}",
                                     fix(f"create it (`aws s3 mb s3://{bucket} --region {ctx.region}`) or fix "
                                         f"{where}")])]
            if code in ("403", "AccessDenied", "Forbidden"):
                return [CheckResult(name, "failed", f"s3://{bucket} ({where}) exists but these credentials may "
                                    "not read it", [f"AWS said {code}",
                                                    fix(f"allow s3:ListBucket and s3:GetObject on {bucket}, or "
                                                        "use a bucket of this account")])]
            raise
        bucket_region = answer.get("BucketRegion") or answer.get("ResponseMetadata", {}).get(
            "HTTPHeaders", {}).get("x-amz-bucket-region")
        if bucket_region and bucket_region != ctx.region:
            return [CheckResult(name, "failed", f"s3://{bucket} is in {bucket_region}, the cluster in {ctx.region}",
                                [fix(f"FSx for Lustre links buckets of its own region only: use a bucket in "
                                     f"{ctx.region} for {where}")])]
        return [CheckResult(name, "passed", f"s3://{bucket} exists" + (f" in {bucket_region}" if bucket_region
                                                                       else ""))]

    return run(ctx)
