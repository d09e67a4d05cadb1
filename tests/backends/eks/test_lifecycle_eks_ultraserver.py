"""A p6e-gb200 UltraServer queue on EKS, in the sandbox, driven in this process (one cluster): the account opts in to
the Dallas Local Zone group, makes a subnet there beside its Availability Zone subnets, buys a u-p6e-gb200x36
Capacity Block (9 instances), and fmcluster's create → status → destroy run against it. boto3 and the cluster's own
Kubernetes API show what fmcluster said: the control plane in the Region's Availability Zones, the GB200 node group
in the Local Zone on the ARM NVIDIA image with its instances on the block, NVIDIA's DRA driver installed and ready,
and after destroy nothing left.

What AWS and NVIDIA publish, typed here by hand: "Use P6e-GB200 UltraServers with Amazon EKS" (EKS guide: the AL2023
ARM NVIDIA AMI, amiType AL2023_ARM_64_NVIDIA; u-p6e-gb200x36 = 9 instances); the DRA driver v0.4.1 render
(shared/reference/kubernetes-addons README: CRDs computedomains / computedomaincliques.resource.nvidia.com,
DaemonSet dra-driver-nvidia-gpu-kubelet-plugin and Deployment dra-driver-nvidia-gpu-controller in namespace
dra-driver-nvidia-gpu, DeviceClasses compute-domain-daemon / compute-domain-default-channel.nvidia.com).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from fixtures.kube import cluster_api
from fixtures.leftovers import inventory_of
from fixtures.ultraserver_world import DALLAS, DALLAS_GROUP, buy_x36_block, dallas_network

pytest.importorskip("fmcluster_sandbox.eks")

REGION = "us-east-1"
GB200 = "p6e-gb200.36xlarge"
DRA_NAMESPACE = "dra-driver-nvidia-gpu"
CRDS = ("computedomains.resource.nvidia.com", "computedomaincliques.resource.nvidia.com")
DEVICE_CLASSES = ("compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com")


def test_gb200_ultraserver_cluster_on_eks(sandbox, sandbox_env, tmp_path: Path, monkeypatch, capsys):
    from fmcluster.connection import aws
    from fmcluster.spec import load_spec
    from fmcluster.verbs.connect import burn_in_command, smoke_command
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status

    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, None, sandbox.endpoint_url)
    network, reservation = dallas_network(sandbox), buy_x36_block(sandbox)
    name = f"gb-eks-{time.time_ns() % 10**8}"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "backend": "eks", "region": REGION, "network": {"subnet_id": network["private_subnet"]},
        # KAI: the smallest scheduler release (0.8 MB of manifests, Kueue 1.7 MB), the quickest to apply
        "kubernetes": {"scheduler": "kai"},
        "queues": [{"name": "train", "instance_type": GB200, "nodes": 9, "subnet_id": network["dallas"],
                    "capacity": {"type": "capacity-block", "reservation_id": reservation,
                                 "ultraserver": "u-p6e-gb200x36"}}]}, sort_keys=False))

    # what the account holds already (this test's network; the sandbox's NAT gateway filter is not per tag)
    before = inventory_of(sandbox.client, name)
    assert create(load_spec(path).spec, str(path), yes=True, wait=True, timeout_min=None) == 0
    # preflight: the image's release (the sandbox's AMIs are named as AWS's, release v20260101; the P6e-GB200 page
    # asks for v20251103 or later), and the GB200 node group in the Local Zone's subnet, the control plane in AZs
    said = " ".join(capsys.readouterr().err.split())
    assert "(AL2023_ARM_64_NVIDIA), ami-" in said and ", release v20260101" in said, said
    assert f"train: its node group in {network['dallas']}, Local Zone {DALLAS}, zone group {DALLAS_GROUP} opted in" \
        in said
    eks, ec2 = sandbox.client("eks"), sandbox.client("ec2")
    cluster = eks.describe_cluster(name=name)["cluster"]
    control = ec2.describe_subnets(SubnetIds=cluster["resourcesVpcConfig"]["subnetIds"])["Subnets"]
    assert sorted(s["AvailabilityZone"] for s in control) == ["us-east-1a", "us-east-1b"]
    group = eks.describe_nodegroup(clusterName=name, nodegroupName="train")["nodegroup"]
    assert (group["amiType"], group["capacityType"], group["subnets"]) == ("AL2023_ARM_64_NVIDIA", "CAPACITY_BLOCK",
                                                                          [network["dallas"]])
    assert group["labels"]["nvidia.com/gpu.present"] == "true"  # the DRA kubelet plugin's node affinity
    nodes = [i for r in ec2.describe_instances(Filters=[
        {"Name": "tag:eks:nodegroup-name", "Values": ["train"]}, {"Name": "tag:eks:cluster-name", "Values": [name]},
        {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]]
    assert len(nodes) == 9 and {n["Placement"]["AvailabilityZone"] for n in nodes} == {DALLAS}
    block = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation])["CapacityReservations"][0]
    assert block["AvailableInstanceCount"] == 0  # all 9 on the block

    api = cluster_api(sandbox.endpoint_url, cluster, REGION)
    for crd in CRDS:
        assert api("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")[0] == 200, crd
    for device_class in DEVICE_CLASSES:
        assert api("GET", f"/apis/resource.k8s.io/v1/deviceclasses/{device_class}")[0] == 200, device_class
    plugin = api("GET", f"/apis/apps/v1/namespaces/{DRA_NAMESPACE}/daemonsets/dra-driver-nvidia-gpu-kubelet-plugin")[1]
    assert (plugin["status"]["desiredNumberScheduled"], plugin["status"]["numberReady"]) == (9, 9)
    controller = api("GET", f"/apis/apps/v1/namespaces/{DRA_NAMESPACE}/deployments/dra-driver-nvidia-gpu-controller")
    assert controller[1]["spec"]["template"]["spec"]["nodeSelector"] == {"fmcluster.io/node-role": "system"}

    report = status(name, refresh=False)
    assert (report["status"], report["drift"]) == ("ACTIVE", [])
    driver = report["dra_driver"]
    assert (driver["name"], driver["version"], driver["ready"]) == ("dra-driver-nvidia-gpu", "v0.4.1", True)
    assert {(c["kind"], c["name"]): (c["ready"], c["desired"]) for c in driver["components"]} == {
        ("DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin"): (9, 9),
        ("Deployment", "dra-driver-nvidia-gpu-controller"): (1, 1)}

    # smoke: the job's own ComputeDomain, each worker claiming an IMEX channel of it; the sandbox allocates no DRA
    # claim, so no worker is placed and the job ends at the timeout, and neither the job nor the ComputeDomain is left
    capsys.readouterr()
    smoked = smoke_command.run(name, None, None, None, None, None, timeout_min=0.02)
    assert smoked["job_state"] == "TIMEOUT", smoked  # submitted: the ComputeDomain was made first, or it is REFUSED
    said = " ".join(capsys.readouterr().err.split())
    assert "each claiming an IMEX channel of ComputeDomain fmcluster-smoke-train-imex" in said, said
    assert api("GET", "/apis/resource.nvidia.com/v1beta1/namespaces/default/computedomains")[1]["items"] == []
    assert api("GET", "/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs")[1]["items"] == []
    # burn-in's check job the same way: its own ComputeDomain made first (without it no worker could be placed),
    # then both gone; no node answers here, so each fails check ``job``, saying how the job ended
    checked = burn_in_command.run(name, None, "quick", timeout_min=0.02)
    said = " ".join(capsys.readouterr().err.split())
    assert "each claiming an IMEX channel of ComputeDomain fmcluster-burn-in-train-imex" in said, said
    assert {n["state"] for n in checked["nodes"]} == {"failed"}, checked
    assert all("(TIMEOUT: " in n["checks"][0]["detail"] for n in checked["nodes"]), checked["nodes"][0]
    assert api("GET", "/apis/resource.nvidia.com/v1beta1/namespaces/default/computedomains")[1]["items"] == []
    assert api("GET", "/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs")[1]["items"] == []

    assert destroy(name, yes=True, keep_storage=False) == 0
    assert eks.list_clusters()["clusters"].count(name) == 0
    left = {kind: [i for i in items if i not in before[kind]]
            for kind, items in inventory_of(sandbox.client, name).items()}
    left = {kind: items for kind, items in left.items() if items}
    assert left == {}, left
