"""An OpenZFS /home on the ParallelCluster backend: fmcluster creates the file system (ParallelCluster can
only mount an existing volume), then renders the cluster config with its root volume.

Offline: ``render`` writes the cluster config plus the FSx and security-group requests, and ``validate``
accepts them. End to end (the installed ``fmcluster`` against the sandbox): create → status → destroy
--keep-storage keeps the file system → destroy removes it.
"""

from __future__ import annotations

import json
import os

import yaml
from fixtures.in_process import run_in_process
from fixtures.lifecycle import CONFIGS, PclusterCli, _ok, cli_fixture

from fmcluster.backends.registry import render
from fmcluster.engine.references import references
from fmcluster.spec import load_spec
from fmcluster.validate.requests import check_document

P5_ODCR = CONFIGS / "p5-odcr-parallelcluster.yaml"


def _offline_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "FMCLUSTER_HOME": str(tmp_path / "state"), "NO_COLOR": "1", "COLUMNS": "200",
            "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
            "AWS_EC2_METADATA_DISABLED": "true"}


# offline --------------------------------------------------------------------------------------------
def test_render_writes_the_openzfs_request_beside_the_cluster_config(tmp_path):
    rendered = render(load_spec(P5_ODCR).spec, str(P5_ODCR))
    names = [d.filename for d in rendered.documents]
    assert names[0] == "cluster-config.yaml"
    assert {"fsx-openzfs.yaml", "fsx-openzfs-security-group.yaml"} <= set(names)

    config = rendered.one("pcluster_cluster").body
    home = next(s for s in config["SharedStorage"] if s["StorageType"] == "FsxOpenZfs")
    assert home["MountDir"] == "/home"
    assert home["FsxOpenZfsSettings"]["VolumeId"] == "${fsx_openzfs.home.root_volume_id}"

    request = rendered.one("fsx_openzfs").body
    assert request["FileSystemType"] == "OPENZFS"
    assert request["StorageCapacity"] == 512
    assert request["OpenZFSConfiguration"]["DeploymentType"] == "SINGLE_AZ_2"
    assert request["OpenZFSConfiguration"]["ThroughputCapacity"] in (160, 320)
    exports = request["OpenZFSConfiguration"]["RootVolumeConfiguration"]["NfsExports"][0]["ClientConfigurations"]
    assert exports == [{"Clients": "*", "Options": ["rw", "crossmnt", "no_root_squash"]}]
    assert request["SubnetIds"] == [config["Scheduling"]["SlurmQueues"][0]["Networking"]["SubnetIds"][0]]
    assert {"Key": "fmcluster:cluster", "Value": "llama-pretrain"} in request["Tags"]

    group = rendered.one("security_group", "fsx_openzfs").body
    ports = {(p["IpProtocol"], p["FromPort"], p["ToPort"]) for p in group["ingress"]["IpPermissions"]}
    assert ports == {(proto, low, high) for proto in ("tcp", "udp") for low, high in
                     ((111, 111), (2049, 2049), (20001, 20003))}

    for document in rendered.documents[1:]:
        assert check_document(document) == [], document.filename

    out = tmp_path / "out"
    # in this process (fixtures/in_process.py), with the offline environment as its whole environment: the create
    # below is the installed command's
    result = _ok(run_in_process(["render", str(P5_ODCR), "-o", str(out)], _offline_env(tmp_path)))
    assert sorted(p.name for p in out.iterdir()) == sorted(names), result.stderr
    assert "OPENZFS" in (out / "fsx-openzfs.yaml").read_text()


def test_validate_offline_checks_both_documents(tmp_path):
    result = _ok(run_in_process(["validate", str(P5_ODCR)], _offline_env(tmp_path)))
    lines = result.stdout.splitlines()
    assert any(line.startswith("✓  pcluster schema") for line in lines), result.stdout
    assert any(line.startswith("✓  botocore shapes") and "ec2, fsx" in line for line in lines), result.stdout


def test_a_spec_without_openzfs_refers_to_no_openzfs():
    """Besides the cluster's own id (an ownership tag, filled when the config is sent), the config refers only to
    the subnets of the network fmcluster creates for a spec without one, and the bucket its node scripts run from
    (software.containers is on by default)."""
    spec = load_spec(CONFIGS / "quickstart-parallelcluster.yaml").spec
    rendered = render(spec)
    assert [d.filename for d in rendered.documents if d.kind not in NETWORK_KINDS] == ["cluster-config.yaml",
                                                                                       "scripts-bucket.yaml"]
    assert references(rendered.one("pcluster_cluster").body) == {"fmcluster.cluster_id", "subnet.compute.id",
                                                                 "subnet.public.id", "bucket.scripts.name"}


NETWORK_KINDS = {"vpc", "subnet", "internet_gateway", "elastic_ip", "nat_gateway", "route_table", "vpc_endpoint"}


# end to end -----------------------------------------------------------------------------------------
class OpenZfsCli(PclusterCli):
    name_prefix = "e2e-oz"

    def __init__(self, sandbox, tmp_path):
        super().__init__(sandbox, tmp_path)
        data = yaml.safe_load(self.spec.read_text())
        data["storage"] = {"home": {"type": "openzfs", "capacity_gib": 64}}
        self.spec.write_text(yaml.safe_dump(data, sort_keys=False))

    def file_systems(self) -> list[dict]:
        fsx = self.sandbox.client("fsx")
        return [fs for fs in fsx.describe_file_systems()["FileSystems"]
                if {"Key": "fmcluster:cluster", "Value": self.name} in fs.get("Tags", [])
                and fs.get("Lifecycle") != "DELETING"]

    def security_groups(self) -> list[dict]:
        ec2 = self.sandbox.client("ec2")
        return ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [f"{self.name}-fsx-openzfs"]}])[
            "SecurityGroups"]

    def has_cloud_resources(self) -> bool:
        return bool(self.stacks() or self.file_systems())


cli = cli_fixture(OpenZfsCli)


def test_create_mounts_the_openzfs_root_volume_and_destroy_keeps_or_removes_it(cli):
    _ok(cli.create())
    assert len(cli.stacks()) == 1
    [fs] = cli.file_systems()
    assert fs["FileSystemType"] == "OPENZFS"
    assert fs["StorageCapacity"] == 64
    root_volume = fs["OpenZFSConfiguration"]["RootVolumeId"]
    [group] = cli.security_groups()
    # its network interface carries the NFS group (what ParallelCluster's networking validator reads)
    enis = cli.sandbox.client("ec2").describe_network_interfaces(NetworkInterfaceIds=fs["NetworkInterfaceIds"])
    assert [[g["GroupId"] for g in eni["Groups"]] for eni in enis["NetworkInterfaces"]] == [[group["GroupId"]]]

    # the config ParallelCluster got mounts that root volume at /home
    template = cli.sandbox.client("cloudformation").get_template(StackName=cli.name)["TemplateBody"]
    template = template if isinstance(template, str) else json.dumps(template)
    assert root_volume in template
    volumes = cli.sandbox.client("fsx").describe_volumes(VolumeIds=[root_volume])["Volumes"]
    assert volumes[0]["FileSystemId"] == fs["FileSystemId"]

    report = cli.status()
    assert report["status"] == "ACTIVE", report
    # every resource fmcluster made for the cluster, also those ParallelCluster does not manage
    listed = {(r["type"], r["id"]) for r in report["resources"]}
    assert ("fsx_openzfs", fs["FileSystemId"]) in listed and ("security_group", group["GroupId"]) in listed, listed

    # a re-run adopts what exists: no second file system (in this process; the first create is the command's)
    _ok(cli.create_here())
    assert [f["FileSystemId"] for f in cli.file_systems()] == [fs["FileSystemId"]]

    kept = _ok(cli.run("destroy", cli.name, "--yes", "--keep-storage"))
    assert "Traceback" not in kept.stderr, kept.stderr
    assert "= keep   fsx_openzfs:home" in kept.stderr, kept.stderr
    assert "= keep   security_group:fsx_openzfs" in kept.stderr, kept.stderr
    cli.wait_until_gone()
    assert [f["FileSystemId"] for f in cli.file_systems()] == [fs["FileSystemId"]]
    assert [g["GroupId"] for g in cli.security_groups()] == [group["GroupId"]]

    _ok(cli.destroy_here())
    assert cli.file_systems() == []
    assert cli.security_groups() == []

