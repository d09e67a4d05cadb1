"""The Cluster Autoscaler's AWS identity: an IAM role that EKS Pod Identity hands to the autoscaler's ServiceAccount,
with the narrowest policy the autoscaler's AWS documentation allows.

The policy follows the autoscaler's AWS README ("Full Cluster Autoscaler Features Policy (Recommended)": permissions
for Auto Scaling group auto-discovery and the instance-type list fetched at run time, identical in the 1.34.5, 1.35.2
and 1.36.1 releases fmcluster ships; reference kubernetes-addons/README.md, "Cluster Autoscaler on EKS"), narrowed
where AWS lets a statement be narrowed:

* the read-only ``autoscaling:Describe*`` and ``ec2:Describe*``/``GetInstanceTypesFromInstanceRequirements`` calls
  take no resource-level permission in AWS (Service Authorization Reference: no resource type for them), so they stay
  on ``*``, as the README has them;
* ``eks:DescribeNodegroup`` (how the autoscaler reads a managed node group's labels, taints and resource tags when it
  has no node, "scale from zero") is limited to this cluster's node groups by their ARN
  (``arn:<partition>:eks:<region>:<account>:nodegroup/<cluster>/<name>/<uuid>``);
* the two calls that change capacity, ``autoscaling:SetDesiredCapacity`` and
  ``autoscaling:TerminateInstanceInAutoScalingGroup``, are limited "using tag based conditionals" (the README's
  advice) to Auto Scaling groups tagged ``eks:cluster-name`` = the cluster's name, the tag EKS puts on every managed
  node group's Auto Scaling group ("Tagging your Amazon EKS resources"), and to the cluster's Region
  (``aws:RequestedRegion``), so a cluster of the same name in another Region is out of reach.

The role trusts ``pods.eks.amazonaws.com`` with ``sts:AssumeRole`` and ``sts:TagSession``, the trust policy the EKS
guide gives for Pod Identity ("Create IAM role with trust policy required by EKS Pod Identity").
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from fmcluster.spec.models import Spec

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
POLICY_NAME = "cluster-autoscaler"
ROLE_PURPOSE = "autoscaler"
READ_ACTIONS = ["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
                "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities",
                "ec2:DescribeImages", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
                "ec2:GetInstanceTypesFromInstanceRequirements"]
SCALE_ACTIONS = ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
# The tag EKS puts on a managed node group's Auto Scaling group and instances ("Tagging your Amazon EKS resources").
CLUSTER_NAME_TAG = "eks:cluster-name"


@functools.cache
def partition(region: str) -> str:
    """The ARN partition of ``region`` (``aws``, ``aws-cn``, ``aws-us-gov`` …), from botocore's partition data."""
    data = json.loads(resources.files("botocore").joinpath("data", "partitions.json").read_text())
    for found in data["partitions"]:
        if region in found["regions"]:
            return found["id"]
    return "aws"


def trust_policy() -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": POD_IDENTITY_SERVICE},
         "Action": ["sts:AssumeRole", "sts:TagSession"]}]}


def permissions_policy(spec: Spec) -> dict[str, Any]:
    nodegroups = f"arn:{partition(spec.region)}:eks:{spec.region}:*:nodegroup/{spec.name}/*/*"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "DiscoverGroupsAndInstanceTypes", "Effect": "Allow", "Action": READ_ACTIONS, "Resource": "*"},
        {"Sid": "ReadThisClustersNodeGroups", "Effect": "Allow", "Action": "eks:DescribeNodegroup",
         "Resource": nodegroups},
        {"Sid": "ScaleThisClustersGroups", "Effect": "Allow", "Action": SCALE_ACTIONS, "Resource": "*",
         "Condition": {"StringEquals": {f"aws:ResourceTag/{CLUSTER_NAME_TAG}": spec.name,
                                        "aws:RequestedRegion": spec.region}}},
    ]}
