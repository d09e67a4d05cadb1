"""Preflight checks only EKS needs: that AWS publishes the EKS-optimized image each queue's nodes boot, for the
cluster's Kubernetes version in its Region (the public SSM parameters EKS resolves an amiType from), and what EKS
clusters the Region holds already."""

from __future__ import annotations

from fmcluster.backends.eks.node_images import node_image
from fmcluster.backends.eks.quota_check import check_quotas
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
        passed.append(f"{queue.name} ({queue.instance_type}): {image.describe()}, {ami}")
    if failed:
        return [CheckResult("eks images", "failed", f"a queue's node image is not published for Kubernetes "
                                                    f"{version} in {ctx.region}", failed + passed)]
    return [CheckResult("eks images", "passed", f"every queue's node image exists for Kubernetes {version}", passed)]


@guarded("eks clusters", "eks:ListClusters")
def check_clusters(ctx: Context) -> list[CheckResult]:
    names = [n for page in ctx.aws("eks").get_paginator("list_clusters").paginate() for n in page["clusters"]]
    details = [f"an EKS cluster named {ctx.spec.name} exists already: create resumes it when fmcluster made it"] \
        if ctx.spec.name in names else []
    return [CheckResult("eks clusters", "passed", f"{len(names)} EKS cluster(s) in {ctx.region}", details)]


def _checks(ctx: Context, aws_answered: bool) -> list[CheckResult]:
    return check_images(ctx) + check_clusters(ctx) + check_quotas(ctx) if aws_answered else []


CHECKS = BackendChecks(run=_checks, display="EKS", registration_service=None, unreachable_nodes="failed")
