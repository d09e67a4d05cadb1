"""``fmcluster smoke`` on EKS against the sandbox's Kubernetes API, in process: without the MPI Operator's CRD it says
so; with it the job is submitted (the API holds it to the CRD), a leftover of the same name is replaced first, and
the job is deleted at the timeout and on Ctrl-C. This cluster has the CRD but no MPI Operator running (nor nodes), so
no job ever produces a result here."""

from __future__ import annotations

import time

import pytest
import yaml
from fixtures.eks_smoke import JOBS, REGION, mpijob_crd, p5_kueue_job
from fixtures.kube import cluster_api

from fmcluster.backends.eks.smoke import submit as smoke_eks
from fmcluster.output import ui
from fmcluster.verbs.connect.smoke_command import SINK

pytest.importorskip("fmcluster_sandbox.eks")

def test_submitted_then_deleted_at_the_timeout_and_on_ctrl_c(sandbox, smoke_cluster, api, monkeypatch):
    job, manifest = p5_kueue_job()
    missing = smoke_eks.submit_and_wait(api, job, manifest, time.monotonic() + 5, SINK)
    assert missing.state == "NO_MPIJOB_KIND" and "MPI Operator is not installed" in missing.detail

    http = cluster_api(sandbox.endpoint_url, smoke_cluster, REGION)
    crd = mpijob_crd()
    assert http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201

    timed_out = smoke_eks.submit_and_wait(api, job, manifest, time.monotonic() + 1, SINK)
    assert timed_out.state == "TIMEOUT", timed_out
    assert (timed_out.log, http("GET", JOBS)[1]["items"]) == ("", [])

    # A job a killed run left behind (same name): replaced, not a conflict; then Ctrl-C while waiting deletes it.
    leftover = yaml.safe_load(yaml.safe_dump(manifest))
    leftover["spec"]["runPolicy"]["activeDeadlineSeconds"] = 7
    assert http("POST", JOBS, leftover)[0] == 201
    seen = []

    def interrupted(self, text: str, elapsed: float) -> None:
        seen.append(http("GET", f"{JOBS}/{job.name}")[1]["spec"]["runPolicy"]["activeDeadlineSeconds"])
        raise KeyboardInterrupt

    monkeypatch.setattr(ui.Ticker, "update", interrupted)
    with pytest.raises(KeyboardInterrupt):
        smoke_eks.submit_and_wait(api, job, manifest, time.monotonic() + 60, SINK)
    assert seen == [60]  # the new job, not the leftover
    assert http("GET", JOBS)[1]["items"] == []


def test_a_refused_job_is_reported_not_raised(sandbox, smoke_cluster, api):
    job, manifest = p5_kueue_job()
    manifest["spec"]["runPolicy"]["cleanupPolicy"] = "Running"  # no such field: strict validation refuses it
    http = cluster_api(sandbox.endpoint_url, smoke_cluster, REGION)
    if http("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/mpijobs.kubeflow.org")[0] == 404:
        crd = mpijob_crd()
        assert http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    refused = smoke_eks.submit_and_wait(api, job, manifest, time.monotonic() + 5, SINK)
    assert refused.state == "REFUSED" and "cleanupPolicy" in refused.detail, refused
    assert http("GET", JOBS)[1]["items"] == []
