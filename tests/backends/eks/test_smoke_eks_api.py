"""``fmcluster smoke`` on EKS against the sandbox's Kubernetes API, in process: without the MPI Operator's CRD it says
so; with it the job is submitted (the API holds it to the CRD), a leftover of the same name is replaced first, and
the job is deleted at the timeout and on Ctrl-C. The sandbox runs no pods, so no job ever produces a result here."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import yaml
from test_sandbox_kube import cluster_api

from fmcluster.backends.eks.kubernetes.access import KubeApi
from fmcluster.connection import aws
from fmcluster.engine import Context
from fmcluster.output import ui
from fmcluster.spec import load_spec
from fmcluster.verbs.connect import mpijob, smoke, smoke_eks

pytest.importorskip("fmcluster_sandbox.eks")

ROOT = Path(__file__).resolve().parents[3]
REGION = "us-east-2"
ZONES = ("us-east-2a", "us-east-2b")
JOBS = "/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs"


@pytest.fixture(scope="module")
def cluster(sandbox) -> dict:
    """An ACTIVE EKS cluster whose creator (the sandbox's default keys) is admin, as DescribeCluster gives it."""
    sandbox.faults({"latency": {"eks.cluster": 0}})
    eks, ec2, iam = (sandbox.client(s, REGION) for s in ("eks", "ec2", "iam"))
    suffix = uuid.uuid4().hex[:8]
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"Service": "eks.amazonaws.com"}}]}
    role = iam.create_role(RoleName=f"smoke-{suffix}", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    subnets = [ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                             {"Name": "availability-zone", "Values": [zone]}])["Subnets"][0]["SubnetId"]
               for zone in ZONES]
    name = f"smoke-{suffix}"
    eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets},
                       accessConfig={"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True})
    sandbox.faults({"reset": True})
    return eks.describe_cluster(name=name)["cluster"]


@pytest.fixture
def api(sandbox, sandbox_env, monkeypatch, cluster) -> KubeApi:
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, REGION, sandbox.endpoint_url)
    ctx = Context(cluster=cluster["name"], region=REGION, client=lambda service: aws.client(service, REGION),
                  cluster_id="c0ffee12")
    found = KubeApi.of(ctx, cluster["name"])
    assert found is not None
    return found


def _job() -> tuple[mpijob.SmokeJob, dict]:
    spec = load_spec(ROOT / "configs" / "p5-kueue-eks.yaml").spec
    expect = smoke.expectations(spec, None, None)
    job = mpijob.smoke_job(spec, expect.queue, expect.nodes, None)
    return job, mpijob.manifest(spec, job, 60)


def _mpijob_crd() -> dict:
    """The MPIJob CRD as fmcluster ships the MPI Operator's release (held to upstream's sha256 elsewhere)."""
    from fmcluster.backends.eks.software import releases

    (crd,) = [c for c in releases.crds(releases.MPI_OPERATOR) if c["metadata"]["name"] == "mpijobs.kubeflow.org"]
    return crd


def test_submitted_then_deleted_at_the_timeout_and_on_ctrl_c(sandbox, cluster, api, monkeypatch):
    job, manifest = _job()
    missing = smoke_eks._submit_and_wait(api, job, manifest, time.monotonic() + 5)
    assert missing.state == "NO_MPIJOB_KIND" and "MPI Operator is not installed" in missing.detail

    http = cluster_api(sandbox.endpoint_url, cluster, REGION)
    crd = _mpijob_crd()
    assert http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201

    timed_out = smoke_eks._submit_and_wait(api, job, manifest, time.monotonic() + 1)
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
        smoke_eks._submit_and_wait(api, job, manifest, time.monotonic() + 60)
    assert seen == [60]  # the new job, not the leftover
    assert http("GET", JOBS)[1]["items"] == []


def test_a_refused_job_is_reported_not_raised(sandbox, cluster, api):
    job, manifest = _job()
    manifest["spec"]["runPolicy"]["cleanupPolicy"] = "Running"  # no such field: strict validation refuses it
    http = cluster_api(sandbox.endpoint_url, cluster, REGION)
    if http("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/mpijobs.kubeflow.org")[0] == 404:
        crd = _mpijob_crd()
        assert http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    refused = smoke_eks._submit_and_wait(api, job, manifest, time.monotonic() + 5)
    assert refused.state == "REFUSED" and "cleanupPolicy" in refused.detail, refused
    assert http("GET", JOBS)[1]["items"] == []
