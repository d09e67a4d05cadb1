"""Preflight checks only EKS needs: that AWS publishes the EKS-optimized image each queue's nodes boot, for the
cluster's Kubernetes version in its Region (the public SSM parameters EKS resolves an amiType from), and what EKS
clusters the Region holds already."""

from __future__ import annotations

import re

from fmcluster.aws.placement import offering_zones
from fmcluster.backends.eks.nodes.images import node_image
from fmcluster.backends.eks.nodes.quota_check import check_quotas
from fmcluster.backends.eks.software import dra_driver
from fmcluster.checks import CheckResult
from fmcluster.preflight.common import BackendChecks, Context, aws_code, aws_errors, fix, guarded


@guarded("eks images", "ssm:GetParameter")
def check_images(ctx: Context) -> list[CheckResult]:
    version = ctx.spec.kubernetes.version
    ssm = ctx.aws("ssm")
    passed, failed = [], []
    for queue in ctx.spec.queues:
        image = node_image(queue)
        parameter = image.ssm_parameter(version)
        try:
            ami = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
        except aws_errors() as exc:
            if aws_code(exc) != "ParameterNotFound":
                raise
            failed += [f"{queue.name} ({queue.instance_type}): AWS publishes no {parameter} in {ctx.region}",
                       fix(f"use a Kubernetes version or Region for which AWS publishes {image.describe()} (EKS "
                           "guide, 'Retrieve recommended Amazon Linux AMI IDs')")]
            continue
        release = _too_old_for_imex(ctx, queue, ami)
        if release:
            first = f"v{dra_driver.FIRST_AMI_RELEASE}"
            failed += [f"{queue.name} ({queue.instance_type}): {ami} is release {release}, older than {first}",
                       fix(f"AWS's P6e-GB200 page asks for the AL2023 ARM NVIDIA image {first} or later (NVIDIA "
                           f"driver 580, IMEX): wait for EKS to publish it in {ctx.region}")]
            continue
        passed.append(f"{queue.name} ({queue.instance_type}): {image.describe()}, {ami}"
                      + (f", release {_release(ctx, ami)}" if dra_driver.serves(queue) else ""))
    if failed:
        return [CheckResult("eks images", "failed", f"a queue's node image is not published (or too old) for "
                                                    f"Kubernetes {version} in {ctx.region}", failed + passed)]
    return [CheckResult("eks images", "passed", f"every queue's node image exists for Kubernetes {version}", passed)]


# AWS's AMI names end in the release: amazon-eks-node-al2023-arm64-nvidia-1.34-v20251103.
_RELEASE = re.compile(r"-v(\d{8})$")


def _release(ctx: Context, ami: str) -> str | None:
    images = ctx.aws("ec2").describe_images(ImageIds=[ami])["Images"]
    found = _RELEASE.search(images[0].get("Name") or "") if images else None
    return f"v{found.group(1)}" if found else None


def _too_old_for_imex(ctx: Context, queue: object, ami: str) -> str | None:
    """The release of an UltraServer queue's image when it is older than the P6e-GB200 page's first, else None."""
    if not dra_driver.serves(queue):  # type: ignore[arg-type]
        return None
    release = _release(ctx, ami)
    return release if release and release[1:] < dra_driver.FIRST_AMI_RELEASE else None


@guarded("eks clusters", "eks:ListClusters")
def check_clusters(ctx: Context) -> list[CheckResult]:
    names = [n for page in ctx.aws("eks").get_paginator("list_clusters").paginate() for n in page["clusters"]]
    details = [f"an EKS cluster named {ctx.spec.name} exists already: create resumes it when fmcluster made it"] \
        if ctx.spec.name in names else []
    return [CheckResult("eks clusters", "passed", f"{len(names)} EKS cluster(s) in {ctx.region}", details)]


@guarded("ultraserver zones", "ec2:DescribeAvailabilityZones")
def check_ultraserver_zones(ctx: Context) -> list[CheckResult]:
    """Where AWS sells the UltraServer queues' type (the Dallas Local Zone for p6e-gb200): EKS's control plane takes
    only Availability Zone subnets ("Launch low-latency EKS clusters with AWS Local Zones": "you must not specify
    Local Zone subnets when you create your cluster"), so the queue's node group needs a subnet of its own in that
    zone, which the account makes only after opting in to the zone's group."""
    spec = ctx.spec
    queues = [q for q in spec.queues if dra_driver.serves(q)]
    if not queues:
        return []
    ec2 = ctx.aws("ec2")

    def zones(names: list[str]) -> dict[str, dict]:
        found = ec2.describe_availability_zones(ZoneNames=names, AllAvailabilityZones=True)["AvailabilityZones"]
        return {z["ZoneName"]: z for z in found}

    passed, failed = [], []
    if spec.network.subnet_id:
        subnet = ec2.describe_subnets(SubnetIds=[spec.network.subnet_id])["Subnets"][0]
        zone = zones([subnet["AvailabilityZone"]]).get(subnet["AvailabilityZone"]) or {}
        if zone.get("ZoneType") == "local-zone":
            failed += [f"network.subnet_id {spec.network.subnet_id} is in Local Zone {zone['ZoneName']}: EKS's control "
                       "plane and the system nodes need a subnet in an Availability Zone",
                       fix(f"set network.subnet_id to a subnet of {subnet['VpcId']} in an Availability Zone of "
                           f"{ctx.region}, and queues[].subnet_id to the Local Zone subnet")]
    for queue in queues:
        sold = sorted(offering_zones(ec2, queue.instance_type))
        where = zones(sold) if sold else {}
        if queue.subnet_id is None:
            closed = sorted({z["GroupName"] for z in where.values() if z.get("OptInStatus") == "not-opted-in"})
            places = ", ".join(zone_text(z) for z in where.values()) or f"no zone of {ctx.region}"
            failed += [f"{queue.name} ({queue.instance_type}) has no subnet of its own, and AWS sells the type in "
                       f"{places} only", fix("set queues[].subnet_id to a subnet in that zone, in the VPC of "
                                             "network.subnet_id")]
            failed += [fix(f"first opt in to zone group {group}: aws ec2 modify-availability-zone-group --region "
                           f"{ctx.region} --group-name {group} --opt-in-status opted-in") for group in closed]
            continue
        subnet = ec2.describe_subnets(SubnetIds=[queue.subnet_id])["Subnets"][0]
        zone = zones([subnet["AvailabilityZone"]]).get(subnet["AvailabilityZone"]) or {}
        if zone.get("OptInStatus") == "not-opted-in":
            failed += [f"{queue.name}: {queue.subnet_id} is in {zone_text(zone)}, whose zone group "
                       f"{zone['GroupName']} the account has not opted in to",
                       fix(f"aws ec2 modify-availability-zone-group --region {ctx.region} --group-name "
                           f"{zone['GroupName']} --opt-in-status opted-in")]
        else:
            opted = f", zone group {zone['GroupName']} opted in" if zone.get("ZoneType") == "local-zone" else ""
            passed.append(f"{queue.name}: its node group in {queue.subnet_id}, {zone_text(zone)}{opted}; the control "
                          "plane in the Region's Availability Zones")
    if failed:
        return [CheckResult("ultraserver zones", "failed", "an UltraServer queue's nodes cannot be placed where AWS "
                                                           "sells them", failed + passed)]
    return [CheckResult("ultraserver zones", "passed", "each UltraServer queue has a subnet where AWS sells it",
                        passed)]


def zone_text(zone: dict) -> str:
    name = zone.get("ZoneName", "?")
    return f"Local Zone {name}" if zone.get("ZoneType") == "local-zone" else name


def _checks(ctx: Context, aws_answered: bool) -> list[CheckResult]:
    return (check_images(ctx) + check_clusters(ctx) + check_quotas(ctx) + check_ultraserver_zones(ctx)
            if aws_answered else [])


CHECKS = BackendChecks(run=_checks, display="EKS", registration_service=None, unreachable_nodes="failed")
