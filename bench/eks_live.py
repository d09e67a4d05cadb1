"""An EKS cluster as the sandbox holds it, read with boto3 and the cluster's own Kubernetes API (never from
fmcluster's output), and compared with the spec it was made from: the chaos harness and the kill tests ask
:func:`eks_problems` after a ``create`` that must have converged.

The Kubernetes reads are authenticated as ``aws eks get-token`` does (a presigned STS GetCallerIdentity URL with
the cluster's name signed in ``x-k8s-aws-id``), so nothing of fmcluster's own client is trusted to check it.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3

CLUSTER_TAG = "fmcluster:cluster"
CLUSTER_LABEL = "fmcluster.io/cluster"
K8S_AWS_ID_HEADER = "x-k8s-aws-id"
GPU = "nvidia.com/gpu"


def eks_token(endpoint_url: str, cluster: str, region: str) -> str:
    """A bearer token for ``cluster`` as ``aws eks get-token --cluster-name CLUSTER`` makes it."""
    sts = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                region_name=region).client("sts", endpoint_url=endpoint_url)

    def retrieve(params: dict, context: dict, **_: Any) -> None:  # awscli STSClientFactory._retrieve_k8s_aws_id
        if K8S_AWS_ID_HEADER in params:
            context[K8S_AWS_ID_HEADER] = params.pop(K8S_AWS_ID_HEADER)

    def inject(request: Any, **_: Any) -> None:  # awscli STSClientFactory._inject_k8s_aws_id_header
        if K8S_AWS_ID_HEADER in request.context:
            request.headers[K8S_AWS_ID_HEADER] = request.context[K8S_AWS_ID_HEADER]

    sts.meta.events.register("provide-client-params.sts.GetCallerIdentity", retrieve)
    sts.meta.events.register("before-sign.sts.GetCallerIdentity", inject)
    url = sts.generate_presigned_url("get_caller_identity", Params={K8S_AWS_ID_HEADER: cluster}, ExpiresIn=60,
                                     HttpMethod="GET")
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class KubeReader:
    """GETs against one EKS cluster's Kubernetes endpoint, TLS verified with the CA EKS reported for it."""

    def __init__(self, cluster: dict[str, Any], token: str):
        self.endpoint, self.token = cluster["endpoint"], token
        with tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False) as ca:
            ca.write(base64.b64decode(cluster["certificateAuthority"]["data"]))
        self.context = ssl.create_default_context(cafile=ca.name)

    def get(self, path: str) -> dict[str, Any] | None:
        """The object or list at ``path``; None when the API says 404 (the object or its kind is not there)."""
        request = urllib.request.Request(self.endpoint + path, headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise


def _counts(nodes: Any) -> tuple[int, int]:
    return (nodes, nodes) if isinstance(nodes, int) else (nodes["min"], nodes["max"])


def gpus_of(ec2: Any, instance_type: str) -> int:
    """NVIDIA GPUs of one instance of the type, as EC2's DescribeInstanceTypes states them."""
    info = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0].get("GpuInfo") or {}
    return sum(g.get("Count", 0) for g in info.get("Gpus", []) if g.get("Manufacturer") == "NVIDIA")


def _scheduler_objects(data: dict[str, Any], gpus: dict[str, int]) -> list[tuple[str, str, Callable[[dict], Any], Any]]:
    """(what, API path, the value read from the object, the value the spec asks for) of every queue object the
    spec's scheduler needs: the GPU quota of each queue at its most nodes (``gpus``: per instance type)."""
    scheduler = (data.get("kubernetes") or {}).get("scheduler", "kueue")
    wanted: list[tuple[str, str, Callable[[dict], Any], Any]] = []
    for queue in data["queues"]:
        name = queue["name"]
        gpus_most = gpus[queue["instance_type"]] * _counts(queue["nodes"])[1]
        if scheduler == "kueue":
            flavor = queue["instance_type"]
            wanted += [
                (f"Kueue ResourceFlavor {flavor}", f"/apis/kueue.x-k8s.io/v1beta2/resourceflavors/{flavor}",
                 lambda o: o["metadata"]["name"], flavor),
                (f"Kueue ClusterQueue {name} GPU quota", f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}",
                 lambda o: sorted({r["nominalQuota"] for g in o["spec"]["resourceGroups"] for f in g["flavors"]
                                   for r in f["resources"] if r["name"] == GPU}), [str(gpus_most)]),
                (f"Kueue LocalQueue {name}", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/{name}",
                 lambda o: o["spec"]["clusterQueue"], name)]
        elif scheduler == "volcano":
            wanted.append((f"Volcano Queue {name} GPU capability", f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}",
                           lambda o: o["spec"]["capability"].get(GPU), str(gpus_most)))
        else:
            wanted.append((f"KAI Queue {name} GPU quota", f"/apis/scheduling.run.ai/v2/queues/{name}",
                           lambda o: o["spec"]["resources"]["gpu"]["quota"], gpus_most))
    if scheduler == "kai":
        wanted.append(("RuntimeClass nvidia", "/apis/node.k8s.io/v1/runtimeclasses/nvidia",
                       lambda o: o["handler"], "nvidia"))
    return wanted


SYSTEM_GROUP = "system"


def eks_problems(client: Callable[[str], Any], endpoint_url: str, data: dict[str, Any],
                 region: str = "us-east-1") -> list[str]:
    """Everything in which the live EKS cluster differs from the spec ``data`` (a loaded spec file): the cluster
    ACTIVE and tagged; one ACTIVE node group per queue, no other, with the queue's counts and as many running
    instances of the queue's type as it desires; add-ons ACTIVE; a Kubernetes Node per instance showing its GPUs;
    the scheduler's queue objects, labelled for the cluster, with GPU quotas of EC2's GPU counts. Empty when it
    matches."""
    name = data["name"]
    eks, ec2 = client("eks"), client("ec2")
    found: list[str] = []
    try:
        cluster = eks.describe_cluster(name=name)["cluster"]
    except eks.exceptions.ResourceNotFoundException:
        return [f"EKS cluster {name} does not exist"]
    if cluster["status"] != "ACTIVE":
        found.append(f"EKS cluster is {cluster['status']}")
    if (cluster.get("tags") or {}).get(CLUSTER_TAG) != name:
        found.append(f"EKS cluster is not tagged {CLUSTER_TAG}={name}")
    groups = {g: eks.describe_nodegroup(clusterName=name, nodegroupName=g)["nodegroup"]
              for page in eks.get_paginator("list_nodegroups").paginate(clusterName=name) for g in page["nodegroups"]}
    queues = {q["name"]: q for q in data["queues"]}
    # Besides the queues' node groups, the `system` one for cluster software (README "EKS": kubernetes.system_nodes
    # On-Demand nodes of kubernetes.system_instance_type, defaults 2 and m7i.xlarge), checked as a static queue.
    kubernetes = data.get("kubernetes") or {}
    queues[SYSTEM_GROUP] = {"name": SYSTEM_GROUP, "nodes": kubernetes.get("system_nodes", 2),
                            "instance_type": kubernetes.get("system_instance_type", "m7i.xlarge")}
    if set(groups) != set(queues):
        found.append(f"node groups {sorted(groups)} != queues and {SYSTEM_GROUP} {sorted(queues)}")
    instances: dict[str, list[dict]] = {}
    nodes_of_cluster = [{"Name": "tag:eks:cluster-name", "Values": [name]},
                        {"Name": "instance-state-name", "Values": ["running"]}]
    for page in ec2.get_paginator("describe_instances").paginate(Filters=nodes_of_cluster):
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
                instances.setdefault(tags.get("eks:nodegroup-name", ""), []).append(instance)
    for group_name, group in groups.items():
        scaling = group.get("scalingConfig") or {}
        if group["status"] != "ACTIVE":
            found.append(f"node group {group_name} is {group['status']}")
        queue = queues.get(group_name)
        if queue is None:
            continue
        if (scaling.get("minSize"), scaling.get("maxSize")) != _counts(queue["nodes"]):
            found.append(f"node group {group_name} scales {scaling.get('minSize')}..{scaling.get('maxSize')}, "
                         f"the spec {_counts(queue['nodes'])}")
        running = instances.get(group_name, [])
        types = {i["InstanceType"] for i in running}
        if len(running) != scaling.get("desiredSize") or types - {queue["instance_type"]}:
            found.append(f"node group {group_name} has {len(running)} running instances {sorted(types)}, "
                         f"desired {scaling.get('desiredSize')} {queue['instance_type']}")
    addons = [eks.describe_addon(clusterName=name, addonName=a)["addon"]
              for page in eks.get_paginator("list_addons").paginate(clusterName=name) for a in page["addons"]]
    found += [f"add-on {a['addonName']} is {a['status']}" for a in addons if a["status"] != "ACTIVE"]
    if not addons:
        found.append("no add-ons")
    if cluster["status"] != "ACTIVE" or not cluster.get("endpoint"):
        return found
    kube = KubeReader(cluster, eks_token(endpoint_url, name, region))
    nodes = (kube.get("/api/v1/nodes") or {}).get("items", [])
    node_gpus = sorted(n["status"].get("allocatable", {}).get(GPU, "0") for n in nodes)
    gpus = {q["instance_type"]: gpus_of(ec2, q["instance_type"]) for q in queues.values()}
    want_gpus = sorted(str(gpus[queues[g]["instance_type"]]) for g, members in instances.items() if g in queues
                       for _ in members)
    if node_gpus != want_gpus:
        found.append(f"Kubernetes Nodes allocate {GPU} {node_gpus}, the instances have {want_gpus}")
    for what, path, value, wanted in _scheduler_objects(data, gpus):
        live = kube.get(path)
        if live is None:
            found.append(f"{what}: not in the Kubernetes API")
            continue
        if (live["metadata"].get("labels") or {}).get(CLUSTER_LABEL) != name:
            found.append(f"{what}: not labelled {CLUSTER_LABEL}={name}")
        try:
            got = value(live)
        except (KeyError, TypeError) as exc:
            got = f"missing {exc}"
        if got != wanted:
            found.append(f"{what}: {got!r}, the spec needs {wanted!r}")
    return found
