"""Issue 35 part 5: the cluster list (`fmcluster status` without NAME) shows AWS's status for each local record it
can reach, so a cluster AWS no longer holds is NOT_FOUND with a note, never the ACTIVE its local record kept."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from fmcluster.connection import aws
from fmcluster.render.common import CLUSTER_TAG
from fmcluster.state.store import StateStore
from fmcluster.verbs.lifecycle.status import list_clusters

pytest.importorskip("fmcluster_sandbox.eks")

ROOT = Path(__file__).resolve().parents[3]
REGION = "us-east-2"
ZONES = ("us-east-2a", "us-east-2b")


def _eks_cluster(sandbox, name: str) -> None:
    """An EKS cluster carrying fmcluster's tag, made straight through the EKS API (DescribeCluster: ACTIVE)."""
    sandbox.faults({"latency": {"eks.cluster": 0}})
    eks, ec2, iam = (sandbox.client(s, REGION) for s in ("eks", "ec2", "iam"))
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"Service": "eks.amazonaws.com"}}]}
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    subnets = [ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                             {"Name": "availability-zone", "Values": [zone]}])["Subnets"][0]["SubnetId"]
               for zone in ZONES]
    eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets}, tags={CLUSTER_TAG: name})
    sandbox.faults({"reset": True})
    assert eks.describe_cluster(name=name)["cluster"]["status"] == "ACTIVE"


def test_a_record_of_a_cluster_aws_no_longer_has_is_not_found(sandbox, sandbox_env, tmp_path, monkeypatch):
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, REGION, sandbox.endpoint_url)
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    name = f"listed-{uuid.uuid4().hex[:8]}"
    spec = (ROOT / "configs" / "p5-kueue-eks.yaml").read_text()
    spec = spec.replace("name: p5-kueue", f"name: {name}").replace("region: us-east-1", f"region: {REGION}")
    _eks_cluster(sandbox, name)
    store = StateStore()
    store.save_cluster(name, REGION, "eks", spec, None, "ACTIVE", endpoint_url=aws.target_label())

    (row,) = [r for r in list_clusters(StateStore(readonly=True)) if r["name"] == name]
    assert (row["status"], row["source"], row.get("note")) == ("ACTIVE", "local", None), row

    sandbox.client("eks", REGION).delete_cluster(name=name)  # gone from AWS behind fmcluster's back
    (row,) = [r for r in list_clusters(StateStore(readonly=True)) if r["name"] == name]
    assert row["status"] == "NOT_FOUND", row
    assert f"AWS holds no EKS cluster {name} in {REGION} (the local record says ACTIVE)" in row["note"], row
    assert f"`fmcluster destroy {name} --yes`" in row["note"]
