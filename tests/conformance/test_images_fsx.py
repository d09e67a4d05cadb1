"""AMIs and FSx as a boto3 client finds them in the sandbox: AWS's PCS sample AMIs and ParallelCluster AMIs,
FSx ids and errors, and FSx for Lustre through CloudFormation."""

from __future__ import annotations

import json
import re
import time

import pytest
from botocore.exceptions import ClientError

REGION = "us-east-1"


def test_pcs_sample_amis_as_the_user_guide_finds_them(sandbox):
    """"Using sample Amazon Machine Images (AMIs) with AWS PCS", AWS CLI tab: owner amazon, name
    ``aws-pcs-sample_ami-al2023-{arch}*``, description naming the Slurm version (``Slurm: 25.05, 25.11,
    26.05.``), newest CreationDate; before 26.05 one AMI per version, ``amzn2`` up to 25.05 ("Release notes
    for AWS PCS sample AMIs"). Amazon Linux AMIs boot from /dev/xvda (EC2 user guide, "Device names")."""
    ec2 = sandbox.client("ec2", REGION)
    for arch in ("x86_64", "arm64"):
        images = ec2.describe_images(Owners=["amazon"], Filters=[
            {"Name": "name", "Values": [f"aws-pcs-sample_ami-al2023-{arch}*"]},
            {"Name": "description", "Values": ["*26.05*"]}, {"Name": "state", "Values": ["available"]}])["Images"]
        newest = max(images, key=lambda i: i["CreationDate"])
        assert re.fullmatch(rf"aws-pcs-sample_ami-al2023-{arch}-\d{{4}}-.*", newest["Name"])
        assert newest["Description"] == "Slurm: 25.05, 25.11, 26.05."
        assert (newest["Architecture"], newest["RootDeviceName"], newest["ImageOwnerAlias"]) == (
            arch, "/dev/xvda", "amazon")
        for os_part, version in (("amzn2", "25.05"), ("al2023", "25.11")):
            [single] = ec2.describe_images(Owners=["amazon"], Filters=[
                {"Name": "name", "Values": [f"aws-pcs-sample_ami-{os_part}-{arch}-slurm-{version}*"]}])["Images"]
            assert single["RootDeviceName"] == "/dev/xvda"
    assert not ec2.describe_images(Owners=["amazon"], Filters=[
        {"Name": "name", "Values": ["aws-pcs-sample_ami-ubuntu*", "aws-pcs-sample_ami-rhel*"]}])["Images"]


def test_pcs_sample_amis_only_in_pcs_regions(sandbox):
    """"AWS Parallel Computing Service endpoints and quotas": PCS (and so its sample AMIs) is not offered in
    every Region; ca-central-1 is not in its list."""
    ec2 = sandbox.client("ec2", "ca-central-1")
    assert not ec2.describe_images(Owners=["amazon"], Filters=[
        {"Name": "name", "Values": ["aws-pcs-sample_ami-*"]}])["Images"]


def test_parallelcluster_official_amis(sandbox):
    """aws-parallelcluster 3.16.1 (pcluster/aws/ec2.py, constants.py): official AMIs are named
    ``aws-parallelcluster-<version>-<os part>-<arch>-…``, owned by ``amazon`` (account 247102896272), for the
    OSes it publishes (not PRIVATE_OSES rocky8/rocky9); the root device is the base OS's (EC2 user guide)."""
    ec2 = sandbox.client("ec2", REGION)
    images = ec2.describe_images(Owners=["amazon"], Filters=[
        {"Name": "name", "Values": ["aws-parallelcluster-*"]}])["Images"]
    by_os = {}
    for image in images:
        os_part = re.match(r"aws-parallelcluster-[^-]+-(.+-hvm)-", image["Name"]).group(1)
        by_os.setdefault(os_part, set()).add((image["Architecture"], image["RootDeviceName"], image["OwnerId"]))
    assert by_os["amzn2023-hvm"] == {("x86_64", "/dev/xvda", "247102896272"), ("arm64", "/dev/xvda", "247102896272")}
    assert {root for _, root, _ in by_os["ubuntu-2204-lts-hvm"]} == {"/dev/sda1"}
    assert not any(part.startswith("rocky") for part in by_os)


def test_file_system_ids_and_unknown_ids(sandbox):
    """FSx API reference: file system ids look like ``fs-0123456789abcdef0`` (17 hex digits; ParallelCluster's
    schema requires it), and DescribeFileSystems with an id that does not exist fails with
    FileSystemNotFound."""
    fsx = sandbox.client("fsx", REGION, retries={"max_attempts": 1})
    subnet = sandbox.client("ec2", REGION).describe_subnets()["Subnets"][0]["SubnetId"]
    created = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet],
                                     LustreConfiguration={"DeploymentType": "PERSISTENT_2",
                                                          "PerUnitStorageThroughput": 250})["FileSystem"]
    try:
        assert re.fullmatch(r"fs-[0-9a-f]{17}", created["FileSystemId"])
        assert created["DNSName"].startswith(created["FileSystemId"] + ".fsx.")
        with pytest.raises(ClientError) as excinfo:
            fsx.describe_file_systems(FileSystemIds=["fs-0123456789abcdef0"])
        assert excinfo.value.response["Error"]["Code"] == "FileSystemNotFound"
    finally:
        fsx.delete_file_system(FileSystemId=created["FileSystemId"])


def test_lustre_file_system_in_cloudformation(sandbox):
    """"AWS::FSx::FileSystem" (CloudFormation template reference): Ref is the file system id; Fn::GetAtt gives
    DNSName and LustreMountName; the stack's tags and aws:cloudformation:* tags are propagated to it ("Resource
    tag", CloudFormation user guide); deleting the stack deletes the file system."""
    cfn = sandbox.client("cloudformation", REGION)
    fsx = sandbox.client("fsx", REGION)
    subnet = sandbox.client("ec2", REGION).describe_subnets()["Subnets"][0]["SubnetId"]
    template = {"Resources": {"Lustre": {"Type": "AWS::FSx::FileSystem", "Properties": {
        "FileSystemType": "LUSTRE", "StorageCapacity": 1200, "SubnetIds": [subnet],
        "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125}}}},
        "Outputs": {"Id": {"Value": {"Ref": "Lustre"}},
                    "Mount": {"Value": {"Fn::GetAtt": ["Lustre", "LustreMountName"]}},
                    "Dns": {"Value": {"Fn::GetAtt": ["Lustre", "DNSName"]}}}}
    cfn.create_stack(StackName="fsx-conformance", TemplateBody=json.dumps(template),
                     Tags=[{"Key": "team", "Value": "research"}])
    stack = cfn.describe_stacks(StackName="fsx-conformance")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    [file_system] = fsx.describe_file_systems(FileSystemIds=[outputs["Id"]])["FileSystems"]
    assert outputs["Mount"] == file_system["LustreConfiguration"]["MountName"]
    assert outputs["Dns"] == file_system["DNSName"]
    tags = {t["Key"]: t["Value"] for t in file_system["Tags"]}
    assert tags["team"] == "research" and tags["aws:cloudformation:logical-id"] == "Lustre"
    cfn.delete_stack(StackName="fsx-conformance")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(fs["FileSystemId"] == outputs["Id"]
                                              for fs in fsx.describe_file_systems()["FileSystems"]):
        time.sleep(0.2)
    assert all(fs["FileSystemId"] != outputs["Id"] for fs in fsx.describe_file_systems()["FileSystems"])
