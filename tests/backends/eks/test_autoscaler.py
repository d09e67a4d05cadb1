"""Elastic queues on EKS, offline: the Cluster Autoscaler's pinned renders are the reference's bytes; a spec with an
elastic queue gets the render of its Kubernetes minor, configured for the cluster and placed on the system nodes, an
IAM role for EKS Pod Identity whose policy can change only this cluster's groups, the association, and node groups
that carry the scale-from-zero resource tags; a fixed spec gets none of it. (End to end: test_lifecycle_eks.py.)"""

from __future__ import annotations

import hashlib
import json

import pytest

from fmcluster.backends.eks.nodegroup_resource import _scaling
from fmcluster.backends.eks.nodes import system_nodes
from fmcluster.backends.eks.render import render
from fmcluster.backends.eks.software.manifests import managed_kinds, manifests
from fmcluster.backends.eks.software.releases import CLUSTER_AUTOSCALER, manifest_bytes
from fmcluster.backends.eks.software.validate import manifest_problems
from fmcluster.spec.models import Spec

# Copied by hand from shared/reference/kubernetes-addons/rendered/summary.json ("charts"[].sha256 and "bytes" of the
# three cluster-autoscaler-chart-9.59.0-eks-<minor> sets); `sha256sum` of the reference files gives the same.
SHA256 = {
    "1.34": "00a4bfc41e845dd4b60ea33b231d6824ab28d3585734af1a804306fc3b8ddcc0",
    "1.35": "cef2f02d3dc6c120936a6afbb2adbbfd593cde32d53447175bed750b7c1ca1ce",
    "1.36": "9821e15c2e05aa72943e5c832732908ec586a6cb9025cb9d63038b4f147e9080",
}
SIZE = 9064
# The reference README's table "Cluster Autoscaler releases matching Kubernetes 1.34–1.36" (newest tag per minor).
IMAGES = {"1.34": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.5",
          "1.35": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.2",
          "1.36": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.1"}
DEPLOYMENT = "cluster-autoscaler-aws-cluster-autoscaler"  # the chart's name for release cluster-autoscaler


@pytest.mark.parametrize("minor", sorted(SHA256))
def test_shipped_renders_are_the_references_bytes(minor: str) -> None:
    data = manifest_bytes(CLUSTER_AUTOSCALER[minor])
    assert (len(data), hashlib.sha256(data).hexdigest()) == (SIZE, SHA256[minor])


def _spec(nodes: object, version: str = "1.36") -> Spec:
    return Spec.model_validate({"name": "elastic", "region": "us-east-1", "backend": "eks",
                                "kubernetes": {"scheduler": "kueue", "version": version},
                                "queues": [{"name": "train", "instance_type": "p5.48xlarge", "nodes": nodes}]})


def _elastic(version: str = "1.36") -> Spec:
    return _spec({"min": 0, "max": 4}, version)


@pytest.mark.parametrize("minor", sorted(IMAGES))
def test_an_elastic_queue_gets_the_autoscaler_of_its_minor_on_the_system_nodes(minor: str) -> None:
    spec = _elastic(minor)
    objects = manifests(spec)
    mine = [o for o in objects if o["metadata"].get("labels", {}).get("fmcluster.io/component") == "cluster-autoscaler"]
    # the chart's 8 objects (reference README "What each rendered set contains"), no Namespace: kube-system exists
    assert sorted(o["kind"] for o in mine) == sorted(["PodDisruptionBudget", "ServiceAccount", "ClusterRole",
                                                      "ClusterRoleBinding", "Role", "RoleBinding", "Service",
                                                      "Deployment"])
    assert {(o["apiVersion"], o["kind"]) for o in mine} <= set(managed_kinds())  # destroy finds them by label
    deployment = next(o for o in mine if o["kind"] == "Deployment")
    assert (deployment["metadata"]["namespace"], deployment["metadata"]["name"]) == ("kube-system", DEPLOYMENT)
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == IMAGES[minor]
    assert f"--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/" \
           f"{spec.name}" in container["command"]
    assert {"name": "AWS_REGION", "value": spec.region} in container["env"]
    assert pod["nodeSelector"] == {"fmcluster.io/node-role": "system"}
    assert pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true",
                                   "effect": "NoSchedule"}]
    assert pod["tolerations"][0]["key"] == system_nodes.TAINT_KEY
    assert pod["serviceAccountName"] == DEPLOYMENT
    assert manifest_problems(mine, spec.kubernetes.version) == []


def test_fixed_queues_get_no_autoscaler() -> None:
    spec = _spec(2)
    documents = render(spec).documents
    assert not [d for d in documents if "autoscaler" in d.key]  # no objects, no role, no association
    assert "eks_pod_identity_association" not in {d.kind for d in documents}


def test_its_identity_can_scale_only_this_clusters_groups_and_its_groups_scale_from_zero() -> None:
    spec = _elastic()
    documents = {(d.kind, d.key): d.body for d in render(spec).documents}
    role = documents[("iam_role", "autoscaler")]
    assert role["role"]["RoleName"] == f"{spec.name}-{spec.region}-eks-autoscaler"
    # EKS guide, "Create IAM role with trust policy required by EKS Pod Identity"
    assert json.loads(role["role"]["AssumeRolePolicyDocument"])["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
         "Action": ["sts:AssumeRole", "sts:TagSession"]}]
    statements = json.loads(role["inline_policy"]["PolicyDocument"])["Statement"]
    assert role["managed_policies"] == []
    mutating = [s for s in statements if any(a in ("autoscaling:SetDesiredCapacity",
                                                   "autoscaling:TerminateInstanceInAutoScalingGroup")
                                             for a in _actions(s))]
    assert len(mutating) == 1
    assert mutating[0]["Condition"] == {"StringEquals": {"aws:ResourceTag/eks:cluster-name": spec.name,
                                                         "aws:RequestedRegion": spec.region}}
    describe = next(s for s in statements if "eks:DescribeNodegroup" in _actions(s))
    assert describe["Resource"] == f"arn:aws:eks:{spec.region}:*:nodegroup/{spec.name}/*/*"
    # Every other statement only reads (the autoscaler's AWS README, full-features policy).
    for statement in statements:
        if statement not in (mutating[0], describe):
            assert all(":Describe" in a or ":Get" in a for a in _actions(statement)), statement
    association = documents[("eks_pod_identity_association", "autoscaler")]
    assert (association["namespace"], association["serviceAccount"], association["roleArn"]) == (
        "kube-system", DEPLOYMENT, "${iam_role.autoscaler.arn}")

    group = documents[("eks_nodegroup", "train")]
    assert group["scalingConfig"] == {"minSize": 0, "maxSize": 4, "desiredSize": 0}
    # ../shared/reference/instance-facts.yaml p5.48xlarge: accelerator.count 8, max_efa_interfaces 32
    prefix = "k8s.io/cluster-autoscaler/node-template/resources/"
    assert {k: v for k, v in group["tags"].items() if k.startswith(prefix)} == {
        f"{prefix}nvidia.com/gpu": "8", f"{prefix}vpc.amazonaws.com/efa": "32"}
    # labels the autoscaler reads from DescribeNodegroup: the queue's and its device plugins'
    assert group["labels"] == {"fmcluster.io/queue": "train", "fmcluster.io/nvidia-gpu": "true",
                               "fmcluster.io/efa": "true"}


def _actions(statement: dict) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else action


def test_an_elastic_groups_desired_size_is_the_autoscalers() -> None:
    """fmcluster sends min and max, and keeps the desired size the autoscaler chose, moved into a new range."""
    assert _scaling({"minSize": 0, "maxSize": 4, "desiredSize": 0}, {"scalingConfig.desiredSize": 3}) == {
        "minSize": 0, "maxSize": 4, "desiredSize": 3}
    assert _scaling({"minSize": 0, "maxSize": 2, "desiredSize": 0}, {"scalingConfig.desiredSize": 3}) == {
        "minSize": 0, "maxSize": 2, "desiredSize": 2}
    assert _scaling({"minSize": 2, "maxSize": 2, "desiredSize": 2}, {"scalingConfig.desiredSize": 3}) == {
        "minSize": 2, "maxSize": 2, "desiredSize": 2}


def test_scale_does_not_install_or_remove_the_autoscaler() -> None:
    """Within an elastic queue `scale` sets min and max; turning the only elastic queue fixed (or a fixed one
    elastic) would remove (install) cluster software, which `scale` refuses with the way to do it."""
    from fmcluster.backends.eks import EksBackend
    from fmcluster.errors import UsageError

    backend = EksBackend()
    narrower = _spec({"min": 0, "max": 2})
    assert backend.scaled(_elastic(), narrower) is narrower
    for old, new, fragment in ((_elastic(), _spec(2), "train fixed, the cluster loses the Cluster Autoscaler"),
                               (_spec(2), _elastic(), "train elastic, the cluster gains the Cluster Autoscaler")):
        with pytest.raises(UsageError) as refused:
            backend.scaled(old, new)
        assert fragment in str(refused.value) and "fmcluster create SPEC" in str(refused.value)
