"""The sandbox runs MPIJobs (fmcluster_sandbox/kube/mpi_operator.py): the MPI Operator's pods and conditions over the
in-process Kubernetes API (tests/fixtures/kube.py), the launcher's unchanged command on emulated nodes, and the fake
tools' output held to real captures (tests/data/nccl-tests/SOURCES.md) and read by fmcluster's own parsers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fixtures.eks_smoke import mpijob_crd, p5_kueue_job
from fixtures.kube import CLUSTER, conditions, daemonset

from fmcluster.backends.smoke import checks, nccl
from fmcluster_sandbox.faults import Faults
from fmcluster_sandbox.kube import fake_tools, launcher_run, node_health

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "nccl-tests"
JOBS = "/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs"
PODS = "/api/v1/namespaces/default/pods"
NODES = ["ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"]
QUEUE = {"fmcluster.io/queue": "train"}

needs_unshare = pytest.mark.skipif(launcher_run.unavailable() is not None, reason=str(launcher_run.unavailable()))


def _p5(name: str, index: int) -> dict[str, Any]:
    return {"name": name, "instance_type": "p5.48xlarge", "instance_id": f"i-0123456789abcdef{index}",
            "nodegroup": "train", "labels": QUEUE, "efa_interfaces": 32}


def _cluster(server, k8s, operator: bool = True) -> None:
    """Two p5.48xlarge nodes with NVIDIA's and AWS's device plugins, the MPIJob CRD and, unless not, the operator."""
    server["eks"].instances[CLUSTER] = [_p5(name, i) for i, name in enumerate(NODES)]
    for name, image in (("nvidia", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"),
                        ("efa", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.6")):
        assert k8s.call("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", daemonset(name, image))[0] == 201
    assert k8s.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", mpijob_crd())[0] == 201
    if operator:
        assert k8s.call("POST", "/api/v1/namespaces", {"metadata": {"name": "mpi-operator"}})[0] == 201
        labels = {"app": "mpi-operator"}
        container = {"name": "mpi-operator", "image": "mpioperator/mpi-operator:0.8.0",
                     "resources": {"requests": {"cpu": "100m"}}}
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mpi-operator"},
                      "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                                                                                  "spec": {"containers": [container]}}}}
        assert k8s.call("POST", "/apis/apps/v1/namespaces/mpi-operator/deployments", deployment)[0] == 201


def _until(k8s, done, seconds: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        job = k8s.call("GET", f"{JOBS}/fmcluster-smoke-train")[1]
        if done(job) or time.monotonic() > deadline:
            return job
        time.sleep(0.2)


def _log(k8s, pod: str) -> str:
    req = urllib.request.Request(f"{k8s.url}/k8s/{CLUSTER}{PODS}/{pod}/log?container=launcher",
                                 headers={"Authorization": f"Bearer {k8s.token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        return resp.read().decode()


def _pods(k8s, role: str) -> list[dict[str, Any]]:
    selector = f"training.kubeflow.org/job-name%3Dfmcluster-smoke-train,training.kubeflow.org/job-role%3D{role}"
    return k8s.call("GET", f"{PODS}?labelSelector={selector}")[1]["items"]


def _finished(job: dict[str, Any]) -> bool:
    return any(conditions(job).get(t, {}).get("status") == "True" for t in ("Succeeded", "Failed"))


def test_without_the_operator_running_a_job_gets_no_status(server, k8s):
    _cluster(server, k8s, operator=False)
    _, manifest = p5_kueue_job()
    assert k8s.call("POST", JOBS, manifest)[0] == 201
    assert "status" not in k8s.call("GET", f"{JOBS}/fmcluster-smoke-train")[1]
    assert k8s.call("GET", PODS)[1]["items"] == []


@needs_unshare
def test_the_operator_runs_the_smoke_job_on_healthy_p5_nodes(server, k8s):
    _cluster(server, k8s)
    job, manifest = p5_kueue_job()
    assert k8s.call("POST", JOBS, manifest)[0] == 201
    first = k8s.call("GET", f"{JOBS}/fmcluster-smoke-train")[1]
    # mpi_job_controller.go: "MPIJob <ns>/<name> is created.", then running once the launcher and every worker run
    created = conditions(first)["Created"]
    assert (created["status"], created["reason"], created["message"]) == (
        "True", "MPIJobCreated", "MPIJob default/fmcluster-smoke-train is created.")
    workers = _pods(k8s, "worker")
    assert [(w["metadata"]["name"], w["spec"]["nodeName"], w["spec"]["hostname"], w["status"]["phase"])
            for w in workers] == [(f"fmcluster-smoke-train-worker-{i}", NODES[i], f"fmcluster-smoke-train-worker-{i}",
                                   "Running") for i in range(2)]  # one per node: each takes all 8 GPUs
    assert conditions(first)["Running"]["reason"] == "MPIJobRunning"
    (launcher,) = _pods(k8s, "launcher")
    assert launcher["metadata"]["name"].startswith("fmcluster-smoke-train-launcher-")

    done = _until(k8s, _finished)
    succeeded = conditions(done)["Succeeded"]
    assert (succeeded["status"], succeeded["reason"], succeeded["message"]) == (
        "True", "MPIJobSucceeded", "MPIJob default/fmcluster-smoke-train successfully completed.")
    assert done["status"]["replicaStatuses"]["Launcher"] == {"succeeded": 1}
    assert _pods(k8s, "worker") == []  # cleanPodPolicy Running: the running workers are deleted at the end
    log = _log(k8s, launcher["metadata"]["name"])
    per_node, overall = checks.judge(log, _expectations())
    assert {node: [(c.name, c.status) for c in found] for node, found in per_node.items()} == {
        f"fmcluster-smoke-train-worker-{i}": [("gpus", "passed"), ("efa_provider", "passed"),
                                              ("efa_devices", "passed")] for i in range(2)}
    assert [(c.name, c.status) for c in overall] == [("nodes", "passed"), ("nccl_all_reduce", "passed"),
                                                     ("efa_bandwidth", "passed")]
    assert k8s.call("DELETE", f"{JOBS}/fmcluster-smoke-train")[0] == 200
    assert k8s.call("GET", PODS)[1]["items"] == []  # the launcher went with its job


@needs_unshare
def test_a_node_that_never_finishes_fails_the_job_at_its_deadline(server, k8s):
    server["kube"].faults = faults = Faults()
    try:
        _cluster(server, k8s)
        faults.update({"node_health": {"i-0123456789abcdef1": {"never_finishes": True}}})  # by instance id
        _, manifest = p5_kueue_job()
        manifest["spec"]["runPolicy"]["activeDeadlineSeconds"] = 2
        assert k8s.call("POST", JOBS, manifest)[0] == 201
        started = time.monotonic()
        failed = conditions(_until(k8s, _finished))["Failed"]
        assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", "Job was active longer than "
                                                         "specified deadline")
        assert time.monotonic() - started < 10
    finally:
        server["kube"].faults = None


def test_where_launchers_cannot_run_the_launcher_pod_fails_saying_why(server, k8s, monkeypatch):
    why = "unshare -rm is refused here: unshare: unshare failed: Operation not permitted"
    monkeypatch.setattr(launcher_run, "unavailable", lambda: why)
    _cluster(server, k8s)
    _, manifest = p5_kueue_job()
    assert k8s.call("POST", JOBS, manifest)[0] == 201
    failed = conditions(_until(k8s, _finished, seconds=5))["Failed"]
    assert (failed["reason"], failed["message"]) == ("BackoffLimitExceeded/SandboxCannotRun",
                                                     f"Job has reached the specified backoff limit: {why}")
    (launcher,) = _pods(k8s, "launcher")
    assert launcher["status"]["phase"] == "Failed" and _log(k8s, launcher["metadata"]["name"]) == why


def _expectations() -> checks.Expectations:
    from fixtures.lifecycle import CONFIGS

    from fmcluster.spec import load_spec

    spec = load_spec(CONFIGS / "p5-kueue-eks.yaml").spec
    return checks.expectations(spec, None, None)


# -- the fake tools' formats ---------------------------------------------------------------------------------
def _world(tmp_path: Path, gpus: int = 8, efa: int = 32) -> dict[str, str]:
    hosts = {h: {"gpus": gpus, "gpu_name": "NVIDIA H100 80GB HBM3", "efa": efa, "never_finishes": False}
             for h in ("w0", "w1")}
    rows = [list(r) for r in node_health.measured_rows("aws-samples-2x-p5.48xlarge.txt")]
    (tmp_path / "world.json").write_text(json.dumps({"hosts": hosts, "nccl": {
        "rows": rows, "source": "x", "factor": 1.0, "missing": None}}))
    (tmp_path / "hostfile").write_text("w0.j.default.svc slots=8\nw1.j.default.svc slots=8\n")
    return {**os.environ, "FMCLUSTER_SANDBOX_WORLD": str(tmp_path / "world.json"), "FMCLUSTER_SANDBOX_HOST": "w0",
            "OMPI_MCA_orte_default_hostfile": str(tmp_path / "hostfile"), "OMPI_COMM_WORLD_SIZE": "16",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}


def _tool(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # -I as the launcher's wrappers run it: fake_tools.py's folder (kube/selectors.py…) must not shadow the stdlib
    return subprocess.run([sys.executable, "-S", "-I", fake_tools.__file__, *args], env=env, capture_output=True,
                          text=True, timeout=30)


def test_all_reduce_perf_prints_the_captured_rows_in_nccl_tests_layout(tmp_path):
    out = _tool(_world(tmp_path), "all_reduce_perf", "-b", "8M", "-e", "4G", "-f", "2", "-g", "1")
    assert out.returncode == 0, out.stderr
    fake = nccl.parse(out.stdout)
    real = nccl.parse((CAPTURES / "aws-samples-2x-p5.48xlarge.txt").read_text())
    # the aws-samples run's rows from 8 MiB to 4 GiB, figure for figure
    assert fake.rows == [r for r in real.rows if 8 * 2 ** 20 <= r.size_bytes <= 4 * 2 ** 30] and len(fake.rows) == 10
    full = (CAPTURES / "2x-h100-full-run.txt").read_text().splitlines()
    lines = out.stdout.splitlines()
    # column headers verbatim, and each row's columns end where a whole nccl-tests run's do
    headers = [line for line in full if line.startswith("#   ") or line.startswith("#       ")
               or line.startswith("#        (B)")]
    assert headers and all(h in lines for h in headers), headers

    def ends(line: str) -> list[int]:
        return [m.end() for m in re.finditer(r"\S+", line)]

    row = next(line for line in full if line.strip().startswith("8388608 "))
    assert ends(next(line for line in lines if line.strip().startswith("8388608 "))) == ends(row)
    assert fake.out_of_bounds == 0 and fake.avg_busbw_gb_s is not None
    assert re.search(r"^# Avg bus bandwidth    : [0-9.]+ $", out.stdout, re.M)


def test_nvidia_smi_and_fi_info_print_their_formats(tmp_path):
    env = _world(tmp_path)
    gpus = _tool(env, "nvidia-smi", "-L").stdout.splitlines()
    # NVIDIA's nvidia-smi -L: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-<uuid>)"
    assert len(gpus) == 8 and all(re.fullmatch(rf"GPU {i}: NVIDIA H100 80GB HBM3 \(UUID: GPU-[0-9a-f-]{{36}}\)", g)
                                  for i, g in enumerate(gpus)), gpus
    efa = _tool(env, "fi_info", "-p", "efa", "-t", "FI_EP_RDM").stdout
    # AWS "Get started with EFA", confirming the install: one provider block per device
    assert efa.count("provider: efa\n") == 32 and efa.count("    type: FI_EP_RDM\n") == 32
    assert _tool(env, "hostname", "-s").stdout == "w0\n"
    none = _tool(_world(tmp_path, gpus=0, efa=0), "nvidia-smi", "-L")
    assert (none.returncode, none.stdout) == (6, "No devices were found\n")
    assert _tool(_world(tmp_path, gpus=0, efa=0), "fi_info", "-p", "efa").returncode == 1


def test_a_rank_without_its_gpu_fails_as_cuda_does(tmp_path):
    env = {**_world(tmp_path, gpus=7), "OMPI_COMM_WORLD_RANK": "7", "OMPI_COMM_WORLD_LOCAL_RANK": "7"}
    failed = _tool(env, "all_reduce_perf", "-b", "8M", "-e", "16M")
    assert failed.returncode == 1 and "'invalid device ordinal'" in failed.stdout


def test_bandwidth_is_measured_or_absent_and_faults_scale_it():
    def node(name: str, instance_type: str = "p5.48xlarge") -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": instance_type}},
                "spec": {"providerID": f"aws:///us-east-1a/i-{name}"}, "status": {"capacity": {"vpc.amazonaws.com/efa":
                                                                                               "32"}}}

    faults = Faults()
    nodes = [node("a"), node("b")]
    facts = [node_health.node_facts(n, faults) for n in nodes]
    assert (facts[0]["gpus"], facts[0]["efa"], facts[0]["gpu_name"]) == (8, 32, "NVIDIA H100 80GB HBM3")
    assert node_health.bandwidth(nodes, facts, faults)["factor"] == 1.0
    faults.update({"node_health": {"i-b": {"efa_devices_missing": 8}}, "slow_link": ["a", "b", 0.9]})
    facts = [node_health.node_facts(n, faults) for n in nodes]
    assert node_health.bandwidth(nodes, facts, faults)["factor"] == 0.75  # 24 of 32 devices, below the link's 0.9
    four = [*nodes, node("c"), node("d")]
    missing = node_health.bandwidth(four, [node_health.node_facts(n, faults) for n in four], faults)
    assert missing["rows"] is None and "p5.48xlarge x 4 node(s)" in missing["missing"]
    # burn-in's narrowing compares runs of one size: the switch replays the 2-node capture for them, faults and all
    faults.update({"nccl_replay_larger_runs": True})
    replayed = node_health.bandwidth(four, [node_health.node_facts(n, faults) for n in four], faults)
    assert (replayed["source"], replayed["factor"]) == ("aws-samples-2x-p5.48xlarge.txt", 0.75)
    with pytest.raises(ValueError, match="nccl_replay_larger_runs must be true or false"):
        faults.update({"nccl_replay_larger_runs": "yes"})
    faults.update({"reset": True})
    assert node_health.bandwidth(four, [node_health.node_facts(n, faults) for n in four], faults)["rows"] is None


@pytest.mark.parametrize("change", [{"node_health": {"n": {"gpus_missing": -1}}},
                                    {"node_health": {"n": {"gpu_missing": 1}}},
                                    {"node_health": {"n": {"never_finishes": 1}}},
                                    {"slow_link": ["a", "b", 2]}, {"slow_link": ["a", 0.5]}])
def test_bad_node_faults_are_refused(change):
    faults = Faults()
    with pytest.raises(ValueError):
        faults.update(change)
    assert faults.to_json()["node_health"] == {} and faults.to_json()["slow_link"] is None
