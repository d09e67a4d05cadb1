"""EKS preflight against the sandbox, in-process: the account's node-group quotas read from Service Quotas, and the
node images AWS publishes for every Kubernetes version fmcluster offers (1.32 and 1.33 on extended support too).
Offline, ``plan`` and ``validate`` refuse a version without images (tests/spec/test_spec_errors.py cases
eks-version-*)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from fmcluster.backends import registry
from fmcluster.preflight import FIX, preflight_failed
from fmcluster.preflight.common import Context
from fmcluster.spec.models import Spec

REGION = "us-east-1"


def _spec(queues: int = 1, nodes: int = 2, version: str = "1.35") -> Spec:
    return Spec.model_validate({
        "name": f"pf-eks-{uuid.uuid4().hex[:8]}", "region": REGION, "backend": "eks",
        "kubernetes": {"version": version},
        "queues": [{"name": f"q{i}", "instance_type": "p5.48xlarge", "nodes": nodes} for i in range(queues)]})


def _eks_checks(sandbox, spec: Spec) -> dict:
    ctx = Context(spec=spec, region=REGION, client=lambda service: sandbox.client(service, REGION))
    return {r.name: r for r in registry.get(spec.backend).checks.run(ctx, True)}


def test_default_quotas_pass_and_name_their_values(sandbox):
    # AWS General Reference, "Amazon EKS endpoints and quotas": L-6D54EA21 30, L-BD136A63 450
    quotas = _eks_checks(sandbox, _spec(queues=2, nodes=3))["eks quotas"]
    assert quotas.status == "passed", quotas
    assert quotas.summary == "Managed node groups per cluster: 30, need 3; Nodes per managed node group: 450, need 3"


def test_a_lowered_node_group_quota_refuses_with_its_name_and_value(sandbox):
    sandbox.quotas({"region": REGION, "service_code": "eks", "L-6D54EA21": 2})
    results = _eks_checks(sandbox, _spec(queues=2))
    quotas = results["eks quotas"]
    assert quotas.status == "failed" and preflight_failed(results.values())
    assert quotas.details[0] == ("2 queues make 3 managed node groups (one per queue plus the system group); "
                                 f"Managed node groups per cluster (L-6D54EA21) is 2 in {REGION}")
    assert any(d.startswith(FIX) and "--quota-code L-6D54EA21 --desired-value 3" in d for d in quotas.details)


def test_a_lowered_nodes_per_group_quota_refuses_the_queue_with_its_name_and_value(sandbox):
    sandbox.quotas({"region": REGION, "service_code": "eks", "L-BD136A63": 4})
    quotas = _eks_checks(sandbox, _spec(nodes=5))["eks quotas"]
    assert quotas.status == "failed"
    assert quotas.details[0] == (f"queue q0: 5 nodes in one managed node group; Nodes per managed node group "
                                 f"(L-BD136A63) is 4 in {REGION}")


@pytest.mark.parametrize("version", ["1.32", "1.33"])
def test_extended_support_versions_find_their_node_images(sandbox, version):
    """AWS publishes AL2023 node images for 1.32 and 1.33 (EKS User Guide, "Create nodes with optimized Amazon Linux
    AMIs"); the sandbox serves them, so preflight passes there as it would on AWS."""
    images = _eks_checks(sandbox, _spec(version=version))["eks images"]
    assert images.status == "passed", images
    assert f"every queue's node image exists for Kubernetes {version}" == images.summary


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_a_version_without_node_images_is_refused_offline_with_its_position(tmp_path, command):
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: demo\nbackend: eks\nkubernetes: {version: '1.28'}\nqueues:\n"
                    "  - {name: train, instance_type: p5.48xlarge, nodes: 2}\n")
    env = {"PATH": "/usr/bin:/bin", "FMCLUSTER_HOME": str(tmp_path / "state"), "AWS_CONFIG_FILE": "/dev/null",
           "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "NO_COLOR": "1", "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "fmcluster", command, str(spec)], env=env, capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    assert f"{spec}:3:23: kubernetes.version: EKS does not offer Kubernetes 1.28 with the EKS-optimized AL2023 " \
           "node images" in " ".join(result.stderr.split()), result.stderr
    assert "Traceback" not in result.stderr
