"""Issue 37 items 2-4: ``fmcluster burn-in`` on EKS against ONE sandbox cluster of 8 emulated p5.48xlarge nodes
(a managed node group on fmcluster's EFA layout, NVIDIA's and AWS's device plugins, the MPI Operator), whose MPIJobs
the sandbox runs on its emulated nodes (fmcluster_sandbox/kube/mpi_operator.py). The core is called in this process;
the installed command runs once, for its exit code and --json.

Expected figures are hand-typed from AWS's pages: p5.48xlarge has 8 NVIDIA H100 GPUs and 32 EFA interfaces
("Amazon EC2 P5 instances"; the EKS EFA guide's p5 example asks for 32); the catalog's 2-node floor for it is
389 GB/s (fmcluster/catalog/nccl_floors.yaml). The sandbox replays the published 2x p5.48xlarge run; its all-reduce
over 4 nodes replays the same rows (the ``nccl_replay_larger_runs`` switch: only runs of one size are compared).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fixtures.burn_in_faults import link_off_the_neighbour_round
from fixtures.eks_smoke import JOBS, REGION, mpijob_crd
from fixtures.in_process import run_in_process
from fixtures.interrupt import signal_once_started
from fixtures.kube import cluster_api, daemonset

from fmcluster.backends import registry
from fmcluster.backends.context import BackendContext
from fmcluster.backends.eks.smoke import mpijob, submit
from fmcluster.backends.protocol import BurnInRequest
from fmcluster.connection import aws
from fmcluster.engine import Context
from fmcluster.errors import UsageError
from fmcluster.spec import load_spec
from fmcluster.state.store import StateStore
from fmcluster.verbs.connect.smoke_command import SINK
from fmcluster_sandbox.kube import launcher_run

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(launcher_run.unavailable() is not None, reason=str(launcher_run.unavailable()))
PODS = "/api/v1/namespaces/default/pods"


def _spec_text(name: str) -> str:
    text = (ROOT / "configs" / "p5-kueue-eks.yaml").read_text()
    text = text.replace("name: p5-kueue", f"name: {name}").replace("region: us-east-1", f"region: {REGION}")
    return text.replace("    nodes: 2\n", "    nodes: 8\n")


@pytest.fixture(scope="module")
def p5(sandbox, smoke_cluster) -> dict[str, Any]:
    """Eight p5.48xlarge nodes in queue ``train`` with their device plugins, the MPIJob CRD and the operator."""
    name = smoke_cluster["name"]
    eks, ec2, iam = (sandbox.client(s, REGION) for s in ("eks", "ec2", "iam"))
    vpc = smoke_cluster["resourcesVpcConfig"]["vpcId"]
    group = ec2.create_security_group(GroupName=f"efa-{uuid.uuid4().hex[:6]}", Description="efa",
                                      VpcId=vpc)["GroupId"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    interfaces = [{"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "InterfaceType": "efa",
                   "Groups": [group], "DeleteOnTermination": True} for card in range(32)]
    template = ec2.create_launch_template(LaunchTemplateName=f"p5-{uuid.uuid4().hex[:8]}", LaunchTemplateData={
        "ImageId": image, "InstanceType": "p5.48xlarge", "NetworkInterfaces": interfaces})["LaunchTemplate"]
    role = iam.create_role(RoleName=f"burn-in-{uuid.uuid4().hex[:8]}", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                "Principal": {"Service": "ec2.amazonaws.com"}}]}))["Role"]["Arn"]
    sandbox.faults({"latency": {"eks.nodegroup": 0}})
    eks.create_nodegroup(clusterName=name, nodegroupName="train", nodeRole=role,
                         subnets=smoke_cluster["resourcesVpcConfig"]["subnetIds"][:1],
                         scalingConfig={"minSize": 8, "maxSize": 8, "desiredSize": 8},
                         launchTemplate={"id": template["LaunchTemplateId"], "version": "1"},
                         labels={"fmcluster.io/queue": "train"})
    eks.get_waiter("nodegroup_active").wait(clusterName=name, nodegroupName="train",
                                            WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    http = cluster_api(sandbox.endpoint_url, smoke_cluster, REGION)
    for plugin, ref in (("nvidia", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"),
                        ("efa", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin:"
                                "v0.5.6")):
        assert http("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", daemonset(plugin, ref))[0] == 201
    assert http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", mpijob_crd())[0] == 201
    assert http("POST", "/api/v1/namespaces", {"metadata": {"name": "mpi-operator"}})[0] == 201
    labels = {"app": "mpi-operator"}
    operator = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mpi-operator"},
                "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                    "containers": [{"name": "mpi-operator", "image": "mpioperator/mpi-operator:0.8.0",
                                    "resources": {"requests": {"cpu": "100m"}}}]}}}}
    assert http("POST", "/apis/apps/v1/namespaces/mpi-operator/deployments", operator)[0] == 201
    nodes = sorted(n["metadata"]["name"] for n in http(
        "GET", "/api/v1/nodes?labelSelector=fmcluster.io%2Fqueue%3Dtrain")[1]["items"])
    assert len(nodes) == 8
    return {"name": name, "nodes": nodes, "http": http, "spec": _spec_text(name)}


@pytest.fixture
def burn_in(sandbox, sandbox_env, monkeypatch, p5, tmp_path):
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, REGION, sandbox.endpoint_url)
    monkeypatch.setattr(submit, "POLL_S", 0.2)  # the product polls every 2 s; the sandbox's jobs take about one
    sandbox.faults({"nccl_replay_larger_runs": True})
    path = tmp_path / "spec.yaml"
    path.write_text(p5["spec"])
    spec = load_spec(path).spec

    def call(level: str = "standard") -> dict[str, Any]:
        ctx = Context(cluster=p5["name"], region=REGION, client=lambda service: aws.client(service, REGION),
                      cluster_id="c0ffee12")
        context = BackendContext(p5["name"], REGION, ctx, spec)
        return registry.get("eks").burn_in(context, BurnInRequest("train", level, 2.0), SINK)

    yield call
    sandbox.faults({"reset": True})


def _nothing_left(http) -> None:
    assert http("GET", JOBS)[1]["items"] == []
    assert http("GET", PODS)[1]["items"] == []


def _bottoms(sandbox, http, nodes: list[str]) -> dict[str, str]:
    """Each node's bottom network node, from plain boto3's DescribeInstanceTopology of its instance (the last of
    ``NetworkNodes``, "listed from the top of the hierarchy", EC2 API reference)."""
    items = http("GET", "/api/v1/nodes?labelSelector=fmcluster.io%2Fqueue%3Dtrain")[1]["items"]
    instance = {n["metadata"]["name"]: n["spec"]["providerID"].rsplit("/", 1)[-1] for n in items}
    found = sandbox.client("ec2", REGION).describe_instance_topology(InstanceIds=[instance[n] for n in nodes])
    bottom = {i["InstanceId"]: i["NetworkNodes"][-1] for i in found["Instances"]}
    return {node: bottom[instance[node]] for node in nodes}


def test_faults_fail_their_nodes_with_check_and_figure_and_the_slow_link_is_found(sandbox, burn_in, p5):
    nodes = p5["nodes"]
    bottoms = _bottoms(sandbox, p5["http"], nodes)
    by_bottom: dict[str, list[str]] = {}
    for node in nodes:
        by_bottom.setdefault(bottoms[node], []).append(node)
    a, b, dcgm, efa = link_off_the_neighbour_round(nodes, bottoms)
    sandbox.faults({"node_health": {dcgm: {"dcgm_failures": [{"gpu": 3, "test": "memory"}]},
                                    efa: {"efa_devices_missing": 1}},
                    "slow_link": [a, b, 0.5]})
    report = burn_in()
    assert report["passed"] is False
    states = {n["node"]: n["state"] for n in report["nodes"]}
    failed = {n["node"]: {c["name"]: (c["found"], c["expected"]) for c in n["checks"] if c["status"] == "failed"}
              for n in report["nodes"] if n["state"] == "failed"}
    assert failed[dcgm] == {"dcgm": ("GPU 3", "pass at level 2")}
    assert failed[efa] == {"efa": (31, 32)}
    finding = report["nccl"]["finding"]
    assert (finding["kind"], finding["nodes"]) == ("link", sorted([a, b]))
    assert finding["narrowing_rounds"] <= 4
    assert set(failed[a]) == set(failed[b]) == {"nccl"}
    assert sorted(n for n, s in states.items() if s == "passed") == sorted(set(nodes) - {a, b, dcgm, efa})
    # neighbours first: every bottom node with k nodes that passed their own checks holds k // 2 of the first pairs
    passed_own = [n for n in nodes if n not in (dcgm, efa)]
    first = [r for r in report["nccl"]["runs"] if r["round"] == 1]
    under_one = sum(1 for r in first if bottoms[r["nodes"][0]] == bottoms[r["nodes"][1]])
    assert under_one == sum(len([n for n in group if n in passed_own]) // 2 for group in by_bottom.values())
    assert len(first) == len(passed_own) // 2
    # the replayed capture's 4 GiB out-of-place row, the largest -e 4G reaches: 465.87 GB/s, above the floor
    assert {(r["busbw_gb_s"], r["floor_gb_s"], r["slow"]) for r in first} == {(465.87, 389.0, False)}
    layers = [layer["crossing"] for layer in report["nccl"]["layers"]]
    assert layers[0] == "through layer 3" and len(layers) == len(set(layers)) >= 2
    _nothing_left(p5["http"])


def test_busy_nodes_are_skipped_and_quick_runs_no_all_reduce(sandbox, burn_in, p5, tmp_path):
    """A training job's worker holds every GPU of the last node: that node is busy, never checked."""
    http = p5["http"]
    path = tmp_path / "spec.yaml"
    path.write_text(p5["spec"])
    spec = load_spec(path).spec
    queue = spec.queues[0]
    job = replace(mpijob.smoke_job(spec, queue, 1, None), name="training")
    manifest = mpijob.manifest(spec, job, 120, script="sleep 60", hosts=(p5["nodes"][7],),
                               purpose_label="example.com/training")
    assert http("POST", JOBS, manifest)[0] == 201
    try:
        deadline = time.monotonic() + 30
        while not any(p["spec"].get("nodeName") == p5["nodes"][7] for p in http("GET", PODS)[1]["items"]):
            assert time.monotonic() < deadline, "the training job's worker was never placed"
            time.sleep(0.2)
        report = burn_in("quick")
    finally:
        http("DELETE", f"{JOBS}/training")
    states = {n["node"]: n["state"] for n in report["nodes"]}
    assert states.pop(p5["nodes"][7]) == "busy" and set(states.values()) == {"passed"}
    busy = next(n for n in report["nodes"] if n["state"] == "busy")
    assert busy["detail"] == "skipped: pod default/training-worker-0 holds nvidia.com/gpu, vpc.amazonaws.com/efa"
    assert report["passed"] and report["nccl"]["runs"] == [] and "runs no all-reduce" in report["nccl"]["note"]
    checks = {c["name"]: c["found"] for c in report["nodes"][0]["checks"]}
    assert checks == {"gpus": 8, "efa": 32, "dcgm": "pass"}
    _nothing_left(http)


def _env(sandbox, home: Path) -> dict[str, str]:
    return {**os.environ, **sandbox.env, "FMCLUSTER_HOME": str(home), "NO_COLOR": "1"}


def _recorded(sandbox, p5, home) -> dict[str, str]:
    """The environment of a command whose state directory ``home`` records the p5 cluster (made by the fixture, not
    by ``create``)."""
    os.environ["FMCLUSTER_HOME"] = str(home)
    try:
        StateStore().save_cluster(p5["name"], REGION, "eks", p5["spec"], None, "ACTIVE")
    finally:
        del os.environ["FMCLUSTER_HOME"]
    return _env(sandbox, home)


def test_the_installed_command_passes_a_healthy_queue_and_refuses_a_bad_level(sandbox, p5, tmp_path):
    env = _recorded(sandbox, p5, tmp_path / "home")
    bad = run_in_process(["burn-in", p5["name"], "--level", "xlong"], env)
    assert bad.returncode == 2 and "unknown burn-in level 'xlong'" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr and p5["http"]("GET", JOBS)[1]["items"] == []

    sandbox.faults({"nccl_replay_larger_runs": True})
    try:
        ran = subprocess.run([str(Path(sys.executable).parent / "fmcluster"), "burn-in", p5["name"], "--json",
                              "--timeout", "2"], env=env, capture_output=True, text=True, timeout=300)
    finally:
        sandbox.faults({"reset": True})
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert [n["state"] for n in report["nodes"]] == ["passed"] * 8
    assert (report["level"], report["nccl"]["finding"]["kind"], report["passed"]) == ("standard", "none", True)
    _nothing_left(p5["http"])


def test_a_queue_without_ready_nodes_is_refused_before_anything_is_submitted(sandbox, sandbox_env, monkeypatch, p5,
                                                                              tmp_path):
    monkeypatch.setattr(aws, "_target", aws.target())
    aws.configure(None, REGION, sandbox.endpoint_url)
    path = tmp_path / "spec.yaml"
    path.write_text(p5["spec"].replace("  - name: train\n", "  - name: spare\n"))
    spec = load_spec(path).spec
    ctx = Context(cluster=p5["name"], region=REGION, client=lambda service: aws.client(service, REGION),
                  cluster_id="c0ffee12")
    with pytest.raises(UsageError, match="queue spare of .* has no Ready node to burn in") as info:
        registry.get("eks").burn_in(BackendContext(p5["name"], REGION, ctx, spec), BurnInRequest("spare", "quick"),
                                    SINK)
    assert info.value.exit_code == 2
    _nothing_left(p5["http"])


def test_sigterm_during_a_round_deletes_its_jobs_and_a_killed_runs_leftover_goes_next_time(sandbox, p5, tmp_path):
    """A node whose all_reduce_perf never finishes holds its pair's run open; SIGTERM then deletes every job of the
    round and exits 143 (128 + SIGTERM, as Ctrl-C exits 130). A job left by a run killed outright is deleted by the
    next run before it looks for busy nodes; another queue's burn-in job is left alone."""
    env = _recorded(sandbox, p5, tmp_path / "home")
    http = p5["http"]
    sandbox.faults({"node_health": {p5["nodes"][0]: {"never_finishes": True}}})
    proc = subprocess.Popen([str(Path(sys.executable).parent / "fmcluster"), "burn-in", p5["name"], "--timeout", "2"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        err = signal_once_started(proc, lambda: any(j["metadata"]["name"] == "fmcluster-burn-in-train-1"
                                                    for j in http("GET", JOBS)[1]["items"]), signal.SIGTERM, 60, 60)
    finally:
        sandbox.faults({"reset": True})
    assert proc.returncode == 128 + signal.SIGTERM and "ended by SIGTERM" in err and "Traceback" not in err, err
    _nothing_left(http)

    path = tmp_path / "spec.yaml"
    path.write_text(p5["spec"])
    spec = load_spec(path).spec
    job = replace(mpijob.smoke_job(spec, spec.queues[0], 1, None), name="fmcluster-burn-in-train-7")
    left = mpijob.manifest(spec, job, 120, script="sleep 60", hosts=(p5["nodes"][3],),
                           purpose_label="fmcluster.io/burn-in")
    assert http("POST", JOBS, left)[0] == 201
    # Another queue's burn-in job, running beside this one (``create`` gates its queues side by side): not this run's
    # to delete. Pinned to a node that does not exist, it holds none of train's.
    other = replace(mpijob.smoke_job(spec, spec.queues[0].model_copy(update={"name": "other"}), 1, None),
                    name="fmcluster-burn-in-other")
    assert http("POST", JOBS, mpijob.manifest(spec, other, 120, script="sleep 60", hosts=("ip-10-9-9-9",),
                                              purpose_label="fmcluster.io/burn-in"))[0] == 201
    ran = run_in_process(["burn-in", p5["name"], "--level", "quick", "--json"], env)
    assert ran.returncode == 0, ran.stderr
    assert "deleting MPIJob default/fmcluster-burn-in-train-7, left by an earlier burn-in" in ran.stderr
    assert "fmcluster-burn-in-other" not in ran.stderr
    assert [n["state"] for n in json.loads(ran.stdout)["nodes"]] == ["passed"] * 8
    assert [j["metadata"]["name"] for j in http("GET", JOBS)[1]["items"]] == ["fmcluster-burn-in-other"]
    assert http("DELETE", f"{JOBS}/fmcluster-burn-in-other")[0] == 200
    _nothing_left(http)
