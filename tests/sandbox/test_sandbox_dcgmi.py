"""The sandbox's ``dcgmi diag -r LEVEL -j`` (fmcluster_sandbox/kube/fake_tools.py, run as the launcher runs it: a
standalone script over a small world file): DCGM 4.x's JSON held to NVIDIA's own schema, read by fmcluster's reader
(fmcluster.backends.burn_in.dcgm), and the ``dcgm_failures`` node fault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fixtures.eks_smoke import mpijob_crd, p5_kueue_job
from fixtures.kube import CLUSTER, conditions, daemonset

from fmcluster.backends.burn_in import dcgm
from fmcluster_sandbox.faults import Faults
from fmcluster_sandbox.kube import fake_tools, launcher_run, node_health

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "data" / "burn-in" / "dcgm_diag_schema-nvidia.json")
                    .read_text())
# NVIDIA's schema names no draft ("http://json-schema.org/schema#"); its keywords are all draft 7's
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)
JOBS = "/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs"
PODS = "/api/v1/namespaces/default/pods"
NODES = ["ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"]
# Each level's tests, typed from NVIDIA/DCGM nvvs/src/NvidiaValidationSuite.cpp FillTestVectors (commit 28bfbd4c):
# level 1 the software (deployment) checks; 2 adds memory and pcie; 3 adds diagnostic, nvbandwidth and the stress
# tests memory_bandwidth, targeted_stress, targeted_power (eud left out: root and a separate package); 4 adds
# pulse_test and memtest. DCGM's "dcgmi diag" reference: "1 Quick deployment checks … 2 Medium validation …
# 3 Long hardware diagnostics … 4 Extended".
LEVEL_1 = {("Deployment", "software")}
LEVEL_2 = LEVEL_1 | {("Hardware", "memory"), ("Integration", "pcie")}
LEVEL_3 = LEVEL_2 | {("Hardware", "diagnostic"), ("Hardware", "nvbandwidth"), ("Stress", "memory_bandwidth"),
                     ("Stress", "targeted_stress"), ("Stress", "targeted_power")}
LEVEL_4 = LEVEL_3 | {("Hardware", "pulse_test"), ("Stress", "memtest")}


def _env(tmp_path: Path, gpus: int = 8, failures: list[dict[str, Any]] | None = None) -> dict[str, str]:
    node = {"gpus": gpus, "gpu_name": "NVIDIA H100 80GB HBM3", "efa": 32, "never_finishes": False,
            "dcgm_failures": failures or []}
    (tmp_path / "world.json").write_text(json.dumps({"hosts": {"w0": node}}))
    return {**os.environ, "FMCLUSTER_SANDBOX_WORLD": str(tmp_path / "world.json"), "FMCLUSTER_SANDBOX_HOST": "w0"}


def _dcgmi(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # -S -I as the launcher's wrappers run it (kube/launcher_run.py)
    return subprocess.run([sys.executable, "-S", "-I", fake_tools.__file__, "dcgmi", *args], env=env,
                          capture_output=True, text=True, timeout=30)


def _tests(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(c["category"], t["name"]) for c in document["DCGM Diagnostic"]["test_categories"] for t in c["tests"]}


def test_a_healthy_8_gpu_node_passes_level_2(tmp_path):
    out = _dcgmi(_env(tmp_path), "diag", "-r", "2", "-j")
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    VALIDATOR.validate(document)
    assert _tests(document) == LEVEL_2
    report = dcgm.parse(out.stdout)
    assert report.passed and report.failing_gpus == () and report.runtime_error is None
    assert len(report.results) == 3 * 8 and {r.status for r in report.results} == {"pass"}
    assert sorted({r.gpus for r in report.results}) == [(i,) for i in range(8)]
    # entity_groups: the H100 SXM5's PCI device id (PCI ID Repository, 10de:2330), one entity per GPU
    assert document["entity_groups"][0]["entities"][7] == {"device_id": "2330", "entity_id": 7}


def test_a_gpu_failing_memory_fails_the_node_at_level_2_not_level_1(tmp_path):
    env = _env(tmp_path, failures=[{"gpu": 3, "test": "memory"}])
    out = _dcgmi(env, "diag", "-r", "2", "-j")
    # a DCGM_ERROR_ISOLATE failure: dcgmi returns DCGM_ST_NVVS_ISOLATE_ERROR, -51, which the shell sees as 205
    assert out.returncode == 205, out.stderr
    VALIDATOR.validate(json.loads(out.stdout))
    report = dcgm.parse(out.stdout)
    assert not report.passed and report.failing_gpus == (3,)
    [failure] = report.failures
    # DCGM_FR_FAULTY_MEMORY's format (dcgmlib/dcgm_errors.h): "Found %d faulty memory elements on GPU %u"
    assert (failure.category, failure.test, failure.messages) == ("Hardware", "memory",
                                                                  ("Found 1 faulty memory elements on GPU 3",))
    warning = json.loads(out.stdout)["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["results"][3]["warnings"]
    assert warning == [{"error_category": 10, "error_id": 52, "error_severity": 2,
                        "warning": "Found 1 faulty memory elements on GPU 3"}]
    quick = _dcgmi(env, "diag", "-r", "1", "-j")  # level 1 runs no memory test: the fault goes unseen
    assert quick.returncode == 0 and dcgm.parse(quick.stdout).passed


@pytest.mark.parametrize(("run", "tests"), [("1", LEVEL_1), ("quick", LEVEL_1), ("2", LEVEL_2), ("medium", LEVEL_2),
                                            ("3", LEVEL_3), ("long", LEVEL_3), ("4", LEVEL_4), ("xlong", LEVEL_4)])
def test_each_level_runs_the_tests_dcgm_lists_for_it(tmp_path, run, tests):
    out = _dcgmi(_env(tmp_path, gpus=2), "diag", "-r", run, "-j")
    assert out.returncode == 0 and _tests(json.loads(out.stdout)) == tests


@pytest.mark.parametrize("run", ["5", "0", "x"])
def test_an_unknown_level_gets_dcgmis_parse_error(tmp_path, run):
    out = _dcgmi(_env(tmp_path), "diag", "-r", run, "-j")
    # modules/diag/DcgmDiagCommon.cpp's "Invalid value '%s' specified for -r." through dcgmi/CommandLineParser's
    # "Error: " … "." and main_dcgmi.cpp's runtime_error; main returns -2 (254 to the shell)
    assert (out.returncode, out.stdout) == (254, "")
    assert out.stderr == (f"Error: Invalid value '{run}' specified for -r..\n"
                          "An error occurred trying to parse the command line.\n")


def test_a_node_without_gpus_cannot_run_the_diagnostic(tmp_path):
    out = _dcgmi(_env(tmp_path, gpus=0), "diag", "-r", "1", "-j")
    assert out.returncode == 221  # DCGM_ST_GROUP_IS_EMPTY, -35
    VALIDATOR.validate(json.loads(out.stdout))
    report = dcgm.parse(out.stdout)
    assert not report.passed and report.results == ()
    assert report.runtime_error == ("Error: Unable to complete diagnostic for entities *,cpu:*. Return: (-35) : "
                                    "The specified group is empty, and this operation is incompatible with an "
                                    "empty group\n")


def test_the_fault_reaches_the_node_and_bad_ones_are_refused():
    faults = Faults()
    faults.update({"node_health": {"i-b": {"dcgm_failures": [{"gpu": 1, "test": "pcie"}]}}})
    node = {"metadata": {"name": "b", "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
            "spec": {"providerID": "aws:///us-east-1a/i-b"}, "status": {"capacity": {"vpc.amazonaws.com/efa": "32"}}}
    assert node_health.node_facts(node, faults)["dcgm_failures"] == [{"gpu": 1, "test": "pcie"}]
    for bad in ([{"gpu": 1, "test": "gpu_burn"}], [{"gpu": -1, "test": "memory"}], [{"gpu": 1}], {"gpu": 1}):
        with pytest.raises(ValueError):
            faults.update({"node_health": {"n": {"dcgm_failures": bad}}})
    assert set(faults.to_json()["node_health"]) == {"i-b"}


def test_the_faults_route_refuses_an_unknown_test_naming_the_tests(sandbox):
    with pytest.raises(urllib.error.HTTPError) as exc:
        sandbox.faults({"node_health": {"n": {"dcgm_failures": [{"gpu": 0, "test": "gpu_burn"}]}}})
    assert exc.value.code == 400
    error = json.loads(exc.value.read())["error"]
    assert "'gpu_burn'" in error
    assert ("software, memory, pcie, diagnostic, nvbandwidth, memory_bandwidth, targeted_stress, targeted_power, "
            "pulse_test, memtest") in error


@pytest.mark.skipif(launcher_run.unavailable() is not None, reason=str(launcher_run.unavailable()))
def test_an_mpijob_on_the_emulated_nodes_finds_the_faulted_gpu(server, k8s):
    """The fault reaches a job's dcgmi through the operator's world file: a launcher running ``dcgmi diag`` on both
    workers gets a passing node and GPU 3 failing memory on the faulted one, and fails as mpirun does."""
    server["kube"].faults = faults = Faults()
    try:
        server["eks"].instances[CLUSTER] = [{"name": name, "instance_type": "p5.48xlarge",
                                             "instance_id": f"i-0123456789abcdef{i}", "nodegroup": "train",
                                             "labels": {"fmcluster.io/queue": "train"}, "efa_interfaces": 32}
                                            for i, name in enumerate(NODES)]
        for name, image in (("nvidia", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"),
                            ("efa", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin:"
                                    "v0.5.6")):
            assert k8s.call("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", daemonset(name, image))[0] == 201
        assert k8s.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", mpijob_crd())[0] == 201
        assert k8s.call("POST", "/api/v1/namespaces", {"metadata": {"name": "mpi-operator"}})[0] == 201
        labels = {"app": "mpi-operator"}
        operator = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mpi-operator"},
                    "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                        "containers": [{"name": "mpi-operator", "image": "mpioperator/mpi-operator:0.8.0",
                                        "resources": {"requests": {"cpu": "100m"}}}]}}}}
        assert k8s.call("POST", "/apis/apps/v1/namespaces/mpi-operator/deployments", operator)[0] == 201
        faults.update({"node_health": {NODES[1]: {"dcgm_failures": [{"gpu": 3, "test": "memory"}]}}})
        _, manifest = p5_kueue_job()
        launcher = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
        launcher["command"] = ["/bin/bash", "-c", "/opt/amazon/openmpi/bin/mpirun --allow-run-as-root -np 2 -N 1 "
                                                  "dcgmi diag -r 2 -j"]
        assert k8s.call("POST", JOBS, manifest)[0] == 201
        deadline = time.monotonic() + 30
        while not any(conditions(job := k8s.call("GET", f"{JOBS}/fmcluster-smoke-train")[1]).get(t, {}).get("status")
                      == "True" for t in ("Succeeded", "Failed")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert conditions(job)["Failed"]["status"] == "True"
        pods = k8s.call("GET", f"{PODS}?labelSelector=training.kubeflow.org/job-role%3Dlauncher")[1]["items"]
        req = urllib.request.Request(f"{k8s.url}/k8s/{CLUSTER}{PODS}/{pods[0]['metadata']['name']}/log",
                                     headers={"Authorization": f"Bearer {k8s.token}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            log = resp.read().decode()
        first, end = json.JSONDecoder().raw_decode(log)
        second = log[end:].lstrip()
        healthy, faulted = dcgm.parse(json.dumps(first)), dcgm.parse(second)
        assert healthy.passed and len(healthy.results) == 3 * 8
        assert not faulted.passed and faulted.failing_gpus == (3,) and faulted.failures[0].test == "memory"
        assert "Exit code:    205" in log  # mpirun's abort names the rank's exit code, DCGM_ST_NVVS_ISOLATE_ERROR
    finally:
        server["kube"].faults = None
        k8s.call("DELETE", f"{JOBS}/fmcluster-smoke-train")
