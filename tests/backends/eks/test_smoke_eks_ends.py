"""Issue 35 part 5: how ``fmcluster smoke`` on EKS ends when no result comes. The MPI Operator marks every MPIJob it
reconciles ``Created`` at once (kubeflow/mpi-operator v2 ``mpi_job_controller.go``, ``syncHandler``), so a job with no
condition for a while has no operator acting on it, and this cluster has the CRD alone (the sandbox's operator acts
only where its Deployment runs): the wait ends there, exit 1, with
that reason. SIGTERM and SIGHUP delete the job as Ctrl-C does, and exit 128 + the signal (Ctrl-C gives 130)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.eks_smoke import JOBS, REGION, mpijob_crd, p5_kueue_job
from fixtures.kube import cluster_api

from fmcluster.backends.eks.smoke import submit as smoke_eks
from fmcluster.state.store import StateStore
from fmcluster.verbs.connect.smoke_command import SINK

ROOT = Path(__file__).resolve().parents[3]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture
def http(sandbox, smoke_cluster):
    call = cluster_api(sandbox.endpoint_url, smoke_cluster, REGION)
    if call("GET", f"{CRDS}/mpijobs.kubeflow.org")[0] == 404:
        assert call("POST", CRDS, mpijob_crd())[0] == 201
    return call


def test_a_job_no_operator_acts_on_ends_before_the_timeout(api, http, monkeypatch):
    # polled every 0.2 s (not the product's 2 s), so the silence ends the wait a second in, not four
    monkeypatch.setattr(smoke_eks, "POLL_S", 0.2)
    monkeypatch.setattr(smoke_eks, "OPERATOR_SILENT_S", 1.0)
    job, manifest = p5_kueue_job()
    started = time.monotonic()
    outcome = smoke_eks.submit_and_wait(api, job, manifest, started + 120, SINK)
    assert outcome.state == "NO_OPERATOR", outcome
    assert "set no condition on the job" in outcome.detail and "kubectl -n mpi-operator get pods" in outcome.detail
    assert time.monotonic() - started < 60  # the silence, not the two-minute timeout, ended it
    assert http("GET", JOBS)[1]["items"] == []


def test_a_job_the_operator_marked_is_waited_for(api, http, monkeypatch):
    """Once the job carries the operator's Created condition the wait goes on to the timeout."""
    monkeypatch.setattr(smoke_eks, "POLL_S", 0.2)
    monkeypatch.setattr(smoke_eks, "OPERATOR_SILENT_S", 0.5)
    job, manifest = p5_kueue_job()
    manifest["status"] = {"conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated",
                                          "message": f"MPIJob default/{job.name} is created.",
                                          "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    created = http("POST", JOBS, manifest)
    assert created[0] == 201, created
    if not (created[1].get("status") or {}).get("conditions"):  # the CRD's status subresource drops it on create
        status = http("PUT", f"{JOBS}/{job.name}/status", {**created[1], "status": manifest["status"]})
        assert status[0] == 200, status
    # submit_and_wait deletes a leftover of the same name first: wait on this one directly
    rtype = api.resource_type("kubeflow.org/v2beta1", "MPIJob")
    state, detail = smoke_eks._wait(api, rtype, job, time.monotonic() + 1.5, lambda text, elapsed: None)
    assert state == "TIMEOUT" and "last seen: Created: MPIJob default/" in detail, detail
    assert http("DELETE", f"{JOBS}/{job.name}")[0] == 200


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_deletes_the_job_and_exits_like_ctrl_c(sandbox, smoke_cluster, http, tmp_path, monkeypatch,
                                                         signum):
    home = tmp_path / "home"
    monkeypatch.setenv("FMCLUSTER_HOME", str(home))
    spec = (ROOT / "configs" / "p5-kueue-eks.yaml").read_text()
    spec = spec.replace("name: p5-kueue", f"name: {smoke_cluster['name']}").replace("region: us-east-1",
                                                                                 f"region: {REGION}")
    assert f"name: {smoke_cluster['name']}" in spec and f"region: {REGION}" in spec
    StateStore().save_cluster(smoke_cluster["name"], REGION, "eks", spec, None, "ACTIVE")
    env = {**os.environ, **sandbox.env, "FMCLUSTER_HOME": str(home), "NO_COLOR": "1"}
    command = [str(Path(sys.executable).parent / "fmcluster"), "smoke", smoke_cluster["name"], "--timeout", "3"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not http("GET", JOBS)[1]["items"] and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert http("GET", JOBS)[1]["items"], "the job was never submitted"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # 128 + the signal's number, as Ctrl-C's 130 is 128 + SIGINT; the job deleted before the process ended
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert f"ended by {signal.Signals(signum).name}" in err and "Traceback" not in err, err
    assert http("GET", JOBS)[1]["items"] == []
