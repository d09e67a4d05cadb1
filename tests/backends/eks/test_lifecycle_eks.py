"""EKS end to end with the installed CLI against the sandbox: each example of ``configs/`` (Kueue, Volcano, KAI on a
Capacity Block of 2 × p5.48xlarge) goes create → status --json → scale → destroy, and boto3 and the cluster's own
Kubernetes API show what fmcluster said: the cluster ACTIVE, one node group per queue on a launch template with
every EFA interface and the On-Demand `system` node group, the nodes on the block, the scheduler's queue objects
sized as AWS publishes the instance, the burn-in gate's check job passing through each scheduler, ``smoke`` passing
on each (and, on the Kueue cluster, failing a faulted node's check), and after destroy nothing tagged or labelled
for the cluster."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
from typing import Any

import pytest
import yaml
from fixtures.eks_smoke import check_smoke_runs, run_smoke
from fixtures.kube import cluster_api
from fixtures.lifecycle import CONFIGS, Cli, _ok, cli_fixture

REGION = "us-east-1"
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


# What each scheduler's pinned release holds (shared/reference/kubernetes-schedulers/README.md: "CRDs per set",
# "Webhooks", "Readiness, per scheduler"), and the MPI Operator v0.8.0's CRD and Deployment, installed beside each.
RELEASE_CRDS = {
    "kueue": [f"{plural}.kueue.x-k8s.io" for plural in (
        "admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs",
        "provisioningrequestconfigs", "resourceflavors", "topologies", "workloadpriorityclasses", "workloads")],
    "volcano": ["jobs.batch.volcano.sh", "cronjobs.batch.volcano.sh", "commands.bus.volcano.sh",
                "podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh", "numatopologies.nodeinfo.volcano.sh",
                "hypernodes.topology.volcano.sh", "nodeshards.shard.volcano.sh",
                "colocationconfigurations.config.volcano.sh", "jobflows.flow.volcano.sh",
                "jobtemplates.flow.volcano.sh"],
    "kai": ["configs.kai.scheduler", "schedulingshards.kai.scheduler", "topologies.kai.scheduler",
            "bindrequests.scheduling.run.ai", "podgroups.scheduling.run.ai", "queues.scheduling.run.ai"],
}
CONTROLLERS = {
    "kueue": [("kueue-system", "kueue-controller-manager")],
    "volcano": [("volcano-system", "volcano-admission"), ("volcano-system", "volcano-controllers"),
                ("volcano-system", "volcano-scheduler")],
    "kai": [("kai-scheduler", "kai-operator")],
}
MPI_OPERATOR = ("mpi-operator", "mpi-operator")
WEBHOOKS = {
    "kueue": [("mutating", "kueue-mutating-webhook-configuration"),
              ("validating", "kueue-validating-webhook-configuration")],
    "volcano": [("mutating", "volcano-admission-service-queues-mutate"),
                ("mutating", "volcano-admission-service-jobs-mutate"),
                ("validating", "volcano-admission-service-jobs-validate"),
                ("validating", "volcano-admission-service-queues-validate"),
                ("validating", "volcano-admission-service-podgroups-validate"),
                ("validating", "volcano-admission-service-hypernodes-validate"),
                ("validating", "volcano-admission-service-cronjobs-validate")],
    "kai": [],  # KAI's operator makes its webhooks; fmcluster applies none
}


# EKS User Guide node-health-nma.adoc: XID 79 ("GPU has fallen off the bus") repairs by Replace by default, and
# "Repair after" 10 min for AcceleratedHardwareReady (node-repair.adoc).
XID79_REBOOT = {"nodeMonitoringCondition": "AcceleratedHardwareReady", "nodeUnhealthyReason": "NvidiaXID79Error",
                "minRepairWaitTimeMins": 10, "repairAction": "Reboot"}


def _check_repair_and_scratch(eks, name: str, group: dict[str, Any], template_data: dict[str, Any]) -> None:
    """auto_repair's default on GPU queues: node auto repair on, rebooting on the p5 queue's Capacity Block and with
    EKS's own actions on the On-Demand g6 queue; the node monitoring agent add-on ACTIVE; scratch_mount's default
    on p5: nodeadm's RAID 0."""
    repair = group["nodeRepairConfig"]
    assert repair["enabled"] is True and XID79_REBOOT in repair["nodeRepairConfigOverrides"]
    on_demand = eks.describe_nodegroup(clusterName=name, nodegroupName="elastic")["nodegroup"]
    assert on_demand["nodeRepairConfig"] == {"enabled": True}
    agent = eks.describe_addon(clusterName=name, addonName="eks-node-monitoring-agent")["addon"]
    assert agent["status"] == "ACTIVE"
    user_data = base64.b64decode(template_data["UserData"]).decode()
    assert "Content-Type: application/node.eks.aws" in user_data and "strategy: RAID0" in user_data
    assert "mountPath: /local_scratch" in user_data  # the spec field's default


def _deployment_path(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"


def _check_scheduler_installed(sandbox, cluster: dict[str, Any], scheduler: str) -> None:
    """The cluster's API holds the release's full CRD set, its controllers Available on the system nodes, its
    webhooks, and the MPI Operator."""
    for crd in [*RELEASE_CRDS[scheduler], "mpijobs.kubeflow.org"]:
        found = _kube_get(sandbox, cluster, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
        assert found["metadata"]["labels"]["fmcluster.io/cluster"] == cluster["name"]
    if scheduler == "kueue":  # the controller needs the conversion webhook of its release's CRDs
        cluster_queues = _kube_get(sandbox, cluster,
                                   "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterqueues.kueue.x-k8s.io")
        assert cluster_queues["spec"]["conversion"]["strategy"] == "Webhook"
    for namespace, name in [*CONTROLLERS[scheduler], MPI_OPERATOR]:
        deployment = _kube_get(sandbox, cluster, _deployment_path(namespace, name))
        available = [c for c in deployment["status"].get("conditions", []) if c["type"] == "Available"]
        assert deployment["status"].get("availableReplicas") == 1 and available[0]["status"] == "True", name
        pod = deployment["spec"]["template"]["spec"]
        assert pod["nodeSelector"]["fmcluster.io/node-role"] == "system", name
    for kind, name in WEBHOOKS[scheduler]:
        _kube_get(sandbox, cluster, f"/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations/{name}")


AUTOSCALER = "cluster-autoscaler-aws-cluster-autoscaler"  # the chart's Deployment and ServiceAccount name


def _flat(text: str) -> str:
    return " ".join(text.split())


def _check_autoscaler(sandbox, name: str, cluster: dict[str, Any]) -> None:
    """An elastic queue's cluster holds the Cluster Autoscaler's Deployment, Available on the system nodes, for this
    cluster; its ServiceAccount's Pod Identity role can change only this cluster's Auto Scaling groups; the elastic
    node group starts empty and carries what the autoscaler needs to scale it from zero."""
    deployment = _kube_get(sandbox, cluster, _deployment_path("kube-system", AUTOSCALER))
    assert deployment["status"].get("availableReplicas") == 1
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"fmcluster.io/node-role": "system"}
    assert {"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in \
        pod["tolerations"]
    assert f"k8s.io/cluster-autoscaler/{name}" in pod["containers"][0]["command"][3]
    eks, iam = sandbox.client("eks", REGION), sandbox.client("iam", REGION)
    found = eks.list_pod_identity_associations(clusterName=name, namespace="kube-system",
                                               serviceAccount=AUTOSCALER)["associations"]
    association = eks.describe_pod_identity_association(clusterName=name, associationId=found[0]["associationId"])
    role = association["association"]["roleArn"].rsplit("/", 1)[1]
    trust = iam.get_role(RoleName=role)["Role"]["AssumeRolePolicyDocument"]
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    names = iam.list_role_policies(RoleName=role)["PolicyNames"]
    assert iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"] == []
    statements = [s for n in names for s in iam.get_role_policy(RoleName=role, PolicyName=n)["PolicyDocument"][
        "Statement"]]
    scaling = [s for s in statements if "autoscaling:SetDesiredCapacity" in s["Action"]]
    assert [s["Condition"] for s in scaling] == [{"StringEquals": {"aws:ResourceTag/eks:cluster-name": name,
                                                                   "aws:RequestedRegion": REGION}}]
    group = eks.describe_nodegroup(clusterName=name, nodegroupName="elastic")["nodegroup"]
    assert group["scalingConfig"] == {"minSize": 0, "maxSize": 4, "desiredSize": 0}
    assert group["labels"]["fmcluster.io/queue"] == "elastic"
    # AWS's EC2 instance types page: g6.12xlarge carries 4 NVIDIA L4 GPUs and one EFA interface
    template = "k8s.io/cluster-autoscaler/node-template/resources/"
    assert (group["tags"][f"{template}nvidia.com/gpu"], group["tags"][f"{template}vpc.amazonaws.com/efa"]) == ("4", "1")


class EksCli(Cli):
    name_prefix = "e2e-eks"
    timeout = 300

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


def _block_zone(sandbox, *instance_types: str) -> str:
    """The first AZ (by name) that offers every one of the types: the block's AZ chosen by what EC2 offers there,
    not by the offerings' order, which follows the time of day. (An AZ that offers only the GPU type is
    tests/aws/test_network_follows_capacity.py's and .ci/lowest-versions' case: these specs' second queue runs a
    type that such an AZ does not offer either.)"""
    ec2 = sandbox.client("ec2", REGION)
    regular = {z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]
               if z.get("ZoneType", "availability-zone") == "availability-zone"}

    def offered(instance_type: str) -> set[str]:
        return regular & {o["Location"] for o in ec2.describe_instance_type_offerings(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [instance_type]}],
        )["InstanceTypeOfferings"]}

    return min(set.intersection(*(offered(t) for t in instance_types)))


def _buy_block(sandbox, instances: int, zone: str) -> tuple[str, str]:
    """A p5.48xlarge Capacity Block in ``zone`` that starts now: its id and Availability Zone."""
    ec2 = sandbox.client("ec2", REGION)
    offers = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=instances,
                                                   CapacityDurationHours=24)["CapacityBlockOfferings"]
    now = dt.datetime.now(dt.timezone.utc)
    offer = next(o for o in offers if o["StartDate"] <= now and o["AvailabilityZone"] == zone)
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
    # The Kueue run's second queue is elastic: it gets the Cluster Autoscaler (the others' stay fixed, so the three
    # runs do not each pay for the same checks).
    elastic = scheduler == "kueue"
    extra = "elastic" if elastic else "cpu"
    data["queues"].append({"name": extra, "instance_type": "g6.12xlarge", "nodes": {"min": 0, "max": 4}} if elastic
                          else {"name": "cpu", "instance_type": "m7i.2xlarge", "nodes": 1})
    zone = _block_zone(sandbox, "p5.48xlarge", data["queues"][-1]["instance_type"], "m7i.xlarge")
    block, zone = _buy_block(sandbox, 2, zone)
    data["name"] = cli.name
    data["queues"][0]["capacity"]["reservation_id"] = block
    # The burn-in gate runs at create (tests/backends/eks/test_eks_burn_in_gate.py tests it): quick here, its check
    # job submitted through each scheduler (under Volcano and KAI its workers ask for the 2 MiB huge pages the EFA
    # installer reserves, which the sandbox's EFA nodes report as the kubelet does).
    data["queues"][0]["burn_in"] = "quick"
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))

    created = _ok(cli.create())
    # The ready message says how to reach the Kubernetes API and test the cluster.
    assert f"kubeconfig {cli.name} -o ~/.kube/config" in created.stdout, created.stdout
    assert f"smoke {cli.name}` tests it through its scheduler" in created.stdout
    eks, ec2 = sandbox.client("eks", REGION), sandbox.client("ec2", REGION)
    cluster = eks.describe_cluster(name=cli.name)["cluster"]
    assert cluster["status"] == "ACTIVE" and cluster["version"] == data.get("kubernetes", {}).get("version", "1.36")
    assert sorted(eks.list_nodegroups(clusterName=cli.name)["nodegroups"]) == sorted([extra, "system", "train"])
    # Cluster software's own node group: On-Demand m7i.xlarge (no GPU), labelled and tainted for it alone.
    system = eks.describe_nodegroup(clusterName=cli.name, nodegroupName="system")["nodegroup"]
    assert (system["capacityType"], system["amiType"]) == ("ON_DEMAND", "AL2023_x86_64_STANDARD")
    assert system["labels"]["fmcluster.io/node-role"] == "system"
    assert system["taints"] == [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}]
    system_template = ec2.describe_launch_template_versions(LaunchTemplateId=system["launchTemplate"]["id"],
                                                            Versions=[system["launchTemplate"]["version"]])
    assert system_template["LaunchTemplateVersions"][0]["LaunchTemplateData"]["InstanceType"] == "m7i.xlarge"
    group = eks.describe_nodegroup(clusterName=cli.name, nodegroupName="train")["nodegroup"]
    assert (group["capacityType"], group["amiType"], group["status"]) == ("CAPACITY_BLOCK", "AL2023_x86_64_NVIDIA",
                                                                          "ACTIVE")
    template = ec2.describe_launch_template_versions(LaunchTemplateId=group["launchTemplate"]["id"],
                                                     Versions=[group["launchTemplate"]["version"]])
    template_data = template["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    interfaces = template_data["NetworkInterfaces"]
    assert len(interfaces) == 32 and all(nic["InterfaceType"] == "efa" for nic in interfaces)
    assert template_data["InstanceMarketOptions"]["MarketType"] == "capacity-block"
    if scheduler == "kueue":  # the node group's own settings do not depend on the scheduler: once is enough
        _check_repair_and_scratch(eks, cli.name, group, template_data)
    reservation = ec2.describe_capacity_reservations(CapacityReservationIds=[block])["CapacityReservations"][0]
    assert reservation["AvailableInstanceCount"] == 0  # both nodes run on the block
    nodes = [i for r in ec2.describe_instances(Filters=[
        {"Name": "tag:eks:nodegroup-name", "Values": ["train"]},
        {"Name": "tag:eks:cluster-name", "Values": [cli.name]},
        {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]]
    assert len(nodes) == 2 and {n["Placement"]["AvailabilityZone"] for n in nodes} == {zone}

    # The scheduler's queue for "train" holds what two p5.48xlarge offer: 8 GPUs and 192 vCPUs each
    # (../shared/reference/instance-facts.yaml p5.48xlarge: accelerator.count 8, vcpus 192, max_efa_interfaces 32).
    path, quota_of = QUEUE_OBJECTS[scheduler]
    quota = quota_of(_kube_get(sandbox, cluster, path))
    gpus = 8 * 2
    if scheduler == "kai":  # KAI counts CPUs in millicores and memory in megabytes; EFA has no field there
        assert (quota["gpu"], quota["cpu"]) == (gpus, 192 * 2 * 1000)
        runtime = _kube_get(sandbox, cluster, "/apis/node.k8s.io/v1/runtimeclasses/nvidia")
        assert runtime["handler"] == "nvidia"
    else:
        assert (quota["nvidia.com/gpu"], quota["cpu"]) == (str(gpus), str(192 * 2))
        assert quota["vpc.amazonaws.com/efa"] == str(32 * 2)
    # With the device plugins fmcluster installed, the API's Nodes carry the GPUs and EFA devices.
    listed = _kube_get(sandbox, cluster, "/api/v1/nodes?labelSelector=fmcluster.io%2Fqueue%3Dtrain")["items"]
    assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in listed] == ["8"] * 2
    assert [n["status"]["allocatable"]["vpc.amazonaws.com/efa"] for n in listed] == ["32"] * 2
    # ... and each passed the burn-in gate's check job, run through the cluster's scheduler
    assert [n["metadata"]["labels"].get("fmcluster.io/burn-in") for n in listed] == ["passed"] * 2

    _check_scheduler_installed(sandbox, cluster, scheduler)
    if elastic:
        _check_autoscaler(sandbox, cli.name, cluster)
    status = cli.status()
    assert (status["status"], status["drift"]) == ("ACTIVE", [])
    installed = status["scheduler"]
    assert (installed["name"], installed["ready"]) == (scheduler, True)
    assert {(c["namespace"], c["name"]): (c["ready"], c["desired"]) for c in installed["components"]} == {
        deployment: (1, 1) for deployment in [*CONTROLLERS[scheduler], MPI_OPERATOR]}
    assert {q["name"]: q["running_instances"] for q in status["queues"]} == {"train": 2, extra: 0 if elastic else 1,
                                                                             "system": 2}
    if elastic:  # the cluster's software: the scheduler, and the autoscaler (v1.36.1 on the default 1.36)
        assert (status["autoscaler"]["version"], status["autoscaler"]["ready"]) == ("v1.36.1", True)
        assert [(c["namespace"], c["name"], c["ready"]) for c in status["autoscaler"]["components"]] == [
            ("kube-system", AUTOSCALER, 1)]
    else:
        assert status["autoscaler"] is None
    train = next(q for q in status["queues"] if q["name"] == "train")
    assert (train["nodes_ready"], train["gpus"], train["efa"]) == (2, gpus, 64)  # from the cluster's API
    assert train["quota"] == quota
    assert train["unhealthy_nodes"] == []  # no node monitoring agent condition is False (cluster_view.unhealthy)
    cli.assert_plan_and_status_cost_agree(status)  # the control plane's fee included, in both

    # The steps between the installed create and destroy run in this process (fixtures/in_process.py): what they
    # check is their answer, not how the installed command starts (create, kubeconfig's exec plugin, one smoke and
    # destroy stay subprocesses for that).
    _ok(cli.run_in_process("scale", cli.name, "elastic=0:2" if elastic else "cpu=2", "system=3", "--yes"))
    scaled = eks.describe_nodegroup(clusterName=cli.name, nodegroupName=extra)["nodegroup"]["scalingConfig"]
    # an elastic group's desired size stays the autoscaler's (0 here: the sandbox runs no autoscaler)
    assert scaled == ({"minSize": 0, "maxSize": 2, "desiredSize": 0} if elastic
                      else {"minSize": 2, "maxSize": 2, "desiredSize": 2})
    system_scaled = eks.describe_nodegroup(clusterName=cli.name, nodegroupName="system")["nodegroup"]
    assert system_scaled["scalingConfig"] == {"minSize": 3, "maxSize": 3, "desiredSize": 3}
    after = cli.status()
    assert after["drift"] == []  # the cpu queue's quota moved with its nodes, in each scheduler's form
    if scheduler != "kueue":  # the refusal and kubeconfig do not depend on the scheduler: once is enough
        # smoke through Volcano or KAI: the same MPIJob marked for that scheduler runs and passes (the Kueue run
        # checks its report in detail, and its faults)
        code, report = run_smoke(cli, in_process=True)
        assert (code, report["ok"], report["job_state"]) == (0, True, "SUCCEEDED"), report
        cli.destroy_stops_billing(after["usd_per_hour_max"])
        assert {kind: items for kind, items in cli.inventory().items() if items} == {}
        return
    # Past the block's two instances EKS would fail the launch: scale refuses before any change.
    refused = cli.run_in_process("scale", cli.name, "train=3", "--yes")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr

    # Kueue's controller deleted behind fmcluster's back is drift, which `create` repairs.
    controller = _deployment_path(*CONTROLLERS["kueue"][0])
    deleted, answer = cluster_api(sandbox.endpoint_url, cluster, REGION)("DELETE", controller)
    assert deleted == 200, answer
    # ... and so is a scale-from-zero tag taken off the elastic node group (the autoscaler reads it at zero nodes)
    efa_tag = "k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"
    elastic_arn = eks.describe_nodegroup(clusterName=cli.name, nodegroupName="elastic")["nodegroup"]["nodegroupArn"]
    eks.untag_resource(resourceArn=elastic_arn, tagKeys=[efa_tag])
    drifted = cli.status()
    assert drifted["scheduler"]["ready"] is False
    table = _ok(cli.run_in_process("status", cli.name)).stdout
    assert "scheduler kueue v0.19.2: not ready" in table and "missing" in table, table
    assert "autoscaler cluster-autoscaler v1.36.1: ready" in table, table
    assert [(d["expected"], d["actual"]) for d in drifted["drift"] if "kueue-controller-manager" in d["resource"]
            and "Deployment" in d["resource"]] == [("exists", "missing")], drifted["drift"]
    assert [(d["expected"], d["actual"]) for d in drifted["drift"] if d["resource"].startswith(
        "eks_nodegroup:elastic")] == [("1", None)], drifted["drift"]
    _ok(cli.run_in_process("create", str(cli.spec), "--yes"))
    repaired = cli.status()
    assert (repaired["drift"], repaired["scheduler"]["ready"]) == ([], True)
    assert _kube_get(sandbox, cluster, controller)["status"]["availableReplicas"] == 1
    assert eks.list_tags_for_resource(resourceArn=elastic_arn)["tags"][efa_tag] == "1"
    # smoke through Kueue: --print shows the MPIJob for queue "train", each worker holding a p5.48xlarge's 8 GPUs
    # and 32 EFA devices.
    printed = yaml.safe_load(_ok(cli.run_in_process("smoke", cli.name, "--print")).stdout)
    assert (printed["kind"], printed["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]) == ("MPIJob", "train")
    worker = printed["spec"]["mpiReplicaSpecs"]["Worker"]
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert (worker["replicas"], limits["nvidia.com/gpu"], limits["vpc.amazonaws.com/efa"]) == (2, 8, 32)
    check_smoke_runs(cli, sandbox, cluster)

    kubeconfig = yaml.safe_load(_ok(cli.run("kubeconfig", cli.name)).stdout)
    assert kubeconfig["clusters"][0]["cluster"]["server"] == cluster["endpoint"]
    # kubectl runs the user's exec command as written, with the kubeconfig's env: it is the fmcluster that ran,
    # by its absolute path, so it needs no venv on PATH.
    plugin = kubeconfig["users"][0]["user"]["exec"]
    assert os.path.isabs(plugin["command"]), plugin
    env = {**cli.env, "PATH": "/usr/bin:/bin", **{item["name"]: item["value"] for item in plugin.get("env", [])}}
    ran = subprocess.run([plugin["command"], *plugin["args"]], env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(ran.stdout)["status"]["token"].startswith("k8s-aws-v1."), ran.stderr
    credential = json.loads(_ok(cli.run_in_process("kubeconfig", cli.name, "--token")).stdout)
    assert credential["status"]["token"].startswith("k8s-aws-v1.")

    # The caller's access entry deleted (revoked, or a teammate's): the Kubernetes API refuses it. `status` still shows
    # what AWS holds, with the refusal as a problem line, and `destroy` says so in one line and deletes AWS's side
    # regardless (the Kubernetes objects go with the cluster). The other schedulers' runs destroy through the API.
    caller = sandbox.client("sts", REGION).get_caller_identity()["Arn"]
    principal = caller.replace(":sts::", ":iam::")  # moto's caller user/moto; EKS keys its entry by the IAM ARN
    assert principal in eks.list_access_entries(clusterName=cli.name)["accessEntries"]
    eks.delete_access_entry(clusterName=cli.name, principalArn=principal)
    refused = cli.status()  # exits 0 with JSON
    assert (refused["status"], refused["backend_status"]) == ("ACTIVE", "ACTIVE"), refused
    assert {q["name"] for q in refused["queues"]} == {"train", extra, "system"}
    kube_problems = [p for p in refused["problems"] if "Kubernetes API" in p]
    assert len(kube_problems) == 1 and "401" in kube_problems[0], refused["problems"]
    destroyed = _ok(cli.destroy())
    said = [line for line in destroyed.stderr.splitlines() if "Kubernetes API was not read" in line]
    assert len(said) == 1 and "destroy skips them" in said[0], destroyed.stderr
    if elastic:  # the autoscaler's association goes first, then its role with the others (the inventory lists roles)
        assert f"(EKS Pod Identity association kube-system/{AUTOSCALER})" in _flat(destroyed.stderr), destroyed.stderr
    left = {kind: items for kind, items in cli.inventory().items() if items}
    assert left == {}, left
