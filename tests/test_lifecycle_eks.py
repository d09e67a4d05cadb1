"""EKS end to end with the installed CLI against the sandbox: each example of ``configs/`` (Kueue, Volcano, KAI on a
Capacity Block of 2 × p5.48xlarge) goes create → status --json → scale → destroy, and boto3 and the cluster's own
Kubernetes API show what fmcluster said: the cluster ACTIVE, one node group per queue on a launch template with
every EFA interface, the nodes on the block, the scheduler's queue objects sized as the catalog says, and after
destroy nothing tagged or labelled for the cluster."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

try:
    from lifecycle_fixture import CONFIGS, Cli, _ok, cli_fixture
    from test_sandbox_kube import cluster_api
except ImportError:  # tests/ imported as a package
    from tests.lifecycle_fixture import CONFIGS, Cli, _ok, cli_fixture
    from tests.test_sandbox_kube import cluster_api

from fmcluster import catalog

REGION = "us-east-1"
DATA = Path(__file__).resolve().parent / "data"
MPIJOB_CRD = "mpijobs.kubeflow.org"
# Where each scheduler keeps the queue object of spec queue "train", and how to read its GPU quota.
QUEUE_OBJECTS = {
    "kueue": ("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/train",
              lambda obj: {r["name"]: r["nominalQuota"] for r in obj["spec"]["resourceGroups"][0]["flavors"][0][
                  "resources"]}),
    "volcano": ("/apis/scheduling.volcano.sh/v1beta1/queues/train", lambda obj: obj["spec"]["capability"]),
    "kai": ("/apis/scheduling.run.ai/v2/queues/train",
            lambda obj: {name: value["quota"] for name, value in obj["spec"]["resources"].items()}),
}


class EksCli(Cli):
    name_prefix = "e2e-eks"
    timeout = 180

    def inventory(self) -> dict[str, list]:
        ec2, eks, iam, fsx = (self.sandbox.client(s, REGION) for s in ("ec2", "eks", "iam", "fsx"))
        tag = [{"Name": "tag:fmcluster:cluster", "Values": [self.name]}]
        live = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
        roles = [r["RoleName"] for r in iam.list_roles()["Roles"] if r["RoleName"].startswith(f"{self.name}-")]
        return {
            "clusters": [c for c in eks.list_clusters()["clusters"] if c == self.name],
            "instances": [i["InstanceId"] for r in ec2.describe_instances(Filters=tag + live)["Reservations"]
                          for i in r["Instances"]],
            "launch_templates": ec2.describe_launch_templates(Filters=tag)["LaunchTemplates"],
            "security_groups": ec2.describe_security_groups(Filters=tag)["SecurityGroups"],
            "vpcs": ec2.describe_vpcs(Filters=tag)["Vpcs"],
            "subnets": ec2.describe_subnets(Filters=tag)["Subnets"],
            "file_systems": [f for f in fsx.describe_file_systems()["FileSystems"]
                             if {t["Key"]: t["Value"] for t in f.get("Tags", [])}.get("fmcluster:cluster") == self.name
                             and f["Lifecycle"] != "DELETING"],
            "roles": roles,
        }

    def has_cloud_resources(self) -> bool:
        return bool(self.inventory()["clusters"])


cli = cli_fixture(EksCli)


def _buy_block(sandbox, instances: int) -> tuple[str, str]:
    """A p5.48xlarge Capacity Block that starts now: its id and Availability Zone."""
    ec2 = sandbox.client("ec2", REGION)
    offers = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=instances,
                                                   CapacityDurationHours=24)["CapacityBlockOfferings"]
    now = dt.datetime.now(dt.timezone.utc)
    offer = next(o for o in offers if o["StartDate"] <= now)
    block = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                        InstancePlatform="Linux/UNIX")["CapacityReservation"]
    assert block["State"] == "active", block
    return block["CapacityReservationId"], block["AvailabilityZone"]


def _kube_get(sandbox, cluster: dict[str, Any], path: str) -> dict[str, Any]:
    """GET ``path`` from the cluster's Kubernetes API, verified with the CA EKS issued, as the cluster's creator."""
    status, answer = cluster_api(sandbox.endpoint_url, cluster, REGION)("GET", path)
    assert status == 200, answer
    return answer


@pytest.mark.parametrize("scheduler", sorted(QUEUE_OBJECTS))
def test_create_status_scale_destroy_on_a_capacity_block(cli, sandbox, scheduler):
    data = yaml.safe_load((CONFIGS / f"p5-{scheduler}-eks.yaml").read_text())
    block, zone = _buy_block(sandbox, 2)
    data["name"] = cli.name
    data["queues"][0]["capacity"]["reservation_id"] = block
    data["queues"].append({"name": "cpu", "instance_type": "m7i.2xlarge", "nodes": 1})
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))

    created = _ok(cli.create())
    # The ready message says how to reach the Kubernetes API and test the cluster.
    assert f"kubeconfig {cli.name} -o ~/.kube/config" in created.stdout, created.stdout
    assert f"smoke {cli.name}` tests it through its scheduler" in created.stdout
    eks, ec2 = sandbox.client("eks", REGION), sandbox.client("ec2", REGION)
    cluster = eks.describe_cluster(name=cli.name)["cluster"]
    assert cluster["status"] == "ACTIVE" and cluster["version"] == data.get("kubernetes", {}).get("version", "1.36")
    assert sorted(eks.list_nodegroups(clusterName=cli.name)["nodegroups"]) == ["cpu", "train"]
    group = eks.describe_nodegroup(clusterName=cli.name, nodegroupName="train")["nodegroup"]
    assert (group["capacityType"], group["amiType"], group["status"]) == ("CAPACITY_BLOCK", "AL2023_x86_64_NVIDIA",
                                                                          "ACTIVE")
    template = ec2.describe_launch_template_versions(LaunchTemplateId=group["launchTemplate"]["id"],
                                                     Versions=[group["launchTemplate"]["version"]])
    template_data = template["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    interfaces = template_data["NetworkInterfaces"]
    assert len(interfaces) == 32 and all(nic["InterfaceType"] == "efa" for nic in interfaces)
    assert template_data["InstanceMarketOptions"]["MarketType"] == "capacity-block"
    reservation = ec2.describe_capacity_reservations(CapacityReservationIds=[block])["CapacityReservations"][0]
    assert reservation["AvailableInstanceCount"] == 0  # both nodes run on the block
    nodes = [i for r in ec2.describe_instances(Filters=[
        {"Name": "tag:eks:nodegroup-name", "Values": ["train"]},
        {"Name": "tag:eks:cluster-name", "Values": [cli.name]},
        {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]]
    assert len(nodes) == 2 and {n["Placement"]["AvailabilityZone"] for n in nodes} == {zone}

    # The scheduler's queue for "train" holds what two p5.48xlarge offer, as the catalog says.
    path, quota_of = QUEUE_OBJECTS[scheduler]
    facts = catalog.instance("p5.48xlarge")
    assert facts is not None
    quota = quota_of(_kube_get(sandbox, cluster, path))
    gpus = facts.accelerators * 2
    if scheduler == "kai":  # KAI counts CPUs in millicores and memory in megabytes; EFA has no field there
        assert (quota["gpu"], quota["cpu"]) == (gpus, facts.vcpus * 2 * 1000)
        runtime = _kube_get(sandbox, cluster, "/apis/node.k8s.io/v1/runtimeclasses/nvidia")
        assert runtime["handler"] == "nvidia"
    else:
        assert (quota["nvidia.com/gpu"], quota["cpu"]) == (str(gpus), str(facts.vcpus * 2))
        assert quota["vpc.amazonaws.com/efa"] == str(32 * 2)
    # With the device plugins fmcluster installed, the API's Nodes carry the GPUs and EFA devices.
    listed = _kube_get(sandbox, cluster, "/api/v1/nodes?labelSelector=fmcluster.io%2Fqueue%3Dtrain")["items"]
    assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in listed] == [str(facts.accelerators)] * 2
    assert [n["status"]["allocatable"]["vpc.amazonaws.com/efa"] for n in listed] == ["32"] * 2

    status = cli.status()
    assert (status["status"], status["drift"]) == ("ACTIVE", [])
    assert {q["name"]: q["running_instances"] for q in status["queues"]} == {"train": 2, "cpu": 1}
    train = next(q for q in status["queues"] if q["name"] == "train")
    assert (train["nodes_ready"], train["gpus"], train["efa"]) == (2, gpus, 64)  # from the cluster's API
    assert train["quota"] == quota
    assert status["usd_per_hour_max"] == json.loads(_ok(cli.run("plan", str(cli.spec), "--json")).stdout)[
        "usd_per_hour"]  # the control plane's fee included, in both

    _ok(cli.run("scale", cli.name, "cpu=2", "--yes"))
    scaled = eks.describe_nodegroup(clusterName=cli.name, nodegroupName="cpu")["nodegroup"]["scalingConfig"]
    assert scaled == {"minSize": 2, "maxSize": 2, "desiredSize": 2}
    assert cli.status()["drift"] == []  # the cpu queue's quota moved with its nodes, in each scheduler's form
    if scheduler != "kueue":  # the refusal and kubeconfig do not depend on the scheduler: once is enough
        _ok(cli.destroy())
        assert {kind: items for kind, items in cli.inventory().items() if items} == {}
        return
    # Past the block's two instances EKS would fail the launch: scale refuses before any change.
    refused = cli.run("scale", cli.name, "train=3", "--yes")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr

    # smoke through Kueue: --print shows the MPIJob for queue "train", each worker holding a p5.48xlarge's 8 GPUs
    # and 32 EFA devices; the sandbox runs no pods, so the job ends at --timeout (0.1 min) with exit 1, one line
    # (or, with --json, the JSON report), and no MPIJob is left.
    printed = yaml.safe_load(_ok(cli.run("smoke", cli.name, "--print")).stdout)
    assert (printed["kind"], printed["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]) == ("MPIJob", "train")
    worker = printed["spec"]["mpiReplicaSpecs"]["Worker"]
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert (worker["replicas"], limits["nvidia.com/gpu"], limits["vpc.amazonaws.com/efa"]) == (2, 8, 32)
    api = cluster_api(sandbox.endpoint_url, cluster, REGION)
    smoked = cli.run("smoke", cli.name, "--timeout", "0.1")
    errors = [line for line in smoked.stderr.splitlines() if line.startswith("error:")]
    assert smoked.returncode == 1 and len(errors) == 1 and "Traceback" not in smoked.stderr, smoked.stderr
    if api("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{MPIJOB_CRD}")[0] == 404:
        assert "serves no MPIJob" in errors[0], errors
        # The MPI Operator's own CRD (tests/data/mpi-operator-v0.8.0), so that the submission is what runs next.
        crd = yaml.safe_load((DATA / "mpi-operator-v0.8.0" / f"{MPIJOB_CRD}.yaml").read_text())
        assert api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    smoked = cli.run("smoke", cli.name, "--timeout", "0.1", "--json")
    report = json.loads(smoked.stdout)
    assert (smoked.returncode, report["ok"], report["checks"][0]["name"]) == (1, False, "job"), smoked.stderr
    # Submitted (the API held it to the CRD's schema), never run, deleted at the timeout.
    assert report["job_state"] == "TIMEOUT", report
    assert "submitting MPIJob default/fmcluster-smoke-train to queue train" in smoked.stderr, smoked.stderr
    assert api("GET", "/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs")[1]["items"] == []

    kubeconfig = yaml.safe_load(_ok(cli.run("kubeconfig", cli.name)).stdout)
    assert kubeconfig["clusters"][0]["cluster"]["server"] == cluster["endpoint"]
    # kubectl runs the user's exec command as written, with the kubeconfig's env: it is the fmcluster that ran,
    # by its absolute path, so it needs no venv on PATH.
    plugin = kubeconfig["users"][0]["user"]["exec"]
    assert os.path.isabs(plugin["command"]), plugin
    env = {**cli.env, "PATH": "/usr/bin:/bin", **{item["name"]: item["value"] for item in plugin.get("env", [])}}
    ran = subprocess.run([plugin["command"], *plugin["args"]], env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(ran.stdout)["status"]["token"].startswith("k8s-aws-v1."), ran.stderr
    credential = json.loads(_ok(cli.run("kubeconfig", cli.name, "--token")).stdout)
    assert credential["status"]["token"].startswith("k8s-aws-v1.")

    _ok(cli.destroy())
    left = {kind: items for kind, items in cli.inventory().items() if items}
    assert left == {}, left
