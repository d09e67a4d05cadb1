"""End-to-end, ParallelCluster with a new FSx for Lustre file system: ParallelCluster's own stack creates it
(``AWS::FSx::FileSystem`` and its S3 link, ``AWS::FSx::DataRepositoryAssociation``, in the sandbox's
CloudFormation), the cluster reaches CREATE_COMPLETE, and
``destroy --keep-storage`` removes the stack cleanly; the file system and its security group stay, as the
rendered ``DeletionPolicy: Retain`` asks (ParallelCluster gives the storage security group the file
system's policy), with the created network they sit in."""

from __future__ import annotations

import re

import pytest
import yaml
from fixtures.lifecycle import PclusterCli, _ok


@pytest.fixture
def cli(sandbox, tmp_path):
    runner = PclusterCli(sandbox, tmp_path)
    data = yaml.safe_load(runner.spec.read_text())
    data["storage"] = {"lustre": {"mount": "/fsx", "capacity_gib": 1200, "throughput_per_tib": 250,
                                  "s3_import": "s3://pc-lustre-data/tokens"}}
    runner.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    yield runner
    sandbox.faults({"reset": True})
    if runner.has_cloud_resources():
        runner.run("destroy", runner.name, "--yes")


def _stack_resources(sandbox, stack_name: str, kind: str) -> list[str]:
    cfn = sandbox.client("cloudformation")
    return [r["PhysicalResourceId"] for r in cfn.describe_stack_resources(StackName=stack_name)["StackResources"]
            if r["ResourceType"] == kind]


def test_new_lustre_file_system_is_created_by_the_stack_and_outlives_it(cli, sandbox):
    s3 = sandbox.client("s3")
    if "pc-lustre-data" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="pc-lustre-data")
    _ok(cli.create())
    assert cli.status()["backend_status"] == "CREATE_COMPLETE"
    [fs_id] = _stack_resources(sandbox, cli.name, "AWS::FSx::FileSystem")
    groups = [g for g in _stack_resources(sandbox, cli.name, "AWS::EC2::SecurityGroup")]
    assert re.fullmatch(r"fs-[0-9a-f]{17}", fs_id)
    fsx = sandbox.client("fsx")
    [file_system] = fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
    assert file_system["FileSystemType"] == "LUSTRE" and file_system["StorageCapacity"] == 1200
    assert file_system["LustreConfiguration"]["PerUnitStorageThroughput"] == 250
    links = fsx.describe_data_repository_associations(Filters=[
        {"Name": "file-system-id", "Values": [fs_id]}])["Associations"]
    assert [link["DataRepositoryPath"] for link in links] == ["s3://pc-lustre-data/tokens"]
    tags = {t["Key"]: t["Value"] for t in file_system["Tags"]}
    assert tags["aws:cloudformation:stack-name"] == cli.name and tags["fmcluster:cluster"] == cli.name

    _ok(cli.run("destroy", cli.name, "--yes", "--keep-storage"))
    cli.wait_until_gone()
    assert fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]  # Retain: the data outlives the cluster
    ec2 = sandbox.client("ec2")
    kept = [g["GroupId"] for g in ec2.describe_security_groups(Filters=[
        {"Name": "tag:aws:cloudformation:stack-name", "Values": [cli.name]}])["SecurityGroups"]]
    assert kept and set(kept) <= set(groups)
    fsx.delete_file_system(FileSystemId=fs_id)
    for group in kept:
        ec2.delete_security_group(GroupId=group)
