"""Day two on EKS, in-process through the lifecycle core against the sandbox (one cluster for every check, with
the EKS emulator's zero latencies): a raised ``kubernetes.version`` upgrades the control plane, every node group and
the add-ons, one minor version at a time (EKS User Guide, "Update existing cluster to new Kubernetes version",
"Update a managed node group for your cluster", "Update an Amazon EKS add-on"), and a root-volume edit and a
Lustre throughput edit change the same node group and the same file system in place (UpdateNodegroupVersion onto
the new launch-template version; FSx UpdateFileSystem, FSx for Lustre guide "Managing throughput capacity").
Every fact about AWS is read from the sandbox with boto3."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
import yaml

REGION = "us-east-1"


def _spec(path, data):
    from fmcluster.spec import load_spec

    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(str(path)).spec


def test_upgrade_then_root_volume_and_throughput_edits_change_the_same_resources(sandbox, sandbox_env, tmp_path,
                                                                                  monkeypatch, capsys):
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.status import status

    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    sandbox.faults({"latency": {"eks.cluster": 0, "eks.nodegroup": 0, "eks.addon": 0}})
    name = f"upd-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "spec.yaml"
    data = {"name": name, "region": REGION, "backend": "eks",
            "kubernetes": {"version": "1.34", "system_nodes": 1},
            "queues": [{"name": "cpu", "instance_type": "m7i.2xlarge", "nodes": 1, "root_volume_gib": 200}],
            "storage": {"lustre": {"capacity_gib": 1200, "throughput_per_tib": 250}}}
    assert create(_spec(path, data), str(path), yes=True, wait=True, timeout_min=None) == 0
    eks, ec2, fsx = (sandbox.client(s, REGION) for s in ("eks", "ec2", "fsx"))

    def groups() -> dict[str, dict]:
        return {g: eks.describe_nodegroup(clusterName=name, nodegroupName=g)["nodegroup"]
                for g in eks.list_nodegroups(clusterName=name)["nodegroups"]}

    before = groups()
    assert sorted(before) == ["cpu", "system"] and {g["version"] for g in before.values()} == {"1.34"}
    # The sandbox's catalog, from "Manage kube-proxy in Amazon EKS clusters": 1.34 v1.34.6-eksbuild.2, 1.35
    # v1.35.3-eksbuild.2 (the newest row, also what it offers for 1.36).
    assert eks.describe_addon(clusterName=name, addonName="kube-proxy")["addon"]["addonVersion"] == \
        "v1.34.6-eksbuild.2"
    (file_system,) = [f for f in fsx.describe_file_systems()["FileSystems"]
                      if {"Key": "fmcluster:cluster", "Value": name} in f.get("Tags", [])]

    # One edit (the CI budget): 1.34 → 1.36, root_volume_gib 200 → 300, throughput 250 → 500. EKS moves one
    # minor version at a time, so create walks to 1.35 first (after the one confirmation that lists the steps),
    # then 1.35 → 1.36 with the other changes. Each is planned as an update in place, never a replacement (create
    # --json reports the plan it applied, as diff shows it).
    data["kubernetes"]["version"] = "1.36"
    data["queues"][0]["root_volume_gib"] = 300
    data["storage"]["lustre"]["throughput_per_tib"] = 500
    capsys.readouterr()
    assert create(_spec(path, data), str(path), yes=True, wait=True, timeout_min=None, json_output=True) == 0
    said = capsys.readouterr()
    assert "AWS takes this change in steps: Kubernetes 1.35; then the spec (Kubernetes 1.36)" in \
        " ".join(said.err.split()), said.err
    planned = {c["resource"]: c for c in json.loads(said.out)["changes"] if c["action"] != "no-op"}
    assert {k: c["action"] for k, c in planned.items()} == {
        f"eks_cluster:{name}": "update", "eks_nodegroup:cpu": "update", "eks_nodegroup:system": "update",
        "launch_template:cpu": "update", "fsx_lustre:lustre": "update", "eks_addon:kube-proxy": "update"}, planned
    # the template's next version is issued by its update: the node group's move onto it is shown as such
    assert planned["eks_nodegroup:cpu"]["attributes"]["launchTemplate.version"] == {
        "old": before["cpu"]["launchTemplate"]["version"], "new": "(known after apply)"}
    assert planned["eks_addon:kube-proxy"]["attributes"] == {
        "addonVersion": {"old": "v1.34.6-eksbuild.2", "new": "v1.35.3-eksbuild.2"}}
    assert {k: c["attributes"]["version"] for k, c in planned.items() if k.startswith(("eks_cluster", "eks_node"))} == {
        k: {"old": "1.34", "new": "1.36"} for k in (f"eks_cluster:{name}", "eks_nodegroup:cpu", "eks_nodegroup:system")}
    assert planned["fsx_lustre:lustre"]["attributes"] == {
        "LustreConfiguration.PerUnitStorageThroughput": {"old": 250, "new": 500}}

    # The control plane and every node group at 1.36, each group the same one (same ARN); the cpu group on its
    # launch template's new version, which holds the new root volume.
    assert eks.describe_cluster(name=name)["cluster"]["version"] == "1.36"
    after = groups()
    assert {g: (n["version"], n["nodegroupArn"]) for g, n in after.items()} == {
        g: ("1.36", n["nodegroupArn"]) for g, n in before.items()}
    cpu = after["cpu"]
    assert (cpu["launchTemplate"]["id"], int(cpu["launchTemplate"]["version"])) == (
        before["cpu"]["launchTemplate"]["id"], int(before["cpu"]["launchTemplate"]["version"]) + 1)
    template = ec2.describe_launch_template_versions(LaunchTemplateId=cpu["launchTemplate"]["id"],
                                                     Versions=[cpu["launchTemplate"]["version"]])
    disks = template["LaunchTemplateVersions"][0]["LaunchTemplateData"]["BlockDeviceMappings"]
    assert [d["Ebs"]["VolumeSize"] for d in disks] == [300]
    # kube-proxy moved to a version EKS offers for the new Kubernetes version (UpdateAddon), the same add-on.
    assert eks.describe_addon(clusterName=name, addonName="kube-proxy")["addon"]["addonVersion"] == \
        "v1.35.3-eksbuild.2"
    # The same file system, at 500 MB/s/TiB.
    (lustre,) = fsx.describe_file_systems(FileSystemIds=[file_system["FileSystemId"]])["FileSystems"]
    assert lustre["LustreConfiguration"]["PerUnitStorageThroughput"] == 500
    report = status(name, refresh=False)
    assert (report["status"], report["drift"]) == ("ACTIVE", [])

    # One more edit: instance_type m7i.2xlarge → m7i.4xlarge and capacity_gib 1200 → 2400. The type is in the launch
    # template (one type per queue), so EKS rolls it: a new template version with the new InstanceType, then
    # UpdateNodegroupVersion onto it, which recycles every node onto that version ("Customize managed nodes with
    # launch templates"). Planned as an update of the same node group whose nodes run the old type; diff is in sync
    # only once they all run the new one.
    from fmcluster.verbs.lifecycle.diff import diff

    data["queues"][0]["instance_type"] = "m7i.4xlarge"
    data["storage"]["lustre"]["capacity_gib"] = 2400
    capsys.readouterr()
    assert create(_spec(path, data), str(path), yes=True, wait=True, timeout_min=None, json_output=True) == 0
    planned = {c["resource"]: c for c in json.loads(capsys.readouterr().out)["changes"]}
    assert (planned["eks_nodegroup:cpu"]["action"], planned["launch_template:cpu"]["action"]) == ("update", "update")
    assert planned["eks_nodegroup:cpu"]["attributes"]["nodes.instanceTypes"] == {
        "old": ["m7i.2xlarge"], "new": ["m7i.4xlarge"]}, planned["eks_nodegroup:cpu"]
    assert planned["fsx_lustre:lustre"]["attributes"] == {"StorageCapacity": {"old": 1200, "new": 2400}}
    rolled = groups()["cpu"]
    assert rolled["nodegroupArn"] == after["cpu"]["nodegroupArn"]
    template = ec2.describe_launch_template_versions(LaunchTemplateId=rolled["launchTemplate"]["id"],
                                                     Versions=[rolled["launchTemplate"]["version"]])
    assert template["LaunchTemplateVersions"][0]["LaunchTemplateData"]["InstanceType"] == "m7i.4xlarge"
    nodes = ec2.describe_instances(Filters=[{"Name": "tag:eks:nodegroup-name", "Values": ["cpu"]},
                                            {"Name": "tag:eks:cluster-name", "Values": [name]},
                                            {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    assert [i["InstanceType"] for r in nodes["Reservations"] for i in r["Instances"]] == ["m7i.4xlarge"]
    capsys.readouterr()
    assert diff(_spec(path, data), str(path), json_output=False, detailed_exitcode=True) == 0, capsys.readouterr()
    _lustre_grew_then_waits(sandbox, name, path, data, file_system["FileSystemId"])

    # An update EKS ends Failed is a failure with EKS's errors (DescribeUpdate), though the group itself stays
    # usable (DEGRADED): scaling up with no m7i.4xlarge capacity left.
    from fmcluster.engine import EngineFailed
    from fmcluster.verbs.lifecycle.scale import scale

    sandbox.faults({"insufficient_capacity": ["m7i.4xlarge"]})
    with pytest.raises(EngineFailed) as failed:
        scale(name, ["cpu=2"], yes=True)
    assert "update Failed" in str(failed.value) and "InsufficientInstanceCapacity" in str(failed.value), failed.value
    # No destroy: the sandbox is the test session's own, and a teardown is tests/backends/eks/test_lifecycle_eks.py's
    # subject (it would double this test's time).


def _lustre_grew_then_waits(sandbox, name: str, path, data: dict, file_system_id: str) -> None:
    """capacity_gib 1200 → 2400 grew the same file system (UpdateFileSystem), and only then the PersistentVolume's
    capacity, then the claim's request (Kubernetes "Persistent Volumes", "Expanding Persistent Volumes Claims": a
    larger request needs the StorageClass's allowVolumeExpansion; a statically provisioned volume is resized by its
    capacity first). A second increase within 6 hours ("Managing storage capacity", "Time between increases") is
    refused by diff and create before anything is sent, with the time it may be retried."""
    from fixtures.kube import cluster_api

    from fmcluster.errors import UsageError
    from fmcluster.state.store import StateStore
    from fmcluster.verbs.lifecycle.create import create
    from fmcluster.verbs.lifecycle.diff import diff
    fsx, eks = sandbox.client("fsx", REGION), sandbox.client("eks", REGION)
    kube = cluster_api(sandbox.endpoint_url, eks.describe_cluster(name=name)["cluster"], REGION)
    claim_path = "/api/v1/namespaces/default/persistentvolumeclaims/fsx-lustre"
    (lustre,) = fsx.describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    assert lustre["StorageCapacity"] == 2400
    volume = kube("GET", "/api/v1/persistentvolumes/fsx-lustre")[1]
    status, claim = kube("GET", claim_path)
    assert (volume["spec"]["capacity"]["storage"], claim["spec"]["resources"]["requests"]["storage"]) == \
        ("2400Gi", "2400Gi"), (volume, claim)
    assert kube("GET", "/apis/storage.k8s.io/v1/storageclasses/fsx-lustre")[1]["allowVolumeExpansion"] is True
    # The order the walk took: the file system grown, then the volume, then the claim.
    events = StateStore().events(name, REGION, limit=400)
    done = max(at for at, resource, kind, _ in events if resource == "fsx_lustre:lustre" and kind == "done")
    updated = {resource.split(":", 1)[1].split("__")[0]: at for at, resource, kind, detail in events
               if kind == "started" and detail.startswith("updating") and "fsx-lustre" in resource}
    assert done <= updated["PersistentVolume"] <= updated["PersistentVolumeClaim"], (done, updated)

    # What Kubernetes refuses of a claim (the sandbox as the API server answers): a smaller request, and a larger
    # one whose StorageClass does not allow expansion.
    shrink = {**claim, "spec": {**claim["spec"], "resources": {"requests": {"storage": "1200Gi"}}}}
    assert kube("PUT", claim_path, shrink)[0] == 422
    classes = "/apis/storage.k8s.io/v1/storageclasses/fsx-lustre"
    fixed = {**kube("GET", classes)[1], "allowVolumeExpansion": False}
    assert kube("PUT", classes, fixed)[0] == 200
    grow = {**claim, "spec": {**claim["spec"], "resources": {"requests": {"storage": "4800Gi"}}}}
    assert kube("PUT", claim_path, grow)[0] == 403
    assert kube("PUT", classes, {**kube("GET", classes)[1], "allowVolumeExpansion": True})[0] == 200

    # 2400 → 4800 at once: refused before anything is sent, naming when FSx takes it: 6 hours after the increase
    # was requested (the FILE_SYSTEM_UPDATE; the STORAGE_OPTIMIZATION FSx starts after it carries the same target
    # but a later time), shown as the first whole minute from then.
    actions = lustre["AdministrativeActions"]
    requested = max(a["RequestTime"] for a in actions if a["AdministrativeActionType"] == "FILE_SYSTEM_UPDATE"
                    and a["TargetFileSystemValues"].get("StorageCapacity"))
    due = (requested + dt.timedelta(hours=6)).astimezone(dt.timezone.utc)
    first_minute = due.replace(second=0, microsecond=0) + dt.timedelta(minutes=1 if due.second or due.microsecond
                                                                       else 0)
    retry = first_minute.strftime("%Y-%m-%d %H:%M")
    data["storage"]["lustre"]["capacity_gib"] = 4800
    for command in (lambda: diff(_spec(path, data), str(path), json_output=False, detailed_exitcode=True),
                    lambda: create(_spec(path, data), str(path), yes=True, wait=True, timeout_min=None)):
        with pytest.raises(UsageError) as refused:
            command()
        assert f"after {retry} UTC" in str(refused.value) and "6 hours" in str(refused.value), refused.value
    (still,) = fsx.describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    assert (still["StorageCapacity"], len(still["AdministrativeActions"])) == (2400, len(actions))
    data["storage"]["lustre"]["capacity_gib"] = 2400


def test_a_long_upgrade_is_walked_one_minor_version_at_a_time(tmp_path):
    """EKS User Guide, "Update existing cluster to new Kubernetes version": one minor version per control-plane
    update, and only with the node groups at the control plane's version. The steps before the spec itself."""
    from types import SimpleNamespace

    from fmcluster.backends.eks.upgrades import waypoints
    from fmcluster.engine import AttributeChange, ResourceChange

    spec = _spec(tmp_path / "spec.yaml", {"name": "walk", "region": REGION, "backend": "eks",
                                          "kubernetes": {"version": "1.36"},
                                          "queues": [{"name": "cpu", "instance_type": "m7i.2xlarge", "nodes": 1}]})

    def steps(live: str, groups: dict[str, str]) -> list[str]:
        session = SimpleNamespace(require_spec=lambda: spec, ctx=SimpleNamespace(
            values={"eks_cluster.walk.version": live}))
        changes = [ResourceChange(f"eks_nodegroup:{g}", "update", [AttributeChange("version", v, "1.36")])
                   for g, v in groups.items()]
        found = waypoints(session, changes)
        assert all(step.kubernetes.version == label.split()[1] for label, step in found)
        return [label for label, _ in found]

    assert steps("1.35", {"cpu": "1.35"}) == []  # one step: the spec itself
    assert steps("1.34", {"cpu": "1.34"}) == ["Kubernetes 1.35"]
    # a group behind the control plane is brought to it first, or EKS refuses the control plane's next update
    assert steps("1.35", {"cpu": "1.34", "system": "1.35"}) == ["Kubernetes 1.35 (node groups cpu first)"]
    assert steps("1.36", {}) == []
