"""The Kubernetes objects of an eks spec: sized from the catalog, checked offline against the Kubernetes schemas and the
scheduler CRDs (unknown fields are problems), and accepted by the sandbox's Kubernetes API (CEL rules included)."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from fixtures.eks_specs import REGION, eks_spec

from fmcluster.backends.eks.nodes.quotas import covered_resources, queue_quota
from fmcluster.backends.eks.software.manifests import CLUSTER_LABEL, managed_kinds, manifests, node_labels
from fmcluster.backends.eks.software.releases import SCHEDULERS
from fmcluster.backends.eks.software.scheduler_install import COMPONENT_LABEL
from fmcluster.backends.eks.software.validate import manifest_problems
from fmcluster.catalog import hardware as hardware_facts
from fmcluster.catalog import instance
from fmcluster.engine.references import references
from fmcluster.spec.models import Spec
from fmcluster.validate.requests import with_stand_ins

# What two p5.48xlarge hold, hand-typed from ../shared/reference/instance-facts.yaml (p5.48xlarge: vcpus 192,
# system_memory_GiB 2048, accelerator.count 8, max_efa_interfaces 32; AWS's P5 page and DescribeInstanceTypes).
TWO_P5_QUOTA = {"cpu": "384", "memory": "4096Gi", "nvidia.com/gpu": "16", "vpc.amazonaws.com/efa": "64"}


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def own(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """fmcluster's own objects: not those of an upstream release it installs."""
    return [obj for obj in objects if COMPONENT_LABEL not in obj["metadata"]["labels"]]


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty state dir: no cached DescribeInstanceTypes answers but those a test reads."""
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_every_manifest_passes_for_each_scheduler(scheduler: str) -> None:
    spec = eks_spec(scheduler)
    objects = manifests(spec)
    assert manifest_problems(objects, spec.kubernetes.version) == []
    assert {(obj["apiVersion"], obj["kind"]) for obj in objects} <= set(managed_kinds())  # discovery lists them all
    assert all(obj["metadata"]["labels"][CLUSTER_LABEL] == "p5-train" for obj in objects)
    assert all(obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "fmcluster" for obj in objects)
    crds = [obj["metadata"]["name"] for obj in of_kind(objects, "CustomResourceDefinition")]
    # The release's full CRD set (reference README, "CRDs per set": Kueue 11, Volcano 11, KAI 6) and the MPI
    # Operator's mpijobs.kubeflow.org.
    assert len(crds) == {"kueue": 11, "volcano": 11, "kai": 6}[scheduler] + 1 and "mpijobs.kubeflow.org" in crds
    assert objects[:len(crds)] == of_kind(objects, "CustomResourceDefinition")  # their kinds exist before objects
    plugins = {obj["metadata"]["name"]: obj for obj in of_kind(objects, "DaemonSet")}
    assert set(plugins) == {"nvidia-device-plugin-daemonset", "aws-efa-k8s-device-plugin"}
    efa = plugins["aws-efa-k8s-device-plugin"]["spec"]["template"]["spec"]
    assert efa["nodeSelector"] == {"fmcluster.io/efa": "true"} and efa["hostNetwork"] is True
    # aws/eks-charts stable/aws-efa-k8s-device-plugin, chart v0.5.20: Chart.yaml appVersion v0.5.13 is the image tag
    # it deploys, from EKS's image registry (account 602401143452 in us-east-2, per "View Amazon container image
    # registries for Amazon EKS add-ons", docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html)
    assert efa["containers"][0]["image"] == ("602401143452.dkr.ecr.us-east-2.amazonaws.com/"
                                             "eks/aws-efa-k8s-device-plugin:v0.5.13")
    nvidia = plugins["nvidia-device-plugin-daemonset"]["spec"]["template"]["spec"]
    assert nvidia["nodeSelector"] == {"fmcluster.io/nvidia-gpu": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in nvidia["tolerations"]
    (volume,) = of_kind(objects, "PersistentVolume")
    assert volume["spec"]["csi"] == {"driver": "fsx.csi.aws.com", "volumeHandle": "${fsx_lustre.lustre.id}",
                                     "volumeAttributes": {"dnsname": "${fsx_lustre.lustre.dns_name}",
                                                          "mountname": "${fsx_lustre.lustre.mount_name}"}}
    assert volume["spec"]["capacity"] == {"storage": "2400Gi"}
    (claim,) = of_kind(objects, "PersistentVolumeClaim")
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"] and claim["metadata"]["namespace"] == "default"
    assert of_kind(objects, "StorageClass")[0]["provisioner"] == "fsx.csi.aws.com"
    assert node_labels(spec.queues[0]) == {"fmcluster.io/queue": "gpu", "fmcluster.io/nvidia-gpu": "true",
                                           "fmcluster.io/efa": "true"}


def test_kueue_cluster_queue_holds_two_p5_nodes() -> None:
    facts = instance("p5.48xlarge")
    assert facts is not None and (facts.vcpus, facts.memory_gib, facts.accelerators, facts.efa_interfaces) == (
        192, 2048, 8, 32)
    objects = manifests(eks_spec("kueue"))
    (flavor,) = of_kind(objects, "ResourceFlavor")
    assert flavor["spec"]["nodeLabels"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    (cluster_queue,) = of_kind(objects, "ClusterQueue")
    assert cluster_queue["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    (group,) = cluster_queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa"]
    (flavor_quota,) = group["flavors"]
    assert flavor_quota["name"] == flavor["metadata"]["name"]
    assert {r["name"]: r["nominalQuota"] for r in flavor_quota["resources"]} == TWO_P5_QUOTA
    (local,) = of_kind(objects, "LocalQueue")
    assert (local["metadata"]["namespace"], local["spec"]["clusterQueue"]) == ("default", "gpu")


def test_a_mixed_queue_is_sized_per_type() -> None:
    """A node group of [p5.48xlarge, g6.xlarge] may launch either type: Kueue's g6.xlarge flavor holds two g6.xlarge
    (hand-typed from AWS's G6 page: g6.xlarge 4 vCPUs, 16 GiB, 1 L4 GPU, no EFA), not two p5s, and lists the EFA it
    does not have as 0; the p5 flavor keeps two p5s. Volcano's single quota is bounded per resource by the type
    with the most of it, which here is p5.48xlarge throughout."""
    spec = eks_spec("kueue", instance_type=["p5.48xlarge", "g6.xlarge"], capacity={"type": "on-demand"})
    flavors = {f["metadata"]["name"] for f in of_kind(manifests(spec), "ResourceFlavor")}
    assert flavors == {"p5.48xlarge", "g6.xlarge"}
    (cluster_queue,) = of_kind(manifests(spec), "ClusterQueue")
    (group,) = cluster_queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa"]
    held = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert held == {"p5.48xlarge": TWO_P5_QUOTA,
                    "g6.xlarge": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2", "vpc.amazonaws.com/efa": "0"}}
    assert manifest_problems(manifests(spec), spec.kubernetes.version) == []
    (volcano,) = of_kind(manifests(eks_spec("volcano", instance_type=["p5.48xlarge", "g6.xlarge"],
                                            capacity={"type": "on-demand"})), "Queue")
    assert volcano["spec"]["capability"] == TWO_P5_QUOTA


def test_volcano_and_kai_queues_are_sized_in_their_own_units() -> None:
    (volcano,) = of_kind(manifests(eks_spec("volcano")), "Queue")
    assert volcano["spec"]["capability"] == TWO_P5_QUOTA
    kai = own(manifests(eks_spec("kai")))
    parent, leaf = of_kind(kai, "Queue")
    assert leaf["spec"]["parentQueue"] == parent["metadata"]["name"]
    resources = leaf["spec"]["resources"]
    assert (resources["cpu"]["quota"], resources["gpu"]["quota"]) == (384_000, 16)  # millicpus, GPUs
    assert resources["memory"]["quota"] == int(2048 * 1024**3 / 10**6) * 2  # megabytes (10^6 bytes)
    (runtime_class,) = of_kind(kai, "RuntimeClass")
    assert (runtime_class["metadata"]["name"], runtime_class["handler"]) == ("nvidia", "nvidia")


def test_misspelt_fields_are_reported() -> None:
    spec = eks_spec("kueue")
    objects = manifests(spec)
    plugin = of_kind(objects, "DaemonSet")[0]
    plugin["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    cluster_queue = of_kind(objects, "ClusterQueue")[0]
    cluster_queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuata"] = "1"
    cluster_queue["spec"]["cohort"] = "team"  # v1beta1's name; v1beta2 calls it cohortName
    problems = manifest_problems(objects, spec.kubernetes.version)
    assert len(problems) == 3, problems
    assert any(p.startswith("DaemonSet/nvidia-device-plugin-daemonset: spec.template.spec.containers.0:")
               and "'imagePullPolcy' was unexpected" in p for p in problems)
    assert any(p.startswith("ClusterQueue/gpu: spec.resourceGroups.0.flavors.0.resources.0:")
               and "'nominalQuata' was unexpected" in p for p in problems)
    assert any(p.startswith("ClusterQueue/gpu: spec:") and "'cohort' was unexpected" in p for p in problems)


def test_an_unknown_kind_or_reference_is_a_problem_not_a_crash() -> None:
    objects = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                "data": {"fs": "${nothing.lustre.id}"}},
               {"apiVersion": "apps/v9", "kind": "DaemonSet", "metadata": {"name": "plugin"}},
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Queue_A"}}]
    assert manifest_problems(objects, "1.36") == [
        "ConfigMap/settings: no stand-in for reference ${nothing.lustre.id}",
        "DaemonSet/plugin: no schema for DaemonSet apps/v9: neither a Kubernetes 1.36.0 kind nor one of fmcluster's "
        "scheduler CRDs",
        "ConfigMap/Queue_A: metadata.name: 'Queue_A' is not a Kubernetes name (lower-case letters, digits, '-' and "
        "'.', starting and ending with a letter or digit, at most 253 characters)"]


def test_kai_queue_resources_outside_the_crd_are_reported() -> None:
    spec = eks_spec("kai")
    objects = manifests(spec)
    leaf = of_kind(objects, "Queue")[-1]
    leaf["spec"]["resources"]["efa"] = {"quota": 64}  # KAI queues know only cpu, gpu and memory
    leaf["metadata"]["labels"]["fmcluster.io/cluster"] = "not a label value"
    problems = manifest_problems(objects, spec.kubernetes.version)
    assert [p.split(":")[0:2] for p in problems] == [["Queue/gpu", " spec.resources"],
                                                     ["Queue/gpu", " metadata.labels.fmcluster.io/cluster"]]


def test_trainium_gets_the_neuron_plugin_and_quota() -> None:
    spec = eks_spec("kueue", name="trn", instance_type="trn2.48xlarge", nodes={"min": 0, "max": 4},
                    capacity={"type": "on-demand"})
    objects = manifests(spec)
    assert manifest_problems(objects, spec.kubernetes.version) == []
    plugins = {obj["metadata"]["name"]: obj for obj in of_kind(objects, "DaemonSet")}
    assert set(plugins) == {"neuron-device-plugin", "aws-efa-k8s-device-plugin"}  # no NVIDIA plugin
    assert {(obj["apiVersion"], obj["kind"]) for obj in objects} <= set(managed_kinds())
    neuron = plugins["neuron-device-plugin"]["spec"]["template"]["spec"]
    assert neuron["nodeSelector"] == {"fmcluster.io/neuron": "true"}
    assert neuron["serviceAccountName"] in {sa["metadata"]["name"] for sa in own(of_kind(objects, "ServiceAccount"))}
    quota = queue_quota(spec.queues[0])
    # at the queue's max, 4 nodes of 16 Trainium2 chips (instance-facts.yaml trn2.48xlarge: accelerator.count 16)
    assert quota["aws.amazon.com/neuron"] == "64"
    assert "nvidia.com/gpu" not in quota
    assert covered_resources(spec.queues[0]) == ["cpu", "memory", "aws.amazon.com/neuron", "vpc.amazonaws.com/efa"]
    assert node_labels(spec.queues[0])["fmcluster.io/neuron"] == "true"


def test_a_cpu_queue_gets_no_device_plugin(state_home: Path, sandbox) -> None:
    # c7i.4xlarge is outside the catalog: its facts come from EC2's list shipped with fmcluster, so nothing is asked
    # of EC2; a name EC2 does not list is asked, and EC2 (the sandbox) says it has no such type.
    found = hardware_facts.discover(["c7i.4xlarge", "x9q.48xlarge"], REGION, ec2=sandbox.client("ec2", REGION))
    assert (found.learned, found.unknown_to_ec2, found.problem) == ([], ["x9q.48xlarge"], None)
    spec = eks_spec("kueue", name="prep", instance_type="c7i.4xlarge", nodes=3, capacity={"type": "on-demand"})
    objects = manifests(spec)
    assert manifest_problems(objects, spec.kubernetes.version) == []
    assert of_kind(objects, "DaemonSet") == []
    assert queue_quota(spec.queues[0]) == {"cpu": "48", "memory": "96Gi"}  # 3 x (16 vCPUs, 32 GiB)
    assert node_labels(spec.queues[0]) == {"fmcluster.io/queue": "prep"}


def test_an_unknown_instance_type_has_no_quota(state_home: Path) -> None:
    queue = eks_spec("kueue", instance_type="x9q.48xlarge").queues[0]
    with pytest.raises(LookupError, match="x9q.48xlarge are not in fmcluster's catalog"):
        queue_quota(queue)


def test_an_existing_lustre_file_system_is_named_by_its_id() -> None:
    spec = Spec.model_validate({**eks_spec().model_dump(), "storage": {"lustre": {
        "existing_id": "fs-0123456789abcdef9"}}})
    objects = manifests(spec)
    (volume,) = of_kind(objects, "PersistentVolume")
    assert volume["spec"]["csi"]["volumeHandle"] == "fs-0123456789abcdef9"
    assert references(volume) == {"existing_fsx_lustre.lustre.dns_name", "existing_fsx_lustre.lustre.mount_name"}
    assert manifest_problems(objects, spec.kubernetes.version) == []


# -- the sandbox's Kubernetes API accepts them ---------------------------------------------------------------------
def _api_path(obj: dict[str, Any]) -> str:
    """The collection an object is created in (the REST path kubectl would POST to)."""
    group_version = obj["apiVersion"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    kind = obj["kind"].lower()
    plural = (kind[:-1] + "ies" if kind.endswith("y") else  # Topology: topologies (the CRD's spec.names.plural)
              kind + ("es" if kind.endswith("s") else "s"))
    namespace = obj["metadata"].get("namespace")
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


def test_the_kueue_manifests_are_accepted_by_the_sandbox_kubernetes_api(sandbox) -> None:
    from fixtures.kube import cluster_api

    sandbox.faults({"latency": {"eks.cluster": 0}})
    eks, ec2, iam = (sandbox.client(s, REGION) for s in ("eks", "ec2", "iam"))
    suffix = uuid.uuid4().hex[:8]
    trust = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "eks.amazonaws.com"}}]})
    role = iam.create_role(RoleName=f"manifests-{suffix}", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    subnets = [ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                             {"Name": "availability-zone", "Values": [zone]}])["Subnets"][0]["SubnetId"]
               for zone in (f"{REGION}a", f"{REGION}b")]
    name = f"manifests-{suffix}"
    eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets},
                       accessConfig={"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True})
    call = cluster_api(sandbox.endpoint_url, eks.describe_cluster(name=name)["cluster"], REGION)

    # fmcluster's own objects and the CRDs their kinds need (the releases' controllers, webhooks and hooks are
    # applied in order by the engine: tests/backends/eks/test_lifecycle_eks.py); the engine fills the Lustre references.
    objects = with_stand_ins([obj for obj in manifests(eks_spec("kueue"))
                              if obj["kind"] == "CustomResourceDefinition" or obj in own([obj])])
    for obj in objects:
        status, answer = call("POST", _api_path(obj) + "?fieldValidation=Strict", obj)
        assert status == 201, (obj["kind"], obj["metadata"]["name"], answer)
    status, stored = call("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/gpu")
    assert status == 200 and stored["metadata"]["labels"][CLUSTER_LABEL] == "p5-train"
    quota = {r["name"]: r["nominalQuota"] for r in stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota == TWO_P5_QUOTA
    # The p5 flavor names the 3-layer Topology (EC2's "Prerequisites for Amazon EC2 topology": p5.48xlarge returns 3
    # network nodes), both admitted by the pinned CRDs' schemas and CEL rules.
    status, flavor = call("GET", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/p5.48xlarge")
    assert status == 200 and flavor["spec"]["topologyName"] == "network-3-layers"
    status, topology = call("GET", "/apis/kueue.x-k8s.io/v1beta2/topologies/network-3-layers")
    assert status == 200 and topology["spec"]["levels"][-1] == {"nodeLabel": "kubernetes.io/hostname"}
    # The CRD's CEL rule (the hostname only at the lowest level) refuses a Topology with it higher up.
    upside_down = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "upside-down"},
                   "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"},
                                       {"nodeLabel": "topology.k8s.aws/network-node-layer-1"}]}}
    status, answer = call("POST", "/apis/kueue.x-k8s.io/v1beta2/topologies", upside_down)
    assert status == 422 and "lowest level" in json.dumps(answer), answer

    # The API's CEL rule (every flavor lists as many resources as the group covers) refuses a short flavor.
    short = copy.deepcopy(of_kind(objects, "ClusterQueue")[0])
    short["metadata"] = {"name": "short"}
    short["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    status, answer = call("POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", short)
    assert status == 422 and "same number of resources" in json.dumps(answer), answer
    eks.delete_cluster(name=name)


@pytest.mark.parametrize(("region", "registry"), [
    ("us-east-1", "602401143452.dkr.ecr.us-east-1.amazonaws.com"),
    ("eu-south-1", "590381155156.dkr.ecr.eu-south-1.amazonaws.com"),
    ("cn-north-1", "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn"),
])
def test_the_efa_plugin_comes_from_the_regions_eks_registry(region: str, registry: str) -> None:
    """The EKS user guide's "View Amazon container image registries for Amazon EKS add-ons": not every Region's
    registry is account 602401143452."""
    spec = Spec.model_validate({**eks_spec().model_dump(), "region": region})
    (plugin,) = [obj for obj in of_kind(manifests(spec), "DaemonSet") if obj["metadata"]["name"].startswith("aws-efa")]
    assert plugin["spec"]["template"]["spec"]["containers"][0]["image"].startswith(f"{registry}/eks/")
