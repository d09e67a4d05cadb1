"""The Kubernetes API behind the sandbox's EKS emulator, end to end over the sandbox's HTTPS: the endpoint and
certificate authority DescribeCluster answers, tokens made as ``aws eks get-token`` makes them, access entries
deciding who gets in, and Nodes for the instances a managed node group launched."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

pytest.importorskip("fmcluster_sandbox.eks")  # the EKS emulator ships in the same sandbox; this file tests both

from fixtures.kube import (
    CLUSTER_QUEUE,
    KUEUE_LABELS,
    KUEUE_SERVICE,
    KUEUE_WEBHOOK,
    SYSTEM_LABEL,
    TOLERATE_CRITICAL,
    WEBHOOKS,
    cluster_api,
    conditions,
    daemonset,
    eks_token,
    workload,
)
from fixtures.sandbox_eks import REGION, ZONES, new_cluster, trust

from fmcluster_sandbox.kube import crds


def test_access_entries_and_node_groups_reach_the_kubernetes_api(sandbox):
    eks, ec2, name, node_role, subnets = new_cluster(sandbox, "kube", creator_admin=False)
    cluster = eks.describe_cluster(name=name)["cluster"]
    assert cluster["status"] == "ACTIVE"
    call = cluster_api(sandbox.endpoint_url, cluster, REGION)  # the cluster's own CA verifies its endpoint

    assert call("GET", "/api/v1/nodes")[0] == 401  # the creator was not made admin, and has no access entry yet
    caller = sandbox.client("sts", REGION).get_caller_identity()["Arn"]
    eks.create_access_entry(clusterName=name, principalArn=caller)
    status, body = call("GET", "/api/v1/nodes")  # authenticated now, but no access policy authorizes anything
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"].endswith('cannot list resource "nodes" in API group "" at the cluster scope')
    eks.associate_access_policy(clusterName=name, principalArn=caller,
                                policyArn="arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
                                accessScope={"type": "cluster"})
    status, nodes = call("GET", "/api/v1/nodes")
    assert status == 200 and nodes["items"] == []

    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    template = ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
        "ImageId": image, "InstanceType": "g5.xlarge"})["LaunchTemplate"]
    eks.create_nodegroup(clusterName=name, nodegroupName="gpu", subnets=subnets[:1], nodeRole=node_role,
                         scalingConfig={"minSize": 0, "maxSize": 2, "desiredSize": 2}, labels={"role": "gpu"},
                         launchTemplate={"id": template["LaunchTemplateId"], "version": "1"})
    assert eks.describe_nodegroup(clusterName=name, nodegroupName="gpu")["nodegroup"]["status"] == "ACTIVE"
    status, nodes = call("GET", "/api/v1/nodes?labelSelector=role%3Dgpu")
    assert status == 200 and len(nodes["items"]) == 2
    assert {n["status"]["capacity"]["cpu"] for n in nodes["items"]} == {"4"}
    assert all("nvidia.com/gpu" not in n["status"]["capacity"] for n in nodes["items"])
    plugin = daemonset("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1", {"role": "gpu"})
    assert call("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", plugin)[0] == 201
    nodes = call("GET", "/api/v1/nodes")[1]["items"]
    assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in nodes] == ["1", "1"]


def test_a_view_policy_reads_but_cannot_write_and_a_deleted_clusters_objects_are_gone(sandbox):
    """EKS access policies decide what a principal may do (EKS user guide, "Review access policy
    permissions": AmazonEKSViewPolicy lists and gets, nothing more); a cluster made again under a deleted one's
    name starts with an empty API (its objects went with it)."""
    sandbox.faults({"latency": {"eks.cluster": 0, "eks.nodegroup": 0}})
    eks, ec2, iam = (sandbox.client(s, REGION) for s in ("eks", "ec2", "iam"))
    suffix = uuid.uuid4().hex[:8]
    role = iam.create_role(RoleName=f"kube-view-{suffix}",
                           AssumeRolePolicyDocument=trust("eks.amazonaws.com"))["Role"]["Arn"]
    subnets = [ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                             {"Name": "availability-zone", "Values": [zone]}])["Subnets"][0]["SubnetId"]
               for zone in ZONES]
    name = f"kube-view-{suffix}"
    caller = sandbox.client("sts", REGION).get_caller_identity()["Arn"]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}

    def make(policy: str) -> Any:
        eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets},
                           accessConfig={"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False})
        eks.create_access_entry(clusterName=name, principalArn=caller)
        eks.associate_access_policy(clusterName=name, principalArn=caller, accessScope={"type": "cluster"},
                                    policyArn=f"arn:aws:eks::aws:cluster-access-policy/{policy}")
        api = cluster_api(sandbox.endpoint_url, eks.describe_cluster(name=name)["cluster"], REGION)
        return lambda method, path, body=None: api(method, path, body)[0]

    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"}}
    call = make("AmazonEKSViewPolicy")
    assert call("GET", "/api/v1/namespaces/default/configmaps") == 200
    assert call("POST", "/api/v1/namespaces/default/configmaps", config) == 403
    eks.delete_cluster(name=name)
    assert name not in eks.list_clusters()["clusters"]

    call = make("AmazonEKSClusterAdminPolicy")
    assert call("POST", "/api/v1/namespaces", namespace) == 201
    eks.delete_cluster(name=name)
    call = make("AmazonEKSClusterAdminPolicy")
    assert call("GET", "/api/v1/namespaces/team") == 404  # the deleted cluster's namespace did not survive it
    eks.delete_cluster(name=name)


def test_controllers_become_ready_with_their_node_group_and_webhooks_follow(sandbox):
    """The scheduler's path on a real cluster: a fail-closed webhook refuses queue objects until its controller
    runs; the controller runs once a node group it tolerates and selects exists (EKS guide "Managed node groups":
    node group labels and taints reach the Nodes; "Taints and Tolerations"); scaling that group to 0 takes it
    away again. A Job completes only once it could run."""
    eks, ec2, name, node_role, subnets = new_cluster(sandbox, "ready", creator_admin=True)
    call = cluster_api(sandbox.endpoint_url, eks.describe_cluster(name=name)["cluster"], REGION)
    try:
        assert call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    crds.load("clusterqueues.kueue.x-k8s.io"))[0] == 201
        assert call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "kueue-system"}})[0] == 201
        assert call("POST", WEBHOOKS, KUEUE_WEBHOOK)[0] == 201
        assert call("POST", "/api/v1/namespaces/kueue-system/services", KUEUE_SERVICE)[0] == 201
        deployments = "/apis/apps/v1/namespaces/kueue-system/deployments"
        controller = workload("Deployment", "kueue-controller-manager", KUEUE_LABELS, SYSTEM_LABEL,
                              TOLERATE_CRITICAL)
        assert call("POST", deployments, controller)[0] == 201
        stray = workload("Deployment", "untolerated", {"app": "untolerated"}, SYSTEM_LABEL)
        assert call("POST", deployments, stray)[0] == 201
        jobs = "/apis/batch/v1/namespaces/kueue-system/jobs"
        assert call("POST", jobs, workload("Job", "init", {}, SYSTEM_LABEL, TOLERATE_CRITICAL))[0] == 201

        queues = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
        status, body = call("POST", queues, CLUSTER_QUEUE)
        assert (status, body["reason"]) == (500, "InternalError")
        assert body["message"].endswith('no endpoints available for service "kueue-webhook-service"')
        assert "succeeded" not in call("GET", f"{jobs}/init")[1]["status"]

        eks.create_nodegroup(clusterName=name, nodegroupName="system", subnets=subnets[:1], nodeRole=node_role,
                             instanceTypes=["m5.large"], labels=SYSTEM_LABEL,
                             taints=[{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}],
                             scalingConfig={"minSize": 0, "maxSize": 2, "desiredSize": 1})
        assert eks.describe_nodegroup(clusterName=name, nodegroupName="system")["nodegroup"]["status"] == "ACTIVE"
        ready = call("GET", f"{deployments}/kueue-controller-manager")[1]
        assert ready["status"]["readyReplicas"] == 1 and conditions(ready)["Available"]["status"] == "True"
        assert "readyReplicas" not in call("GET", f"{deployments}/untolerated")[1]["status"]
        assert call("GET", f"{jobs}/init")[1]["status"]["succeeded"] == 1
        assert call("POST", queues, CLUSTER_QUEUE)[0] == 201

        eks.update_nodegroup_config(clusterName=name, nodegroupName="system",
                                    scalingConfig={"minSize": 0, "maxSize": 2, "desiredSize": 0})
        assert call("GET", "/api/v1/nodes")[1]["items"] == []
        gone = call("GET", f"{deployments}/kueue-controller-manager")[1]
        assert "readyReplicas" not in gone["status"] and conditions(gone)["Available"]["status"] == "False"
        status, body = call("PATCH", f"{queues}/gpus", {"spec": {"cohortName": "all"}})
        assert status == 415  # cluster_api sends JSON: the API server wants a patch type
        status, body = call("PUT", f"{queues}/gpus", {**call("GET", f"{queues}/gpus")[1], "spec": {
            **CLUSTER_QUEUE["spec"], "cohortName": "all"}})
        assert (status, body["reason"]) == (500, "InternalError")
    finally:
        for group in eks.list_nodegroups(clusterName=name)["nodegroups"]:
            eks.delete_nodegroup(clusterName=name, nodegroupName=group)
        eks.delete_cluster(name=name)


def test_other_iam_principals_reach_the_api_through_their_access_entries(sandbox):
    """EKS authenticates whoever STS says signed the token (aws-iam-authenticator sends the presigned
    GetCallerIdentity to STS; the answer's ARN is the principal, an assumed-role session as its role) and then
    authorizes that principal through its access entry ("Grant IAM users access to Kubernetes with EKS access
    entries"): a second IAM user's keys and a role's AssumeRole session get in once their entries exist, and
    not before (401 without an entry, as for the creator)."""
    eks, _ec2, name, _node_role, _subnets = new_cluster(sandbox, "kube-iam", creator_admin=True)
    cluster = eks.describe_cluster(name=name)["cluster"]
    iam, sts = sandbox.client("iam", REGION), sandbox.client("sts", REGION)
    suffix = uuid.uuid4().hex[:8]
    user = iam.create_user(UserName=f"dev-{suffix}")["User"]["Arn"]
    keys = iam.create_access_key(UserName=f"dev-{suffix}")["AccessKey"]
    account = sts.get_caller_identity()["Account"]
    trust = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"AWS": f"arn:aws:iam::{account}:root"}}]})
    role = iam.create_role(RoleName=f"ops-{suffix}", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    session = sts.assume_role(RoleArn=role, RoleSessionName="ops")["Credentials"]
    # the user signs for STS in us-east-1 (as the global STS endpoint signs), the cluster is in us-east-2: the
    # endpoint names the cluster, the token only the principal
    user_token = eks_token(sandbox.endpoint_url, name, key=keys["AccessKeyId"], secret=keys["SecretAccessKey"],
                           region="us-east-1")
    role_token = eks_token(sandbox.endpoint_url, name, key=session["AccessKeyId"],
                           secret=session["SecretAccessKey"], session_token=session["SessionToken"], region=REGION)
    as_user = cluster_api(sandbox.endpoint_url, cluster, REGION, token=user_token)
    as_role = cluster_api(sandbox.endpoint_url, cluster, REGION, token=role_token)
    assert as_user("GET", "/api/v1/namespaces/default/configmaps")[0] == 401  # no access entry yet
    assert as_role("GET", "/api/v1/namespaces/default/configmaps")[0] == 401
    for principal in (user, role):  # the role's entry names the role, not its session
        eks.create_access_entry(clusterName=name, principalArn=principal)
        eks.associate_access_policy(clusterName=name, principalArn=principal, accessScope={"type": "cluster"},
                                    policyArn="arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy")
    configmaps = "/api/v1/namespaces/default/configmaps"
    for call in (as_user, as_role):
        assert call("GET", configmaps)[0] == 200
        assert call("POST", configmaps, {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": f"c-{suffix}"}})[0] == 403  # view only
    eks.delete_access_entry(clusterName=name, principalArn=user)
    assert as_user("GET", configmaps)[0] == 401
    assert as_role("GET", configmaps)[0] == 200
    eks.delete_cluster(name=name)
