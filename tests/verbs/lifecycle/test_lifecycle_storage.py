"""End-to-end, PCS with FSx for Lustre: the file system and its S3 link are created before the nodes,
the nodes' user data mounts the real file system, a shrink (which replaces it: FSx for Lustre storage only grows,
FSx for Lustre guide "Managing storage capacity") is refused with only ``--yes`` and goes ahead with
``--allow-data-loss``, without a backup (FSx backs up no Lustre file system linked to S3: FSx API reference,
CreateBackup), and ``destroy --keep-storage`` keeps exactly the storage (a later plain ``destroy`` removes it)."""

from __future__ import annotations

import base64

import pytest
import yaml
from fixtures.lifecycle import PcsCli as Cli
from fixtures.lifecycle import _ok


@pytest.fixture
def cli(sandbox, tmp_path):
    cli = Cli(sandbox, tmp_path)
    data = yaml.safe_load(cli.spec.read_text())
    data["queues"] = [{"name": "gpu", "instance_type": "p5.4xlarge", "nodes": 1}]
    data["storage"] = {"lustre": {"capacity_gib": 2400, "throughput_per_tib": 250,
                                  "s3_import": "s3://training-data/tokens"}}
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    yield cli
    cli.run("destroy", cli.name, "--yes")


def _lustre(sandbox, name: str) -> list[dict]:
    return [fs for fs in sandbox.client("fsx").describe_file_systems()["FileSystems"]
            if {"Key": "fmcluster:cluster", "Value": name} in fs.get("Tags", [])]


def test_lustre_is_linked_mounted_and_kept_on_request(cli, sandbox):
    s3 = sandbox.client("s3")
    if "training-data" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="training-data")  # preflight checks that the import bucket exists
    _ok(cli.create())
    [file_system] = _lustre(sandbox, cli.name)
    assert file_system["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    links = sandbox.client("fsx").describe_data_repository_associations(
        Filters=[{"Name": "file-system-id", "Values": [file_system["FileSystemId"]]}])["Associations"]
    assert [link["DataRepositoryPath"] for link in links] == ["s3://training-data/tokens"]

    ec2 = sandbox.client("ec2")
    template = ec2.describe_launch_templates(LaunchTemplateNames=[f"{cli.name}-gpu"])["LaunchTemplates"][0]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    user_data = base64.b64decode(data["UserData"]).decode()
    mount = file_system["LustreConfiguration"]["MountName"]
    assert f"/opt/fmcluster/mount_storage.sh lustre {file_system['DNSName']} {mount} /fsx" in user_data
    assert "${" not in user_data

    # A shrink replaces the file system: refused with only --yes, nothing changed; the flag that allows it named.
    data = yaml.safe_load(cli.spec.read_text())
    data["storage"]["lustre"]["capacity_gib"] = 1200
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    refused = cli.create()
    flat = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and "--allow-data-loss allows" in flat, refused.stderr
    assert f"replace fsx_lustre:lustre ({file_system['FileSystemId']}) loses every file" in flat
    [kept] = _lustre(sandbox, cli.name)
    assert (kept["FileSystemId"], kept["StorageCapacity"]) == (file_system["FileSystemId"], 2400)
    shrunk = _ok(cli.create("--allow-data-loss"))
    assert "no backup is possible" in " ".join(shrunk.stderr.split())
    [file_system] = _lustre(sandbox, cli.name)
    assert file_system["StorageCapacity"] == 1200
    backups = sandbox.client("fsx").describe_backups()["Backups"]
    assert kept["FileSystemId"] not in [b["FileSystem"]["FileSystemId"] for b in backups]

    kept = _ok(cli.run("destroy", cli.name, "--yes", "--keep-storage"))
    assert "keep" in kept.stderr
    assert len(_lustre(sandbox, cli.name)) == 1
    assert not cli.inventory()["clusters"]

    _ok(cli.destroy())
    assert _lustre(sandbox, cli.name) == []
    cli.assert_nothing_left()
