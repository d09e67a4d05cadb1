"""Day two on EKS, in-process through the lifecycle core against the sandbox (one cluster for every check, with
the EKS emulator's zero latencies): a raised ``kubernetes.version`` upgrades the control plane and every node group
(EKS User Guide, "Update existing cluster to new Kubernetes version" and "Update a managed node group for your
cluster"), and a root-volume edit and a Lustre throughput edit change the same node group and the same file system
in place (UpdateNodegroupVersion onto the new launch-template version; FSx UpdateFileSystem, FSx for Lustre guide
"Managing throughput capacity"). Every fact about AWS is read from the sandbox with boto3."""

from __future__ import annotations

import json
import uuid

import yaml

REGION = "us-east-1"


def _spec(path, data):
    from fmcluster.spec import load_spec

    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(str(path)).spec


def _changes(spec, path, capsys) -> dict[str, dict]:
    from fmcluster.lifecycle.diff import diff

    capsys.readouterr()
    assert diff(spec, str(path), json_output=True) == 0
    report = json.loads(capsys.readouterr().out)
    return {c["resource"]: c for c in report["changes"] if c["action"] != "no-op"}


def test_upgrade_then_root_volume_and_throughput_edits_change_the_same_resources(sandbox, sandbox_env, tmp_path,
                                                                                  monkeypatch, capsys):
    from fmcluster.lifecycle.create import create
    from fmcluster.lifecycle.destroy import destroy
    from fmcluster.lifecycle.status import status

    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    sandbox.faults({"latency": {"eks.cluster": 0, "eks.nodegroup": 0, "eks.addon": 0}})
    name = f"upd-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "spec.yaml"
    data = {"name": name, "region": REGION, "backend": "eks",
            "kubernetes": {"version": "1.35", "system_nodes": 1},
            "queues": [{"name": "cpu", "instance_type": "m7i.2xlarge", "nodes": 1, "root_volume_gib": 200}],
            "storage": {"lustre": {"capacity_gib": 1200, "throughput_per_tib": 250}}}
    assert create(_spec(path, data), str(path), yes=True, wait=True, timeout_min=None) == 0
    eks, ec2, fsx = (sandbox.client(s, REGION) for s in ("eks", "ec2", "fsx"))

    def groups() -> dict[str, dict]:
        return {g: eks.describe_nodegroup(clusterName=name, nodegroupName=g)["nodegroup"]
                for g in eks.list_nodegroups(clusterName=name)["nodegroups"]}

    before = groups()
    assert sorted(before) == ["cpu", "system"] and {g["version"] for g in before.values()} == {"1.35"}
    (file_system,) = [f for f in fsx.describe_file_systems()["FileSystems"]
                      if {"Key": "fmcluster:cluster", "Value": name} in f.get("Tags", [])]

    # 1.35 → 1.36: planned as updates in place (never a replacement), then the control plane and each node group
    # end at 1.36, and status sees no drift.
    data["kubernetes"]["version"] = "1.36"
    planned = _changes(_spec(path, data), path, capsys)
    assert planned["eks_cluster:" + name]["action"] == "update"
    assert {k: (c["action"], c["attributes"]["version"]["new"]) for k, c in planned.items()
            if k.startswith("eks_nodegroup:")} == {"eks_nodegroup:cpu": ("update", "1.36"),
                                                   "eks_nodegroup:system": ("update", "1.36")}
    assert create(_spec(path, data), str(path), yes=True, wait=True, timeout_min=None) == 0
    assert eks.describe_cluster(name=name)["cluster"]["version"] == "1.36"
    upgraded = groups()
    assert {g: (n["version"], n["nodegroupArn"]) for g, n in upgraded.items()} == {
        g: ("1.36", n["nodegroupArn"]) for g, n in before.items()}
    report = status(name, refresh=False)
    assert (report["status"], report["drift"]) == ("ACTIVE", [])

    # root_volume_gib 200 → 300 and throughput 250 → 500: the same node group (same ARN) on the launch template's
    # new version, and the same file system at 500 MB/s/TiB.
    data["queues"][0]["root_volume_gib"] = 300
    data["storage"]["lustre"]["throughput_per_tib"] = 500
    planned = _changes(_spec(path, data), path, capsys)
    # (the node group's part follows from the template's new version, issued by the update: nothing is replaced)
    assert {k: c["action"] for k, c in planned.items()} == {
        "launch_template:cpu": "update", "fsx_lustre:lustre": "update"}, planned
    assert create(_spec(path, data), str(path), yes=True, wait=True, timeout_min=None) == 0
    cpu = groups()["cpu"]
    assert cpu["nodegroupArn"] == before["cpu"]["nodegroupArn"]
    assert int(cpu["launchTemplate"]["version"]) == int(before["cpu"]["launchTemplate"]["version"]) + 1
    template = ec2.describe_launch_template_versions(LaunchTemplateId=cpu["launchTemplate"]["id"],
                                                     Versions=[cpu["launchTemplate"]["version"]])
    disks = template["LaunchTemplateVersions"][0]["LaunchTemplateData"]["BlockDeviceMappings"]
    assert [d["Ebs"]["VolumeSize"] for d in disks] == [300]
    (after,) = fsx.describe_file_systems(FileSystemIds=[file_system["FileSystemId"]])["FileSystems"]
    assert after["LustreConfiguration"]["PerUnitStorageThroughput"] == 500
    assert status(name, refresh=False)["drift"] == []

    assert destroy(name, yes=True, keep_storage=False) == 0
