"""Existing storage on ParallelCluster, end to end: a team's FSx for Lustre file system and FSx for OpenZFS
volume (made first with plain boto3, with the NFS and Lustre ports open to the VPC as ParallelCluster's
ExistingFsxNetworkingValidator requires) are mounted by ID, pass ParallelCluster's validators, and outlive
``destroy``."""

from __future__ import annotations

import yaml
from fixtures.lifecycle import PclusterCli, _ok, cli_fixture

# FSx Lustre guide "File system access control with Amazon VPC": 988 and 1018-1023; OpenZFS: 111, 2049, 20001-20003.
PORTS = ((988, 988), (1018, 1023), (111, 111), (2049, 2049), (20001, 20003))


class ExistingCli(PclusterCli):
    name_prefix = "e2e-ex"

    def __init__(self, sandbox, tmp_path):
        super().__init__(sandbox, tmp_path)
        ec2, fsx = sandbox.client("ec2"), sandbox.client("fsx")
        zones = {o["Location"] for o in ec2.describe_instance_type_offerings(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["p5.4xlarge"]}])[
            "InstanceTypeOfferings"]}
        subnet = next(s for s in ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])[
            "Subnets"] if s["AvailabilityZone"] in zones)
        vpc = ec2.describe_vpcs(VpcIds=[subnet["VpcId"]])["Vpcs"][0]
        group = ec2.create_security_group(GroupName=f"{self.name}-storage", Description="team storage",
                                          VpcId=vpc["VpcId"])["GroupId"]
        ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
            {"IpProtocol": proto, "FromPort": low, "ToPort": high, "IpRanges": [{"CidrIp": vpc["CidrBlock"]}]}
            for proto in ("tcp", "udp") for low, high in PORTS])
        self.group = group
        self.lustre = fsx.create_file_system(
            FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet["SubnetId"]], SecurityGroupIds=[group],
            LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250})["FileSystem"]
        self.openzfs = fsx.create_file_system(
            FileSystemType="OPENZFS", StorageCapacity=64, SubnetIds=[subnet["SubnetId"]], SecurityGroupIds=[group],
            OpenZFSConfiguration={"DeploymentType": "SINGLE_AZ_2", "ThroughputCapacity": 160})["FileSystem"]
        self.volume = self.openzfs["OpenZFSConfiguration"]["RootVolumeId"]
        data = yaml.safe_load(self.spec.read_text())
        data["network"] = {"subnet_id": subnet["SubnetId"]}
        data["storage"] = {"lustre": {"existing_id": self.lustre["FileSystemId"]},
                           "home": {"type": "openzfs", "existing_id": self.volume}}
        self.spec.write_text(yaml.safe_dump(data, sort_keys=False))

    def cleanup_storage(self) -> None:
        fsx = self.sandbox.client("fsx")
        for fs in (self.lustre, self.openzfs):
            fsx.delete_file_system(FileSystemId=fs["FileSystemId"])


cli = cli_fixture(ExistingCli)


def test_existing_lustre_and_openzfs_volume_are_mounted_and_kept(cli):
    try:
        result = _ok(cli.run("validate", str(cli.spec)))
        assert "pcluster validators" in result.stdout and "ERROR" not in result.stdout, result.stdout
        _ok(cli.create())
        [stack] = cli.stacks()
        assert stack["StackStatus"] == "CREATE_COMPLETE"
        template = str(cli.sandbox.client("cloudformation").get_template(StackName=cli.name)["TemplateBody"])
        assert cli.lustre["FileSystemId"] in template and cli.volume in template
        _ok(cli.destroy())
        cli.wait_until_gone()
        fsx = cli.sandbox.client("fsx")
        ids = [fs["FileSystemId"] for fs in fsx.describe_file_systems(
            FileSystemIds=[cli.lustre["FileSystemId"], cli.openzfs["FileSystemId"]])["FileSystems"]
            if fs.get("Lifecycle") != "DELETING"]
        assert sorted(ids) == sorted([cli.lustre["FileSystemId"], cli.openzfs["FileSystemId"]])
    finally:
        cli.cleanup_storage()
