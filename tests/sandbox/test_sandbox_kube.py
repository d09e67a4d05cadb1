"""The sandbox's Kubernetes API emulator (fmcluster_sandbox.kube), driven over real HTTP with real EKS tokens.

The ``server`` fixture (tests/fixtures/kube.py, registered by this folder's conftest.py) runs a threaded werkzeug
server in this process that routes ``/k8s/<cluster>/...`` to a ``KubeApi`` built with stub callbacks (access entries,
nodes) and everything else to moto (IAM users and their keys). Tokens are made with botocore exactly as ``aws eks
get-token`` makes them (awscli/customizations/eks/get_token.py). One test goes through the sandbox server itself to
prove its routing.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import urllib.error
import urllib.request
from typing import Any

import boto3
import pytest
from fixtures.kube import (
    CLUSTER,
    CLUSTER_QUEUE,
    CRITICAL_TAINT,
    KUEUE_LABELS,
    KUEUE_SERVICE,
    KUEUE_WEBHOOK,
    MOTO_USER,
    REGION,
    SYSTEM_LABEL,
    TOLERATE_CRITICAL,
    WEBHOOKS,
    conditions,
    daemonset,
    eks_token,
    workload,
)

from fmcluster_sandbox import ec2_interfaces
from fmcluster_sandbox.kube import crds, validation


def configmap(name: str, labels: dict[str, str] | None = None, **data: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}, "data": data}


# -- authentication -----------------------------------------------------------------------------------
def test_a_get_token_token_is_accepted(k8s):
    status, body, _ = k8s.call("GET", "/api")
    assert status == 200 and body["kind"] == "APIVersions" and body["versions"] == ["v1"]


def test_an_expired_token_is_refused(server, k8s):
    server["clock"].shift = dt.timedelta(seconds=61)  # get-token presigns with ExpiresIn=60
    status, body, headers = k8s.call("GET", "/api")
    assert (status, body["kind"], body["reason"]) == (401, "Status", "Unauthorized")
    assert "expired" in headers["X-Fmcluster-Sandbox-Auth"]


def test_a_token_for_another_cluster_is_refused(server, k8s):
    other = eks_token(server["url"], "other-cluster")
    status, body, headers = k8s.call("GET", "/api", token=other)
    assert (status, body["reason"]) == (401, "Unauthorized")
    assert "SignatureDoesNotMatch" in headers["X-Fmcluster-Sandbox-Auth"]


def test_tokens_without_the_cluster_header_or_for_another_action_are_refused(server, k8s):
    unsigned = eks_token(server["url"], CLUSTER, sign_cluster_header=False)
    status, _, headers = k8s.call("GET", "/api", token=unsigned)
    assert status == 401 and "x-k8s-aws-id" in headers["X-Fmcluster-Sandbox-Auth"]
    other_action = eks_token(server["url"], CLUSTER, operation="get_session_token")
    status, _, headers = k8s.call("GET", "/api", token=other_action)
    assert status == 401 and "action" in headers["X-Fmcluster-Sandbox-Auth"]
    for bad in ("", "k8s-aws-v1.!!!", "not-a-token"):
        assert k8s.call("GET", "/api", token=bad)[0] == 401
    # only the health endpoints answer anonymous requests
    req = urllib.request.Request(f"{server['url']}/k8s/{CLUSTER}/readyz")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert (resp.status, resp.read()) == (200, b"ok")
    assert k8s.call("GET", "/version", token="")[0] == 401


def test_a_principal_without_an_access_entry_is_refused(server, k8s):
    server["eks"].allowed.discard((CLUSTER, REGION, MOTO_USER))
    try:
        status, body, headers = k8s.call("GET", "/api")
        assert (status, body["reason"]) == (401, "Unauthorized")
        assert MOTO_USER in headers["X-Fmcluster-Sandbox-Auth"]
    finally:
        server["eks"].allowed.add((CLUSTER, REGION, MOTO_USER))


def test_iam_user_keys_are_checked_with_their_secret(server, k8s):
    iam = boto3.client("iam", endpoint_url=server["url"], region_name=REGION, aws_access_key_id="testing",
                       aws_secret_access_key="testing")
    user = iam.create_user(UserName="kube-operator")["User"]
    key = iam.create_access_key(UserName="kube-operator")["AccessKey"]
    token = eks_token(server["url"], CLUSTER, key["AccessKeyId"], key["SecretAccessKey"])
    assert k8s.call("GET", "/api", token=token)[0] == 401  # no access entry for this user yet
    server["eks"].allowed.add((CLUSTER, REGION, user["Arn"]))
    assert k8s.call("GET", "/api", token=token)[0] == 200
    forged = eks_token(server["url"], CLUSTER, key["AccessKeyId"], "not-the-secret")
    assert k8s.call("GET", "/api", token=forged)[0] == 401
    unknown = eks_token(server["url"], CLUSTER, "AKIAUNKNOWNKEY000000", "whatever")
    assert k8s.call("GET", "/api", token=unknown)[0] == 401


def test_assumed_role_sessions_map_to_their_role(server, k8s):
    """aws-iam-authenticator maps arn:aws:sts::A:assumed-role/R/S to the role arn:aws:iam::A:role/R, the ARN an
    access entry names; the session token is part of what STS checks."""
    iam = boto3.client("iam", endpoint_url=server["url"], region_name=REGION, aws_access_key_id="testing",
                       aws_secret_access_key="testing")
    account_root = {"AWS": "arn:aws:iam::123456789012:root"}
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                                 "Principal": account_root}]})
    role = iam.create_role(RoleName="kube-deployer", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    sts = boto3.client("sts", endpoint_url=server["url"], region_name=REGION, aws_access_key_id="testing",
                       aws_secret_access_key="testing")
    creds = sts.assume_role(RoleArn=role, RoleSessionName="fmcluster")["Credentials"]
    token = eks_token(server["url"], CLUSTER, creds["AccessKeyId"], creds["SecretAccessKey"],
                      session_token=creds["SessionToken"])
    server["eks"].allowed.add((CLUSTER, REGION, role))
    assert k8s.call("GET", "/api", token=token)[0] == 200
    stale = eks_token(server["url"], CLUSTER, creds["AccessKeyId"], creds["SecretAccessKey"], session_token="other")
    assert k8s.call("GET", "/api", token=stale)[0] == 401


# -- discovery and CRUD -------------------------------------------------------------------------------
def test_discovery_lists_groups_and_resources(k8s):
    _, core, _ = k8s.call("GET", "/api/v1")
    names = {r["name"]: r for r in core["resources"]}
    assert names["configmaps"]["namespaced"] and not names["nodes"]["namespaced"]
    # patch: labels, annotations and taints only (kube/node_writes.py)
    assert names["nodes"]["verbs"] == ["get", "list", "patch"]
    _, groups, _ = k8s.call("GET", "/apis")
    assert {"apps", "batch", "storage.k8s.io", "node.k8s.io", "rbac.authorization.k8s.io",
            "apiextensions.k8s.io"} <= {g["name"] for g in groups["groups"]}
    _, apps, _ = k8s.call("GET", "/apis/apps/v1")
    assert {"daemonsets", "deployments"} <= {r["name"] for r in apps["resources"]}
    assert k8s.call("GET", "/apis/kueue.x-k8s.io/v1beta2")[0] == 404


def test_create_get_update_patch_delete_a_configmap(k8s):
    base = "/api/v1/namespaces/default/configmaps"
    status, created, _ = k8s.call("POST", base, configmap("settings", {"app": "fm"}, a="1"))
    assert status == 201
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"].endswith("Z")
    assert meta["namespace"] == "default"
    status, body, _ = k8s.call("POST", base, configmap("settings", a="2"))
    assert (status, body["reason"], body["details"]["name"]) == (409, "AlreadyExists", "settings")
    status, got, _ = k8s.call("GET", f"{base}/settings")
    assert status == 200 and got["data"] == {"a": "1"}

    stale = {**got, "data": {"a": "3"}, "metadata": {**got["metadata"], "resourceVersion": "1"}}
    status, body, _ = k8s.call("PUT", f"{base}/settings", stale)
    assert (status, body["reason"]) == (409, "Conflict")
    status, updated, _ = k8s.call("PUT", f"{base}/settings", {**got, "data": {"a": "3"}})
    assert status == 200 and updated["data"] == {"a": "3"}
    assert int(updated["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])
    assert updated["metadata"]["uid"] == meta["uid"]

    status, patched, _ = k8s.call("PATCH", f"{base}/settings", {"data": {"b": "4", "a": None}},
                                  "application/merge-patch+json")
    assert status == 200 and patched["data"] == {"b": "4"}

    k8s.call("POST", base, configmap("other", {"app": "else"}))
    _, listed, _ = k8s.call("GET", f"{base}?labelSelector=app%3Dfm")
    assert listed["kind"] == "ConfigMapList" and [i["metadata"]["name"] for i in listed["items"]] == ["settings"]
    _, listed, _ = k8s.call("GET", f"{base}?labelSelector=app%20notin%20(fm)")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["other"]
    _, first, _ = k8s.call("GET", f"{base}?limit=1")
    assert len(first["items"]) == 1 and first["metadata"]["remainingItemCount"] == 1
    _, second, _ = k8s.call("GET", f"{base}?limit=1&continue={first['metadata']['continue']}")
    assert [first["items"][0]["metadata"]["name"], second["items"][0]["metadata"]["name"]] == ["other", "settings"]
    assert "continue" not in second["metadata"]

    status, gone, _ = k8s.call("DELETE", f"{base}/settings")
    assert status == 200 and gone["status"] == "Success" and gone["details"]["uid"] == meta["uid"]
    status, body, _ = k8s.call("GET", f"{base}/settings")
    assert (status, body["reason"], body["message"]) == (404, "NotFound", 'configmaps "settings" not found')


def test_a_deleted_cluster_forgets_its_objects(server, k8s):
    assert k8s.call("POST", "/api/v1/namespaces/default/configmaps", configmap("kept"))[0] == 201
    server["kube"].forget("other-cluster", REGION)
    assert k8s.call("GET", "/api/v1/namespaces/default/configmaps/kept")[0] == 200
    server["kube"].forget(CLUSTER, REGION)  # EKS deleted the cluster; a new one of that name starts empty
    assert k8s.call("GET", "/api/v1/namespaces/default/configmaps/kept")[0] == 404
    assert k8s.call("GET", "/api/v1/namespaces/default")[0] == 200


def test_namespaced_objects_need_their_namespace(k8s):
    status, body, _ = k8s.call("POST", "/api/v1/namespaces/fm/configmaps", configmap("x"))
    assert (status, body["reason"], body["message"]) == (404, "NotFound", 'namespaces "fm" not found')
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fm"}}
    status, created, _ = k8s.call("POST", "/api/v1/namespaces", ns)
    assert status == 201 and created["status"] == {"phase": "Active"}
    assert k8s.call("POST", "/api/v1/namespaces/fm/configmaps", configmap("x"))[0] == 201
    assert k8s.call("DELETE", "/api/v1/namespaces/fm")[0] == 200
    assert k8s.call("GET", "/api/v1/namespaces/fm/configmaps/x")[0] == 404  # contents go with the namespace
    status, body, _ = k8s.call("DELETE", "/api/v1/namespaces/default")
    assert (status, body["reason"]) == (403, "Forbidden")


def test_cluster_scoped_objects_are_validated(k8s):
    storage_class = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fsx"},
                     "provisioner": "fsx.csi.aws.com", "parameters": {"deploymentType": "PERSISTENT_2"}}
    assert k8s.call("POST", "/apis/storage.k8s.io/v1/storageclasses", storage_class)[0] == 201
    runtime = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}}
    status, body, _ = k8s.call("POST", "/apis/node.k8s.io/v1/runtimeclasses", runtime)
    assert (status, body["reason"]) == (422, "Invalid")  # handler is required
    assert [c["field"] for c in body["details"]["causes"]] == ["handler"]
    assert k8s.call("POST", "/apis/node.k8s.io/v1/runtimeclasses", {**runtime, "handler": "nvidia"})[0] == 201


def test_invalid_objects_are_422(k8s):
    status, body, _ = k8s.call("POST", "/api/v1/namespaces/default/configmaps", configmap("bad", a=1))
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "data.a"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"template": {"spec": {"containers": [{"image": "busybox"}]}}}}
    status, body, _ = k8s.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment)
    assert status == 422
    assert {c["field"] for c in body["details"]["causes"]} == {"spec.selector",
                                                               "spec.template.spec.containers[0].name"}
    status, body, _ = k8s.call("POST", "/api/v1/namespaces/default/configmaps", configmap("Not_A_Name"))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"


def test_unknown_fields_follow_the_field_validation_level(k8s):
    """"Kubernetes API Concepts", "Field validation": levels Ignore, Warn (default) and Strict; a server-side apply
    converts the applied configuration to the typed schema, which fails on an unknown field whatever the level
    (the API server's 500 "failed to create typed patch object", kubernetes/kubernetes #122480, #139253)."""
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets"
    body = daemonset("plugin", "busybox", imagePullPolcy="Always")  # misspelt field
    status, answer, _ = k8s.call("POST", f"{path}?fieldValidation=Strict", body)
    assert (status, answer["reason"]) == (400, "BadRequest")
    assert 'unknown field "spec.template.spec.containers[0].imagePullPolcy"' in answer["message"]
    status, created, headers = k8s.call("POST", path, body)  # no level: Warn
    # RFC 7234 warn-text is a quoted-string: the API server escapes the quotes inside it
    assert status == 201
    assert headers["Warning"] == '299 - "unknown field \\"spec.template.spec.containers[0].imagePullPolcy\\""'
    assert "imagePullPolcy" not in created["spec"]["template"]["spec"]["containers"][0]
    status, _, headers = k8s.call("POST", f"{path}?fieldValidation=Ignore", {**body, "metadata": {"name": "quiet"}})
    assert status == 201 and "Warning" not in headers
    applied = {**body, "metadata": {"name": "applied"}}
    for level in ("", "&fieldValidation=Ignore"):
        status, answer, _ = k8s.call("PATCH", f"{path}/applied?fieldManager=fmcluster{level}", applied,
                                     "application/apply-patch+yaml")
        assert (status, "reason" in answer) == (500, False)
        assert answer["message"] == ("failed to create typed patch object (kube-system/applied; apps/v1, "
                                     "Kind=DaemonSet): .spec.template.spec.containers[0].imagePullPolcy: field not "
                                     "declared in schema")


# -- custom resources ---------------------------------------------------------------------------------
def test_a_cluster_queue_needs_its_crd(k8s):
    path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
    assert k8s.call("POST", path, CLUSTER_QUEUE)[0] == 404
    status, crd, _ = k8s.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                              crds.load("clusterqueues.kueue.x-k8s.io"))
    assert status == 201
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
    _, groups, _ = k8s.call("GET", "/apis")
    kueue = next(g for g in groups["groups"] if g["name"] == "kueue.x-k8s.io")
    assert kueue["preferredVersion"]["version"] == "v1beta2"

    status, created, _ = k8s.call("POST", path, CLUSTER_QUEUE)
    assert status == 201 and created["spec"]["queueingStrategy"] == "BestEffortFIFO"  # the CRD's default
    assert k8s.call("GET", f"{path}/gpus")[1]["metadata"]["uid"] == created["metadata"]["uid"]
    # v1beta1 called it "cohort"; v1beta2 renamed it cohortName, so the old name is unknown here
    unknown = {**CLUSTER_QUEUE, "metadata": {"name": "x"}, "spec": {**CLUSTER_QUEUE["spec"], "cohort": "a"}}
    status, body, _ = k8s.call("POST", f"{path}?fieldValidation=Strict", unknown)
    assert status == 400 and 'unknown field "spec.cohort"' in body["message"]
    wrong = {**CLUSTER_QUEUE, "metadata": {"name": "y"},
             "spec": {**CLUSTER_QUEUE["spec"], "queueingStrategy": "Whatever"}}
    status, body, _ = k8s.call("POST", path, wrong)
    assert (status, body["details"]["causes"][0]["field"]) == (422, "spec.queueingStrategy")

    assert k8s.call("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                    "clusterqueues.kueue.x-k8s.io")[0] == 200
    assert k8s.call("GET", f"{path}/gpus")[0] == 404


def test_namespaced_custom_resources_and_a_misnamed_crd(k8s):
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    misnamed = crds.load("localqueues.kueue.x-k8s.io")
    misnamed["metadata"]["name"] = "queues.example.com"
    status, body, _ = k8s.call("POST", crd_path, misnamed)
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    assert k8s.call("POST", crd_path, crds.load("localqueues.kueue.x-k8s.io"))[0] == 201
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "team"},
             "spec": {"clusterQueue": "gpus"}}
    assert k8s.call("POST", "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues", local)[0] == 201
    _, listed, _ = k8s.call("GET", "/apis/kueue.x-k8s.io/v1beta2/localqueues")
    assert [i["metadata"]["namespace"] for i in listed["items"]] == ["default"]
    assert k8s.call("POST", "/apis/kueue.x-k8s.io/v1beta2/localqueues", local)[0] == 404  # namespaced only


# -- nodes ---------------------------------------------------------------------------------------------
def p5_node(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "instance_type": "p5.48xlarge", "instance_id": "i-0123456789abcdef0",
            "nodegroup": "gpu", "labels": {"eks.amazonaws.com/nodegroup": "gpu", "accelerator": "h100"},
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}], **extra}


def test_nodes_show_capacity_from_the_instance_catalog(server, k8s):
    server["eks"].instances[CLUSTER] = [p5_node("ip-10-0-0-1.ec2.internal")]
    _, nodes, _ = k8s.call("GET", "/api/v1/nodes")
    (node,) = nodes["items"]
    capacity = node["status"]["capacity"]
    assert capacity["cpu"] == "192" and capacity["memory"] == f"{2097152 * 1024}Ki" and capacity["pods"] == "250"
    assert "nvidia.com/gpu" not in capacity
    assert node["metadata"]["labels"]["kubernetes.io/arch"] == "amd64"
    # what the emulator makes is itself a valid Node (typed list items carry no kind/apiVersion)
    validation.check_builtin({"apiVersion": "v1", "kind": "Node", **node}, "1.33", "Strict")
    assert node["spec"]["taints"][0]["key"] == "nvidia.com/gpu"
    assert k8s.call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})[0] == 405
    _, none, _ = k8s.call("GET", "/api/v1/nodes?labelSelector=accelerator%3Da100")
    assert none["items"] == []


def test_gpu_and_efa_capacity_appear_with_matching_device_plugins(server, k8s):
    server["eks"].instances[CLUSTER] = [p5_node("ip-10-0-0-1.ec2.internal", efa_interfaces=32)]
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets"
    plugin = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
    tolerate = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]

    def capacity() -> dict[str, str]:
        return k8s.call("GET", "/api/v1/nodes/ip-10-0-0-1.ec2.internal")[1]["status"]["capacity"]

    assert k8s.call("POST", path, daemonset("elsewhere", plugin, {"accelerator": "a100"}, tolerate))[0] == 201
    assert "nvidia.com/gpu" not in capacity()  # its nodeSelector matches no node
    assert k8s.call("POST", path, daemonset("untolerated", plugin, {"accelerator": "h100"}))[0] == 201
    assert "nvidia.com/gpu" not in capacity()  # the node's NoSchedule taint keeps it off
    device_plugin = daemonset("nvidia-device-plugin", plugin, {"accelerator": "h100"}, tolerate)
    assert k8s.call("POST", path, device_plugin)[0] == 201
    assert capacity()["nvidia.com/gpu"] == "8"
    assert "vpc.amazonaws.com/efa" not in capacity()
    efa = "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.6"
    assert k8s.call("POST", path, daemonset("efa", efa, tolerations=tolerate))[0] == 201
    node = k8s.call("GET", "/api/v1/nodes/ip-10-0-0-1.ec2.internal")[1]
    assert node["status"]["capacity"]["vpc.amazonaws.com/efa"] == "32"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert k8s.call("DELETE", f"{path}/nvidia-device-plugin")[0] == 200
    assert "nvidia.com/gpu" not in capacity()


def test_the_sandbox_server_routes_cluster_endpoints(sandbox):
    """Through the real sandbox: no token is 401; a valid token for a cluster nobody granted is 401 too."""
    import ssl

    for token in (None, eks_token(sandbox.endpoint_url, "no-such-cluster")):
        req = urllib.request.Request(f"{sandbox.endpoint_url}/k8s/no-such-cluster/api",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
        ctx = ssl.create_default_context(cafile=sandbox.ca_bundle) if sandbox.ca_bundle else None
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=30, context=ctx)
        body = json.loads(caught.value.read())
        assert (caught.value.code, body["kind"], body["reason"]) == (401, "Status", "Unauthorized")


def test_efa_devices_are_the_interfaces_ec2_attached(server, k8s):
    """Without a count from the EKS side, the EFA plugin reports the EFA interfaces moto's EC2 attached."""
    ec2_interfaces.install()
    ec2 = boto3.client("ec2", endpoint_url=server["url"], region_name=REGION, aws_access_key_id="testing",
                       aws_secret_access_key="testing")
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    interfaces = [{"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "SubnetId": subnet,
                   "InterfaceType": "interface" if card == 0 else "efa-only"} for card in range(4)]
    instance = ec2.run_instances(ImageId="ami-12c6146b", InstanceType="p5.48xlarge", MinCount=1, MaxCount=1,
                                 NetworkInterfaces=interfaces)["Instances"][0]
    server["eks"].instances[CLUSTER] = [p5_node("ip-10-0-0-2.ec2.internal", instance_id=instance["InstanceId"],
                                                taints=[])]
    efa = "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.6"
    assert k8s.call("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", daemonset("efa", efa))[0] == 201
    node = k8s.call("GET", "/api/v1/nodes/ip-10-0-0-2.ec2.internal")[1]
    assert node["status"]["capacity"]["vpc.amazonaws.com/efa"] == "3"
    # one network card, one EFA interface: g5.48xlarge ("Supported instance types" of the EFA page lists it)
    single = ec2.run_instances(ImageId="ami-12c6146b", InstanceType="g5.48xlarge", MinCount=1, MaxCount=1,
                               NetworkInterfaces=[{"NetworkCardIndex": 0, "DeviceIndex": 0, "SubnetId": subnet,
                                                   "InterfaceType": "efa"}])["Instances"][0]
    described = ec2.describe_instances(InstanceIds=[single["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert [n["InterfaceType"] for n in described["NetworkInterfaces"]] == ["efa"]
    server["eks"].instances[CLUSTER] = [p5_node("ip-10-0-0-3.ec2.internal", instance_id=single["InstanceId"],
                                                taints=[])]
    node = k8s.call("GET", "/api/v1/nodes/ip-10-0-0-3.ec2.internal")[1]
    assert node["status"]["capacity"]["vpc.amazonaws.com/efa"] == "1"


def test_efa_nodes_report_the_efa_installers_huge_pages(server, k8s):
    """A node with EFA attached has the 2 MiB pages the EFA installer's efa-config reserves at boot (110 per vCPU and
    one more: bottlerocket-os/bottlerocket-core-kit#141 quotes its script), as capacity and allocatable, and the
    kubelet takes them out of allocatable memory; a node without EFA has none."""
    server["eks"].instances[CLUSTER] = [p5_node("ip-10-0-0-4.ec2.internal", efa_interfaces=32, taints=[]),
                                        {"name": "ip-10-0-0-5.ec2.internal", "instance_type": "m7i.xlarge",
                                         "instance_id": "i-0fedcba9876543210", "nodegroup": "system", "labels": {}}]
    nodes = {n["metadata"]["name"]: n for n in k8s.call("GET", "/api/v1/nodes")[1]["items"]}
    p5 = nodes["ip-10-0-0-4.ec2.internal"]["status"]
    # p5.48xlarge: 192 vCPUs, 2,048 GiB (EC2 user guide, "Amazon EC2 P5 instances"); 250 pods (managed node groups'
    # cap); kube-reserved memory 11 MiB × 250 + 255 MiB, eviction threshold 100 MiB; pages (110 × 192 + 1) × 2 MiB
    assert p5["capacity"]["hugepages-2Mi"] == p5["allocatable"]["hugepages-2Mi"] == "42242Mi"
    assert p5["allocatable"]["memory"] == f"{(2048 * 1024 - (11 * 250 + 255) - 100 - 42242) * 1024}Ki"
    assert p5["capacity"]["memory"] == f"{2048 * 1024 * 1024}Ki"  # capacity keeps the pages
    validation.check_builtin({"apiVersion": "v1", "kind": "Node", **nodes["ip-10-0-0-4.ec2.internal"]}, "1.33",
                             "Strict")
    system = nodes["ip-10-0-0-5.ec2.internal"]["status"]
    assert not any(name.startswith("hugepages-") for name in (*system["capacity"], *system["allocatable"]))


def test_apply_json_patch_status_and_generation(k8s):
    path = "/apis/apps/v1/namespaces/default/deployments"
    manifest = ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n"
                "  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n"
                "    spec:\n      containers:\n      - {name: web, image: nginx}\n")
    status, body, _ = k8s.call("PATCH", f"{path}/web", manifest.encode(), "application/apply-patch+yaml")
    assert (status, body["reason"]) == (422, "Invalid")  # server-side apply needs a fieldManager (PatchOptions)
    status, created, _ = k8s.call("PATCH", f"{path}/web?fieldManager=fmcluster", manifest.encode(),
                                  "application/apply-patch+yaml")
    assert status == 201 and created["metadata"]["generation"] == 1 and "status" not in created
    status, scaled, _ = k8s.call("PATCH", f"{path}/web", [{"op": "replace", "path": "/spec/replicas", "value": 3}],
                                 "application/json-patch+json")
    assert status == 200 and scaled["spec"]["replicas"] == 3 and scaled["metadata"]["generation"] == 2
    # status is a subresource: the main resource ignores it, /status takes it and leaves the spec alone
    ignored = k8s.call("PATCH", f"{path}/web", {"status": {"replicas": 3}}, "application/merge-patch+json")[1]
    assert "status" not in ignored and ignored["metadata"]["generation"] == 2
    reported = k8s.call("PATCH", f"{path}/web/status", {"status": {"replicas": 3}, "spec": {"replicas": 9}},
                        "application/merge-patch+json")[1]
    assert reported["status"] == {"replicas": 3} and reported["spec"]["replicas"] == 3
    assert k8s.call("POST", "/api/v1/namespaces/default/configmaps", configmap("x"))[0] == 201
    assert k8s.call("GET", "/api/v1/namespaces/default/configmaps/x")[0] == 200
    assert k8s.call("GET", "/api/v1/namespaces/default/configmaps/x/status")[0] == 404  # ConfigMaps have none
    assert k8s.call("GET", f"{path}/web/status")[0] == 200
    status, _, _ = k8s.call("POST", f"{path}?dryRun=All", {**created, "metadata": {"name": "dry"}})
    assert status == 201 and k8s.call("GET", f"{path}/dry")[0] == 404


def test_immutable_fields_and_secret_string_data(k8s):
    sc_path = "/apis/storage.k8s.io/v1/storageclasses"
    storage_class = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fsx"},
                     "provisioner": "fsx.csi.aws.com", "parameters": {"deploymentType": "PERSISTENT_2"}}
    assert k8s.call("POST", sc_path, storage_class)[0] == 201
    status, body, _ = k8s.call("PATCH", f"{sc_path}/fsx", {"parameters": {"deploymentType": "SCRATCH_2"}},
                               "application/merge-patch+json")
    assert (status, body["details"]["causes"][0]["field"]) == (422, "parameters")
    assert k8s.call("PATCH", f"{sc_path}/fsx", {"metadata": {"labels": {"a": "b"}}},
                    "application/merge-patch+json")[0] == 200  # metadata stays mutable

    ds_path = "/apis/apps/v1/namespaces/kube-system/daemonsets"
    assert k8s.call("POST", ds_path, daemonset("agent", "busybox"))[0] == 201
    relabelled = {"spec": {"selector": {"matchLabels": {"x": "y"}}, "template": {"metadata": {"labels": {"x": "y"}}}}}
    status, body, _ = k8s.call("PATCH", f"{ds_path}/agent", relabelled, "application/merge-patch+json")
    assert (status, [c["field"] for c in body["details"]["causes"]]) == (422, ["spec.selector"])

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "stringData": {"key": "hello"}}
    status, created, _ = k8s.call("POST", "/api/v1/namespaces/default/secrets", secret)
    assert status == 201 and created["data"] == {"key": "aGVsbG8="} and "stringData" not in created
    not_base64 = {**secret, "metadata": {"name": "raw"}, "stringData": None, "data": {"key": "hello!"}}
    assert k8s.call("POST", "/api/v1/namespaces/default/secrets", not_base64)[0] == 400


def test_schemas_follow_the_cluster_kubernetes_version(server, k8s):
    """Job.spec.managedBy exists from Kubernetes 1.30: a 1.29 cluster does not know the field."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
           "spec": {"managedBy": "kueue.x-k8s.io/multikueue", "template": {"spec": {
               "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}}
    kube = server["kube"]
    try:
        kube.cluster_version = lambda cluster, region: "1.29"
        assert k8s.call("GET", "/version")[1]["minor"] == "29"
        status, body, _ = k8s.call("POST", "/apis/batch/v1/namespaces/default/jobs?fieldValidation=Strict", job)
        assert status == 400 and 'unknown field "spec.managedBy"' in body["message"]
        kube.cluster_version = lambda cluster, region: "1.33"
        assert k8s.call("POST", "/apis/batch/v1/namespaces/default/jobs", job)[0] == 201
    finally:
        kube.cluster_version = lambda cluster, region: None


def test_dra_kinds_follow_the_cluster_kubernetes_version(server, k8s):
    """resource.k8s.io ("Dynamic Resource Allocation"; the Kubernetes 1.33 and 1.34 release notes): v1beta1 and
    v1beta2 on 1.33, where EKS turns DRA on ("Use P6e-GB200 UltraServers with Amazon EKS": 1.33 and above), v1 (GA)
    from 1.34; none on 1.32, whose beta API upstream leaves off."""
    def device_class(version: str, name: str) -> dict[str, Any]:
        return {"apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceClass", "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}

    def served() -> list[str]:
        groups = k8s.call("GET", "/apis")[1]["groups"]
        return [v["version"] for g in groups if g["name"] == "resource.k8s.io" for v in g["versions"]]

    kube = server["kube"]
    try:
        kube.cluster_version = lambda cluster, region: "1.32"
        assert served() == []
        assert k8s.call("POST", "/apis/resource.k8s.io/v1beta1/deviceclasses", device_class("v1beta1", "a"))[0] == 404
        kube.cluster_version = lambda cluster, region: "1.33"
        assert served() == ["v1beta2", "v1beta1"]
        assert k8s.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class("v1", "b"))[0] == 404
        assert k8s.call("POST", "/apis/resource.k8s.io/v1beta2/deviceclasses", device_class("v1beta2", "c"))[0] == 201
        kube.cluster_version = lambda cluster, region: "1.34"
        assert served() == ["v1", "v1beta2", "v1beta1"]
        assert k8s.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class("v1", "d"))[0] == 201
        names = [r["name"] for r in k8s.call("GET", "/apis/resource.k8s.io/v1")[1]["resources"]]
        assert {"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"} <= set(names)
        template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "ch"},
                    "spec": {"spec": {"devices": {"requests": [{"name": "channel", "exactly": {
                        "deviceClassName": "d"}}]}}}}
        assert k8s.call("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
                        template)[0] == 201
    finally:
        kube.cluster_version = lambda cluster, region: None


def test_neuron_devices_and_arm64_nodes(server, k8s):
    server["eks"].instances[CLUSTER] = [
        {"name": "ip-10-0-1-1.ec2.internal", "instance_type": "trn1.32xlarge", "instance_id": "i-0aaaaaaaaaaaaaaa1",
         "nodegroup": "trn", "labels": {}, "taints": [{"key": "aws.amazon.com/neuron", "effect": "NoSchedule"}]},
        {"name": "ip-10-0-1-2.ec2.internal", "instance_type": "p6e-gb200.36xlarge",
         "instance_id": "i-0aaaaaaaaaaaaaaa2", "nodegroup": "gb200", "labels": {}, "taints": []},
    ]
    neuron = daemonset("neuron-device-plugin", "public.ecr.aws/neuron/neuron-device-plugin:2.22.4.0",
                       tolerations=[{"key": "aws.amazon.com/neuron", "operator": "Exists"}])
    assert k8s.call("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", neuron)[0] == 201
    nodes = {n["metadata"]["name"]: n for n in k8s.call("GET", "/api/v1/nodes")[1]["items"]}
    trn = nodes["ip-10-0-1-1.ec2.internal"]["status"]["capacity"]
    assert (trn["aws.amazon.com/neuron"], trn["aws.amazon.com/neuroncore"]) == ("16", "32")
    gb200 = nodes["ip-10-0-1-2.ec2.internal"]
    assert gb200["metadata"]["labels"]["kubernetes.io/arch"] == "arm64"
    assert "aws.amazon.com/neuron" not in gb200["status"]["capacity"]  # the plugin finds no Neuron devices there


def test_server_defaults_and_workload_rules(k8s):
    """What a client reads back carries the API server's defaults; controllers' own rules refuse bad workloads."""
    created = k8s.call("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets",
                       daemonset("nvidia", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"))[1]
    assert created["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                                 "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    pod = created["spec"]["template"]["spec"]
    assert (pod["restartPolicy"], pod["dnsPolicy"], pod["terminationGracePeriodSeconds"]) == \
        ("Always", "ClusterFirst", 30)
    assert pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    storage_class = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fsx"},
                     "provisioner": "fsx.csi.aws.com"}
    created = k8s.call("POST", "/apis/storage.k8s.io/v1/storageclasses", storage_class)[1]
    assert (created["reclaimPolicy"], created["volumeBindingMode"]) == ("Delete", "Immediate")

    mismatched = daemonset("mismatch", "busybox")
    mismatched["spec"]["template"]["metadata"]["labels"] = {"name": "other"}
    status, body, _ = k8s.call("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", mismatched)
    assert (status, body["details"]["causes"][0]["field"]) == (422, "spec.template.metadata.labels")

    jobs = "/apis/batch/v1/namespaces/default/jobs"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "nccl"},
           "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nccl-tests:latest"}]}}}}
    status, body, _ = k8s.call("POST", jobs, job)  # restartPolicy defaults to Always, which a Job cannot use
    assert (status, body["details"]["causes"][0]["field"]) == (422, "spec.template.spec.restartPolicy")
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    status, created, _ = k8s.call("POST", jobs, job)
    uid = created["metadata"]["uid"]
    assert status == 201 and created["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert created["spec"]["template"]["metadata"]["labels"]["job-name"] == "nccl"
    assert (created["spec"]["backoffLimit"], created["spec"]["completions"]) == (6, 1)
    assert created["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"  # :latest
    own = {**job, "metadata": {"name": "own"}, "spec": {**job["spec"], "selector": {"matchLabels": {"a": "b"}}}}
    status, body, _ = k8s.call("POST", jobs, own)
    assert status == 422 and "spec.selector" in {c["field"] for c in body["details"]["causes"]}


def test_access_policies_decide_what_a_principal_may_do(server, k8s):
    """EKS access policies: View reads namespaced objects but not Secrets; a namespace-scoped Edit writes only in its
    namespaces; nothing but ClusterAdmin writes cluster-scoped objects such as CRDs; discovery stays open."""
    policy = "arn:aws:eks::aws:cluster-access-policy/"
    server["eks"].policies[MOTO_USER] = [
        {"policyArn": policy + "AmazonEKSViewPolicy", "accessScope": {"type": "cluster"}},
        {"policyArn": policy + "AmazonEKSEditPolicy", "accessScope": {"type": "namespace", "namespaces": ["team-*"]}},
    ]
    assert k8s.call("GET", "/apis")[0] == 200
    assert k8s.call("GET", "/api/v1/namespaces/default/configmaps")[0] == 200
    status, body, _ = k8s.call("GET", "/api/v1/namespaces/default/secrets")
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (f'secrets is forbidden: User "{MOTO_USER}" cannot list resource "secrets" in API '
                               'group "" in the namespace "default"')
    assert k8s.call("POST", "/api/v1/namespaces/default/configmaps", configmap("x"))[0] == 403
    server["eks"].policies[MOTO_USER].append(
        {"policyArn": policy + "AmazonEKSClusterAdminPolicy", "accessScope": {"type": "cluster"}})
    assert k8s.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": "team-a"}})[0] == 201
    server["eks"].policies[MOTO_USER].pop()
    assert k8s.call("POST", "/api/v1/namespaces/team-a/configmaps", configmap("x"))[0] == 201
    status, body, _ = k8s.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                               crds.load("queues.scheduling.volcano.sh"))
    assert status == 403 and "at the cluster scope" in body["message"]
    assert k8s.call("GET", "/api/v1/nodes")[0] == 403  # View is namespaced: no Nodes


def test_crd_cel_rules_are_evaluated(k8s):
    """Kueue's ClusterQueue rule: every flavor lists as many resources as the group covers; LocalQueue's
    clusterQueue is immutable (a transition rule, checked on update only)."""
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for name in ("clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io"):
        assert k8s.call("POST", crd_path, crds.load(name))[0] == 201
    short = copy.deepcopy(CLUSTER_QUEUE)
    short["spec"]["resourceGroups"][0]["coveredResources"] = ["nvidia.com/gpu", "vpc.amazonaws.com/efa"]
    status, body, _ = k8s.call("POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", short)
    assert status == 422
    (cause,) = body["details"]["causes"]
    assert cause["field"] == "spec.resourceGroups[0]"
    assert "flavors must have the same number of resources as the coveredResources" in cause["message"]
    assert k8s.call("POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", CLUSTER_QUEUE)[0] == 201

    path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues"
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "team"},
             "spec": {"clusterQueue": "gpus"}}
    assert k8s.call("POST", path, local)[0] == 201
    status, body, _ = k8s.call("PATCH", f"{path}/team", {"spec": {"clusterQueue": "other"}},
                               "application/merge-patch+json")
    assert (status, body["details"]["causes"][0]["field"]) == (422, "spec.clusterQueue")
    assert "field is immutable" in body["details"]["causes"][0]["message"]


def test_volcano_and_kai_queues_follow_their_crds(k8s):
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for name in ("queues.scheduling.volcano.sh", "queues.scheduling.run.ai"):
        assert k8s.call("POST", crd_path, crds.load(name))[0] == 201
    volcano = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "training"},
               "spec": {"weight": 1, "capability": {"nvidia.com/gpu": 16, "vpc.amazonaws.com/efa": 64}}}
    status, created, _ = k8s.call("POST", "/apis/scheduling.volcano.sh/v1beta1/queues", volcano)
    assert status == 201 and created["spec"]["dequeueStrategy"] == "traverse"  # the CRD's default
    kai = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "training"},
           "spec": {"resources": {"gpu": {"quota": 16, "limit": -1, "overQuotaWeight": 1},
                                  "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                                  "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}}}
    assert k8s.call("POST", "/apis/scheduling.run.ai/v2/queues", kai)[0] == 201
    # the two Queue kinds live apart: same kind and name, different groups
    assert k8s.call("GET", "/apis/scheduling.volcano.sh/v1beta1/queues/training")[1]["spec"]["weight"] == 1
    efa = copy.deepcopy(kai)
    efa["metadata"]["name"] = "efa"
    efa["spec"]["resources"]["efa"] = {"quota": 64}  # KAI queues know only cpu, gpu and memory
    status, body, _ = k8s.call("POST", "/apis/scheduling.run.ai/v2/queues?fieldValidation=Strict", efa)
    assert status == 400 and 'unknown field "spec.resources.efa"' in body["message"]


# -- controllers' status: workloads are ready only where they could run -----------------------------------
def m5_node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
            instance_type: str = "m5.large") -> dict[str, Any]:
    return {"name": name, "instance_type": instance_type, "instance_id": "i-0123456789abcdef1", "nodegroup": "system",
            "labels": labels or {}, "taints": taints or []}


def test_a_deployment_is_available_only_while_a_ready_node_could_run_it(server, k8s):
    """apps/v1 DeploymentStatus ("Deployments", "Deployment status"): readyReplicas/availableReplicas and condition
    Available follow where the pod template could be scheduled ("Assigning Pods to Nodes": nodeSelector; "Taints
    and Tolerations": NoSchedule; "Resource Management for Pods and Containers": requests vs allocatable)."""
    path = "/apis/apps/v1/namespaces/kube-system/deployments"
    labels = {"app": "kueue"}
    pinned = workload("Deployment", "kueue", labels, SYSTEM_LABEL)
    assert k8s.call("POST", path, pinned)[0] == 201
    got = k8s.call("GET", f"{path}/kueue")[1]
    # no node at all: one Pending replica; maxUnavailable 25% of 1 rounds down to 0, so minimum availability is 1
    assert got["status"]["replicas"] == 1 and got["status"]["unavailableReplicas"] == 1
    assert "readyReplicas" not in got["status"] and "availableReplicas" not in got["status"]
    assert (conditions(got)["Available"]["status"], conditions(got)["Available"]["reason"]) == \
        ("False", "MinimumReplicasUnavailable")
    assert got["status"]["observedGeneration"] == 1

    server["eks"].instances[CLUSTER] = [m5_node("ip-10-0-0-9.ec2.internal", taints=[CRITICAL_TAINT])]
    assert "readyReplicas" not in k8s.call("GET", f"{path}/kueue")[1]["status"]  # nodeSelector matches no node
    server["eks"].instances[CLUSTER] = [m5_node("ip-10-0-0-9.ec2.internal", SYSTEM_LABEL, [CRITICAL_TAINT])]
    got = k8s.call("GET", f"{path}/kueue")[1]
    assert "readyReplicas" not in got["status"]  # the NoSchedule taint keeps it off: no toleration
    before = conditions(got)["Available"]["lastTransitionTime"]

    status, patched, _ = k8s.call("PATCH", f"{path}/kueue", {"spec": {"template": {"spec": {
        "tolerations": TOLERATE_CRITICAL}}}}, "application/merge-patch+json")
    assert status == 200
    got = k8s.call("GET", f"{path}/kueue")[1]
    assert (got["status"]["readyReplicas"], got["status"]["availableReplicas"], got["status"]["updatedReplicas"]) == \
        (1, 1, 1)
    assert "unavailableReplicas" not in got["status"] and got["status"]["observedGeneration"] == 2
    available = conditions(got)["Available"]
    assert (available["status"], available["reason"], available["message"]) == \
        ("True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
    assert conditions(got)["Progressing"]["reason"] == "NewReplicaSetAvailable"
    assert available["lastTransitionTime"] >= before
    listed = k8s.call("GET", "/apis/apps/v1/deployments")[1]["items"]
    assert [d["status"]["readyReplicas"] for d in listed] == [1]

    # requests beyond the node's allocatable: an m5.large has 2 vCPUs
    hungry = workload("Deployment", "hungry", {"app": "hungry"}, SYSTEM_LABEL, TOLERATE_CRITICAL,
                      requests={"cpu": "4"})
    assert k8s.call("POST", path, hungry)[0] == 201
    assert "readyReplicas" not in k8s.call("GET", f"{path}/hungry")[1]["status"]
    gpu = workload("Deployment", "gpu", {"app": "gpu"}, tolerations=TOLERATE_CRITICAL,
                   requests={"nvidia.com/gpu": "1"})  # no device plugin advertises GPUs here
    assert k8s.call("POST", path, gpu)[0] == 201
    assert "readyReplicas" not in k8s.call("GET", f"{path}/gpu")[1]["status"]
    # required node affinity is the nodeSelector's richer form
    affinity = workload("Deployment", "affine", {"app": "affine"}, tolerations=TOLERATE_CRITICAL)
    affinity["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuring"
                                                                         "Execution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "fmcluster.io/node-role", "operator": "In", "values": ["system"]}]}]}}}
    assert k8s.call("POST", path, affinity)[0] == 201
    assert k8s.call("GET", f"{path}/affine")[1]["status"]["readyReplicas"] == 1

    server["eks"].instances[CLUSTER] = []  # the node group scaled to 0
    got = k8s.call("GET", f"{path}/kueue")[1]
    assert "readyReplicas" not in got["status"] and conditions(got)["Available"]["status"] == "False"


def test_statefulsets_and_daemonsets_report_what_their_controllers_would(server, k8s):
    """StatefulSet: OrderedReady creates pod N+1 only once pod N is Ready ("StatefulSets", "Pod Management
    Policies"); DaemonSet: desiredNumberScheduled counts the nodes it may run on, numberReady those where it runs
    ("DaemonSet"; DaemonSetStatus)."""
    server["eks"].instances[CLUSTER] = [m5_node("ip-10-0-0-9.ec2.internal", SYSTEM_LABEL, [CRITICAL_TAINT]),
                                        m5_node("ip-10-0-0-10.ec2.internal", {"role": "gpu"})]
    sts_path = "/apis/apps/v1/namespaces/default/statefulsets"
    ordered = workload("StatefulSet", "db", {"app": "db"}, SYSTEM_LABEL, replicas=3)  # no toleration
    status, created, _ = k8s.call("POST", sts_path, ordered)
    assert status == 201 and created["spec"]["podManagementPolicy"] == "OrderedReady"
    got = k8s.call("GET", f"{sts_path}/db")[1]["status"]
    assert (got["replicas"], got.get("readyReplicas", 0), got["availableReplicas"]) == (1, 0, 0)
    parallel = workload("StatefulSet", "cache", {"app": "cache"}, SYSTEM_LABEL, replicas=3,
                        podManagementPolicy="Parallel")
    assert k8s.call("POST", sts_path, parallel)[0] == 201
    assert k8s.call("GET", f"{sts_path}/cache")[1]["status"]["replicas"] == 3
    tolerant = workload("StatefulSet", "ok", {"app": "ok"}, SYSTEM_LABEL, TOLERATE_CRITICAL, replicas=2)
    assert k8s.call("POST", sts_path, tolerant)[0] == 201
    got = k8s.call("GET", f"{sts_path}/ok")[1]["status"]
    assert (got["replicas"], got["readyReplicas"], got["availableReplicas"]) == (2, 2, 2)

    ds_path = "/apis/apps/v1/namespaces/kube-system/daemonsets"
    assert k8s.call("POST", ds_path, workload("DaemonSet", "agent", {"app": "agent"}))[0] == 201
    got = k8s.call("GET", f"{ds_path}/agent")[1]["status"]
    assert (got["desiredNumberScheduled"], got["numberReady"]) == (1, 1)  # the tainted node is not for it
    everywhere = workload("DaemonSet", "everywhere", {"app": "everywhere"}, tolerations=[{"operator": "Exists"}],
                          requests={"cpu": "1500m"})
    assert k8s.call("POST", ds_path, everywhere)[0] == 201
    got = k8s.call("GET", f"{ds_path}/everywhere")[1]["status"]
    assert (got["desiredNumberScheduled"], got["numberReady"]) == (2, 2)
    too_big = workload("DaemonSet", "big", {"app": "big"}, tolerations=[{"operator": "Exists"}],
                       requests={"memory": "64Gi"})
    assert k8s.call("POST", ds_path, too_big)[0] == 201
    got = k8s.call("GET", f"{ds_path}/big")[1]["status"]
    assert (got["desiredNumberScheduled"], got["numberReady"], got["numberUnavailable"]) == (2, 0, 2)


def test_a_job_completes_only_where_it_could_have_run(server, k8s):
    """batch/v1 JobStatus ("Jobs"): a Job whose pods cannot be placed stays active; once they can, the sandbox
    (which runs no containers) takes it to succeed: succeeded, completionTime, conditions SuccessCriteriaMet and
    Complete (Kubernetes 1.31+, "Job termination and cleanup"); a completed Job stays completed."""
    path = "/apis/batch/v1/namespaces/default/jobs"
    init = workload("Job", "admission-init", {}, SYSTEM_LABEL, TOLERATE_CRITICAL)
    assert k8s.call("POST", path, init)[0] == 201
    got = k8s.call("GET", f"{path}/admission-init")[1]["status"]
    assert (got["active"], got["ready"], "succeeded" in got, "completionTime" in got) == (1, 0, False, False)
    assert "conditions" not in got and got["startTime"].endswith("Z")
    server["eks"].instances[CLUSTER] = [m5_node("ip-10-0-0-9.ec2.internal", SYSTEM_LABEL, [CRITICAL_TAINT])]
    got = k8s.call("GET", f"{path}/admission-init")[1]["status"]
    assert (got["succeeded"], "active" in got) == (1, False) and got["completionTime"] >= got["startTime"]
    assert [(c["type"], c["status"], c["reason"]) for c in got["conditions"]] == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"), ("Complete", "True", "CompletionsReached")]
    server["eks"].instances[CLUSTER] = []
    assert k8s.call("GET", f"{path}/admission-init")[1]["status"] == got  # done is done

    suspended = workload("Job", "held", {}, SYSTEM_LABEL, TOLERATE_CRITICAL, suspend=True)
    assert k8s.call("POST", path, suspended)[0] == 201
    server["eks"].instances[CLUSTER] = [m5_node("ip-10-0-0-9.ec2.internal", SYSTEM_LABEL, [CRITICAL_TAINT])]
    got = k8s.call("GET", f"{path}/held")[1]["status"]
    assert "succeeded" not in got and conditions({"status": got})["Suspended"]["status"] == "True"
    untolerated = workload("Job", "untolerated", {}, SYSTEM_LABEL, completions=4, parallelism=2)
    assert k8s.call("POST", path, untolerated)[0] == 201
    got = k8s.call("GET", f"{path}/untolerated")[1]["status"]
    assert (got["active"], "succeeded" in got) == (2, False)


# -- dynamic admission ------------------------------------------------------------------------------------
def test_a_fail_closed_webhook_without_ready_endpoints_refuses_requests(server, k8s):
    """"Dynamic Admission Control": a matching webhook with failurePolicy Fail (the v1 default) whose Service has
    no ready endpoint fails the request as kube-apiserver's dispatcher does (500 InternalError, "failed calling
    webhook ... no endpoints available for service"); once a Ready pod backs the Service, the webhook is called
    (the sandbox runs none: it allows)."""
    assert k8s.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    crds.load("clusterqueues.kueue.x-k8s.io"))[0] == 201
    assert k8s.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": "kueue-system"}})[0] == 201
    status, config, _ = k8s.call("POST", WEBHOOKS, KUEUE_WEBHOOK)
    assert status == 201
    webhook = config["webhooks"][0]
    assert (webhook["failurePolicy"], webhook["matchPolicy"], webhook["timeoutSeconds"],
            webhook["clientConfig"]["service"]["port"], webhook["rules"][0]["scope"]) == \
        ("Fail", "Equivalent", 10, 443, "*")
    queues = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
    status, body, _ = k8s.call("POST", queues, CLUSTER_QUEUE)
    url = ('https://kueue-webhook-service.kueue-system.svc:443/validate-kueue-x-k8s-io-v1beta2-clusterqueue'
           '?timeout=10s')
    assert (status, body["reason"]) == (500, "InternalError")
    assert body["message"] == ('Internal error occurred: failed calling webhook "vclusterqueue.kb.io": failed to call '
                               f'webhook: Post "{url}": service "kueue-webhook-service" not found')
    services = "/api/v1/namespaces/kueue-system/services"
    assert k8s.call("POST", services, KUEUE_SERVICE)[0] == 201
    status, body, _ = k8s.call("POST", queues, CLUSTER_QUEUE)
    assert body["message"] == ('Internal error occurred: failed calling webhook "vclusterqueue.kb.io": failed to call '
                               f'webhook: Post "{url}": no endpoints available for service "kueue-webhook-service"')
    assert body["details"]["causes"][0]["message"] == body["message"].removeprefix("Internal error occurred: ")
    assert k8s.call("GET", f"{queues}/gpus")[0] == 404
    # matchPolicy Equivalent (the default): the v1beta2 rule covers v1beta1 requests too; Exact does not
    old_queues = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
    old_queue = {**CLUSTER_QUEUE, "apiVersion": "kueue.x-k8s.io/v1beta1", "metadata": {"name": "old"}}
    assert k8s.call("POST", old_queues, old_queue)[0] == 500
    exact = {"webhooks": [{**KUEUE_WEBHOOK["webhooks"][0], "matchPolicy": "Exact"}]}
    assert k8s.call("PATCH", f"{WEBHOOKS}/kueue-validating-webhook-configuration", exact,
                    "application/merge-patch+json")[0] == 200
    assert k8s.call("POST", old_queues, old_queue)[0] == 201
    assert k8s.call("POST", queues, CLUSTER_QUEUE)[0] == 500
    assert k8s.call("DELETE", f"{old_queues}/old")[0] == 200

    # Kueue's visibility APIService: Available only while its Service has a ready endpoint (kube-aggregator)
    apiservices = "/apis/apiregistration.k8s.io/v1/apiservices"
    visibility = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                  "metadata": {"name": "v1beta2.visibility.kueue.x-k8s.io"},
                  "spec": {"group": "visibility.kueue.x-k8s.io", "version": "v1beta2", "groupPriorityMinimum": 100,
                           "versionPriority": 100, "insecureSkipTLSVerify": True,
                           "service": {"name": "kueue-webhook-service", "namespace": "kueue-system"}}}
    assert k8s.call("POST", apiservices, visibility)[0] == 201

    def aggregated() -> tuple[str, str]:
        available = conditions(k8s.call("GET", f"{apiservices}/v1beta2.visibility.kueue.x-k8s.io")[1])["Available"]
        return available["status"], available["reason"]

    assert aggregated() == ("False", "MissingEndpoints")
    controller = workload("Deployment", "kueue-controller-manager", KUEUE_LABELS, SYSTEM_LABEL, TOLERATE_CRITICAL)
    deployments = "/apis/apps/v1/namespaces/kueue-system/deployments"
    assert k8s.call("POST", deployments, controller)[0] == 201
    assert k8s.call("POST", queues, CLUSTER_QUEUE)[0] == 500  # no node for the controller yet
    server["eks"].instances[CLUSTER] = [m5_node("ip-10-0-0-9.ec2.internal", SYSTEM_LABEL, [CRITICAL_TAINT])]
    assert k8s.call("POST", queues, CLUSTER_QUEUE)[0] == 201
    assert aggregated() == ("True", "Passed")
    server["eks"].instances[CLUSTER] = []  # its node went away: updates are refused again, reads are not
    status, body, _ = k8s.call("PATCH", f"{queues}/gpus", {"spec": {"cohortName": "all"}},
                               "application/merge-patch+json")
    assert (status, body["reason"]) == (500, "InternalError")
    assert k8s.call("GET", f"{queues}/gpus")[0] == 200
    assert k8s.call("DELETE", f"{queues}/gpus")[0] == 200  # the rule covers CREATE and UPDATE only
    # the configuration itself is never sent to webhooks, so a dead webhook can always be removed
    assert k8s.call("DELETE", f"{WEBHOOKS}/kueue-validating-webhook-configuration")[0] == 200
    assert k8s.call("POST", queues, CLUSTER_QUEUE)[0] == 201


def test_which_webhooks_a_request_goes_to(server, k8s):
    """Rules (operations, groups, versions, resources, scope), namespaceSelector, objectSelector, matchConditions
    and failurePolicy Ignore ("Dynamic Admission Control": "Matching requests")."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}}
    assert k8s.call("POST", "/api/v1/namespaces", ns)[0] == 201

    def hook(name: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "clientConfig": {"service": {"name": "nowhere", "namespace": "volcano-system", "path": "/x"}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["configmaps"]}], **extra}

    config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
              "metadata": {"name": "selective"}, "webhooks": [
                  hook("skip-system.example.com", namespaceSelector={"matchExpressions": [
                      {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                       "values": ["volcano-system", "kube-system"]}]}),
                  hook("labelled.example.com", objectSelector={"matchLabels": {"checked": "yes"}}),
                  hook("ignored.example.com", failurePolicy="Ignore", rules=[
                      {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]),
                  hook("conditional.example.com", matchConditions=[
                      {"name": "only-team", "expression": "object.metadata.name.startsWith('team-')"}])]}
    assert k8s.call("POST", WEBHOOKS, config)[0] == 201
    path = "/api/v1/namespaces/{}/configmaps"
    # in default: skip-system matches (default is not excluded)
    status, body, _ = k8s.call("POST", path.format("default"), configmap("a"))
    assert status == 500 and '"skip-system.example.com"' in body["message"]
    # in volcano-system: skip-system is excluded; labelled needs the label; conditional needs the name
    assert k8s.call("POST", path.format("volcano-system"), configmap("b"))[0] == 201
    status, body, _ = k8s.call("POST", path.format("volcano-system"), configmap("c", {"checked": "yes"}))
    assert status == 500 and '"labelled.example.com"' in body["message"]
    status, body, _ = k8s.call("POST", path.format("volcano-system"), configmap("team-a"))
    assert status == 500 and '"conditional.example.com"' in body["message"]
    # other operations and resources: only the Ignore webhook matches, and it never refuses
    assert k8s.call("PATCH", path.format("volcano-system") + "/b", {"data": {"k": "v"}},
                    "application/merge-patch+json")[0] == 200
    assert k8s.call("POST", "/api/v1/namespaces/default/secrets", {"apiVersion": "v1", "kind": "Secret",
                                                                   "metadata": {"name": "s"}})[0] == 201

    # a fail-closed webhook on everything: webhook configurations are never sent to webhooks, so it can be removed
    catch_all = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                 "metadata": {"name": "catch-all"}, "webhooks": [hook("all.example.com", rules=[
                     {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}])]}
    mutating = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    status, created, _ = k8s.call("POST", mutating, catch_all)
    assert status == 201 and created["webhooks"][0]["reinvocationPolicy"] == "Never"
    status, body, _ = k8s.call("DELETE", "/api/v1/namespaces/default/secrets/s")
    assert status == 500 and '"all.example.com"' in body["message"]
    assert k8s.call("DELETE", f"{mutating}/catch-all")[0] == 200
    assert k8s.call("DELETE", "/api/v1/namespaces/default/secrets/s")[0] == 200

    missing = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "incomplete"}, "webhooks": [{"name": "x.example.com", "clientConfig": {}}]}
    status, body, _ = k8s.call("POST", WEBHOOKS, missing)  # the v1 schema requires sideEffects and review versions
    assert status == 422
    assert {"webhooks[0].sideEffects", "webhooks[0].admissionReviewVersions"} <= \
        {c["field"] for c in body["details"]["causes"]}


# -- server-side apply field managers ----------------------------------------------------------------------
def test_apply_conflicts_name_the_other_manager_and_force_takes_the_field(k8s):
    """"Server-Side Apply": applying a value for a field another manager owns is 409 Conflict naming that manager
    and the field; force=true takes it over; a field its manager stops applying is removed."""
    path = "/apis/apps/v1/namespaces/default/deployments"
    labels = {"app": "web"}

    def apply(manager: str, replicas: int | None, force: bool = False, **extra_labels: str) -> tuple[int, Any]:
        body = workload("Deployment", "web", labels, replicas=replicas)
        if extra_labels:
            body["metadata"]["labels"] = extra_labels
        query = f"?fieldManager={manager}" + ("&force=true" if force else "")
        status, answer, _ = k8s.call("PATCH", f"{path}/web{query}", body, "application/apply-patch+yaml")
        return status, answer

    status, created = apply("fmcluster", 2, team="ml")
    assert status == 201
    (entry,) = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["fieldsType"]) == ("fmcluster", "Apply", "FieldsV1")
    assert entry["fieldsV1"]["f:spec"]["f:replicas"] == {}
    assert apply("fmcluster", 2, team="ml")[0] == 200  # the same manager again: no conflict
    status, body = apply("helm", 3)
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "fmcluster": .spec.replicas'
    assert body["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "fmcluster"',
                                          "field": ".spec.replicas"}]
    assert apply("helm", 2)[0] == 200  # the same value is shared, not a conflict
    status, body = apply("helm", 3, force=True)
    assert status == 200 and body["spec"]["replicas"] == 3
    managers = {e["manager"]: e for e in body["metadata"]["managedFields"]}
    assert "f:replicas" not in managers["fmcluster"]["fieldsV1"]["f:spec"]
    # fmcluster stops applying its label: removed, since no other manager owns it
    status, body = apply("fmcluster", None)
    assert status == 200 and "team" not in (body["metadata"].get("labels") or {})
    assert body["spec"]["replicas"] == 3  # helm still owns it

    # an update (not an apply) takes the fields it changes, and a later apply conflicts with it
    status, _, _ = k8s.call("PATCH", f"{path}/web?fieldManager=kubectl-edit", {"spec": {"replicas": 5}},
                            "application/merge-patch+json")
    assert status == 200
    status, body = apply("helm", 3)
    assert status == 409
    assert body["message"].startswith('Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1 at ')
    assert body["message"].endswith("Z: .spec.replicas")
