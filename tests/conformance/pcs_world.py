"""A PCS user's toolbox for the conformance suite: plain boto3 calls, no fmcluster code."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

REGION = "us-east-2"
ZONE = "us-east-2a"
ACCOUNT = "123456789012"
NODE_GROUP_TAG = "aws:pcs:compute-node-group-id"
MIME_USER_DATA = base64.b64encode(
    b'Content-Type: multipart/mixed; boundary="==B=="\nMIME-Version: 1.0\n\n--==B==\n'
    b'Content-Type: text/x-shellscript; charset="us-ascii"\nMIME-Version: 1.0\n\n#!/bin/bash\necho ok\n\n--==B==--\n'
).decode()


def error_code(excinfo: pytest.ExceptionInfo) -> str:
    return excinfo.value.response["Error"]["Code"]


class Pcs:
    """A PCS user's toolbox in one Region: clients, prerequisites, and waits by polling status."""

    def __init__(self, sandbox, region: str = REGION):
        self.sandbox = sandbox
        self.region = region
        self.pcs = sandbox.client("pcs", region)
        self.ec2 = sandbox.client("ec2", region)
        self.iam = sandbox.client("iam")
        self._profile: str | None = None

    # -- prerequisites ----------------------------------------------------------------------------
    def default_subnet(self, zone: str | None = None) -> dict[str, Any]:
        zone = zone or (ZONE if self.region == REGION else f"{self.region}a")
        return self.ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                                  {"Name": "availability-zone", "Values": [zone]}])["Subnets"][0]

    def security_group(self, vpc_id: str) -> str:
        return self.ec2.create_security_group(GroupName=f"pcs-{uuid.uuid4().hex[:8]}", Description="pcs",
                                              VpcId=vpc_id)["GroupId"]

    def profile(self) -> str:
        if self._profile is None:
            name = f"AWSPCS-conformance-{uuid.uuid4().hex[:6]}"
            self.iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")
            self._profile = self.iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"]
            self.iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
        return self._profile

    def sample_ami(self, arch: str = "x86_64") -> str:
        """AWS's way ("Using sample AMIs", AWS CLI tab): newest sample AMI whose description names 26.05."""
        images = self.ec2.describe_images(Owners=["amazon"], Filters=[
            {"Name": "name", "Values": [f"aws-pcs-sample_ami-al2023-{arch}*"]},
            {"Name": "state", "Values": ["available"]}])["Images"]
        return max((i for i in images if "26.05" in (i.get("Description") or "")),
                   key=lambda i: i["CreationDate"])["ImageId"]

    def launch_template(self, **data: Any) -> dict[str, str]:
        data.setdefault("ImageId", self.sample_ami())
        lt = self.ec2.create_launch_template(LaunchTemplateName=f"pcs-{uuid.uuid4().hex[:10]}",
                                             LaunchTemplateData=data)["LaunchTemplate"]
        return {"id": lt["LaunchTemplateId"], "version": str(lt["LatestVersionNumber"])}

    # -- PCS resources ----------------------------------------------------------------------------
    def cluster(self, version: str = "26.05", subnet: str | None = None, **extra: Any) -> dict[str, Any]:
        subnet = subnet or self.default_subnet()["SubnetId"]
        vpc = self.ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
        networking = {"subnetIds": [subnet], "securityGroupIds": [self.security_group(vpc)]}
        cluster = self.pcs.create_cluster(clusterName=f"c{uuid.uuid4().hex[:10]}", size="SMALL",
                                          scheduler={"type": "SLURM", "version": version}, networking=networking,
                                          **extra)["cluster"]
        return self.wait_cluster(cluster["id"])

    def wait_cluster(self, ident: str, timeout: float = 30) -> dict[str, Any]:
        return self._wait(lambda: self.pcs.get_cluster(clusterIdentifier=ident)["cluster"], timeout)

    def node_group(self, cluster: dict[str, Any], template: dict[str, str], instance_type: str = "m7i.xlarge",
                   low: int = 0, high: int = 2, subnets: list[str] | None = None, **extra: Any) -> dict[str, Any]:
        return self.pcs.create_compute_node_group(
            clusterIdentifier=cluster["id"], computeNodeGroupName=f"g{uuid.uuid4().hex[:10]}",
            subnetIds=subnets or [self.default_subnet()["SubnetId"]], customLaunchTemplate=template,
            iamInstanceProfileArn=self.profile(), instanceConfigs=[{"instanceType": instance_type}],
            scalingConfiguration={"minInstanceCount": low, "maxInstanceCount": high}, **extra)["computeNodeGroup"]

    def wait_group(self, group: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        return self._wait(lambda: self.pcs.get_compute_node_group(
            clusterIdentifier=group["clusterId"], computeNodeGroupIdentifier=group["id"])["computeNodeGroup"], timeout)

    @staticmethod
    def _wait(get, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            current = get()
            if current["status"] not in ("CREATING", "UPDATING", "DELETING") or time.monotonic() > deadline:
                return current
            time.sleep(0.1)

    def instances(self, group_id: str) -> list[dict[str, Any]]:
        reservations = self.ec2.describe_instances(Filters=[
            {"Name": f"tag:{NODE_GROUP_TAG}", "Values": [group_id]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"]
        return [i for r in reservations for i in r["Instances"]]

    def refused(self, call, code: str = "ValidationException") -> dict[str, Any]:
        with pytest.raises(ClientError) as excinfo:
            call()
        assert error_code(excinfo) == code, excinfo.value.response
        return excinfo.value.response

    def delete_everything(self) -> None:
        """Delete every PCS resource in the Region, children first (PCS refuses any other order)."""
        for _ in range(200):
            clusters = self.pcs.list_clusters(maxResults=100)["clusters"]
            if not clusters:
                return
            for cluster in clusters:
                cid = cluster["id"]
                queues = self.pcs.list_queues(clusterIdentifier=cid, maxResults=100)["queues"]
                groups = self.pcs.list_compute_node_groups(clusterIdentifier=cid, maxResults=100)["computeNodeGroups"]
                for queue in queues:
                    self._try(lambda c=cid, q=queue: self.pcs.delete_queue(clusterIdentifier=c,
                                                                           queueIdentifier=q["id"]))
                for group in groups if not queues else []:
                    self._try(lambda c=cid, g=group: self.pcs.delete_compute_node_group(
                        clusterIdentifier=c, computeNodeGroupIdentifier=g["id"]))
                if not queues and not groups:
                    self._try(lambda c=cid: self.pcs.delete_cluster(clusterIdentifier=c))
            time.sleep(0.05)
        raise AssertionError(f"PCS resources left in {self.region}: {self.pcs.list_clusters()['clusters']}")

    @staticmethod
    def _try(call) -> None:
        try:
            call()
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in ("ConflictException", "ResourceNotFoundException"):
                raise


