"""PCS storage and networking, end to end: the installed ``fmcluster`` against the sandbox.

A spec with a /home that fmcluster creates, an existing FSx for Lustre file system (made first with plain boto3,
as a team's storage stack would) and ``network.head_subnet_id`` makes a cluster whose login node group sits in
the head subnet and whose every node group's user data mounts both file systems, with the Lustre DNS name and
mount name read from FSx. ``destroy`` removes what fmcluster made and leaves the existing file system alone.
"""

from __future__ import annotations

import base64

import pytest
import yaml
from fixtures.lifecycle import PcsCli, _ok, cli_fixture


def _subnets(sandbox, instance_type: str) -> tuple[str, str]:
    """A default-VPC subnet in an AZ that offers ``instance_type``, and another one for the login node."""
    ec2 = sandbox.client("ec2")
    zones = {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [instance_type]}])[
        "InstanceTypeOfferings"]}
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    compute = next(s for s in subnets if s["AvailabilityZone"] in zones)
    head = next(s for s in subnets if s["SubnetId"] != compute["SubnetId"])
    return compute["SubnetId"], head["SubnetId"]


class StorageCli(PcsCli):
    name_prefix = "e2e-st"
    home_type = "openzfs"

    def __init__(self, sandbox, tmp_path):
        super().__init__(sandbox, tmp_path)
        self.compute_subnet, self.head_subnet = _subnets(sandbox, "p5.4xlarge")
        fsx = sandbox.client("fsx")
        self.lustre = fsx.create_file_system(
            FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[self.compute_subnet],
            LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250})["FileSystem"]
        data = yaml.safe_load(self.spec.read_text())
        data["network"] = {"subnet_id": self.compute_subnet, "head_subnet_id": self.head_subnet}
        data["storage"] = {"lustre": {"existing_id": self.lustre["FileSystemId"], "mount": "/fsx"},
                           "home": {"type": self.home_type}}
        self.spec.write_text(yaml.safe_dump(data, sort_keys=False))

    def user_data(self, group: str) -> str:
        ec2 = self.sandbox.client("ec2")
        template = f"{self.name}-{group}"
        version = ec2.describe_launch_template_versions(LaunchTemplateName=template)["LaunchTemplateVersions"][0]
        return base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()

    def lustre_still_there(self) -> bool:
        found = self.sandbox.client("fsx").describe_file_systems(FileSystemIds=[self.lustre["FileSystemId"]])
        return found["FileSystems"][0].get("Lifecycle") != "DELETING"


class EfsCli(StorageCli):
    name_prefix = "e2e-efs"
    home_type = "efs"


cli = cli_fixture(StorageCli)
efs_cli = cli_fixture(EfsCli)


def _check_cluster(cli: StorageCli, home_server: str, home_path: str) -> None:
    inventory = cli.inventory()
    groups = {g["name"]: g for g in inventory["node_groups"]}
    assert set(groups) == {"login", "gpu", "burst"}, groups
    pcs = cli.sandbox.client("pcs")
    cluster_id = inventory["clusters"][0]["id"]
    described = {name: pcs.get_compute_node_group(clusterIdentifier=cluster_id, computeNodeGroupIdentifier=g["id"])[
        "computeNodeGroup"] for name, g in groups.items()}
    assert described["login"]["subnetIds"] == [cli.head_subnet]
    assert described["gpu"]["subnetIds"] == [cli.compute_subnet]
    dns, mount_name = cli.lustre["DNSName"], cli.lustre["LustreConfiguration"]["MountName"]
    for group in groups:
        text = cli.user_data(group)
        assert f"mount_storage.sh lustre {dns} {mount_name} /fsx" in text, text
        assert f"mount_storage.sh nfs {home_server} {home_path} /home" in text, text


def test_home_existing_lustre_and_head_subnet(cli):
    _ok(cli.create())
    fsx = cli.sandbox.client("fsx")
    [home] = [fs for fs in fsx.describe_file_systems()["FileSystems"] if fs["FileSystemType"] == "OPENZFS"
              and {"Key": "fmcluster:cluster", "Value": cli.name} in fs.get("Tags", [])]
    _check_cluster(cli, home["DNSName"], "/fsx/")
    # a re-run converges: nothing to make twice
    _ok(cli.create())
    _ok(cli.destroy())
    cli.assert_nothing_left()
    assert cli.lustre_still_there()
    tag = {"Key": "fmcluster:cluster", "Value": cli.name}
    left = [fs for fs in fsx.describe_file_systems()["FileSystems"]
            if tag in fs.get("Tags", []) and fs.get("Lifecycle") != "DELETING"]
    assert left == []


def test_efs_home(efs_cli):
    _ok(efs_cli.create())
    efs = efs_cli.sandbox.client("efs")
    [home] = [fs for fs in efs.describe_file_systems()["FileSystems"]
              if {"Key": "fmcluster:cluster", "Value": efs_cli.name} in fs.get("Tags", [])]
    targets = efs.describe_mount_targets(FileSystemId=home["FileSystemId"])["MountTargets"]
    assert [t["SubnetId"] for t in targets] == [efs_cli.compute_subnet]
    _check_cluster(efs_cli, f"{home['FileSystemId']}.efs.us-east-1.amazonaws.com", "/")
    _ok(efs_cli.destroy())
    efs_cli.assert_nothing_left()
    assert [fs for fs in efs.describe_file_systems()["FileSystems"]
            if {"Key": "fmcluster:cluster", "Value": efs_cli.name} in fs.get("Tags", [])] == []


def test_a_missing_existing_file_system_fails_with_its_id(cli):
    data = yaml.safe_load(cli.spec.read_text())
    data["storage"]["lustre"]["existing_id"] = "fs-0fffffffffffffff0"
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    result = cli.create()
    assert result.returncode == 1, result.stderr
    output = result.stdout + result.stderr
    assert "✗  existing FSx for Lustre file system  fs-0fffffffffffffff0 (storage.lustre.existing_id)" in output, output
    assert "Traceback" not in result.stderr, result.stderr
    cli.assert_nothing_left()  # preflight stopped it before anything was made


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
