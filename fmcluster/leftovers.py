"""After a teardown, look for anything still tagged for the cluster: that is what would keep billing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fmcluster.render.common import CLUSTER_TAG

if TYPE_CHECKING:
    from fmcluster.lifecycle import Session


def scan(session: Session, keep_storage: bool = False) -> list[str]:
    """Resources tagged ``fmcluster:cluster=<name>`` (or named for it) that still exist."""
    ctx = session.ctx
    tag_filter = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [ctx.cluster]}]
    ec2 = ctx.client("ec2")
    left: list[str] = []
    for reservation in ec2.describe_instances(Filters=tag_filter + [
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])["Reservations"]:
        left += [f"EC2 instance {i['InstanceId']} ({i['InstanceType']}, {i['State']['Name']})"
                 for i in reservation["Instances"]]
    left += [f"security group {g['GroupId']} ({g['GroupName']})"
             for g in ec2.describe_security_groups(Filters=tag_filter)["SecurityGroups"]
             if not (keep_storage and _storage_uses(session))]
    left += [f"launch template {t['LaunchTemplateId']} ({t['LaunchTemplateName']})"
             for t in ec2.describe_launch_templates(Filters=tag_filter)["LaunchTemplates"]]
    left += [f"placement group {g['GroupName']}" for g in ec2.describe_placement_groups(Filters=tag_filter)[
        "PlacementGroups"] if g.get("State") not in ("deleted", "deleting")]
    if not keep_storage:
        for fs in ctx.client("fsx").describe_file_systems()["FileSystems"]:
            tags = {t["Key"]: t["Value"] for t in fs.get("Tags", [])}
            if tags.get(CLUSTER_TAG) == ctx.cluster and fs.get("Lifecycle") != "DELETING":
                left.append(f"FSx file system {fs['FileSystemId']} ({fs['FileSystemType']})")
    if session.spec.backend == "pcs":
        pcs = ctx.client("pcs")
        left += [f"PCS cluster {c['name']} ({c['status']})" for c in pcs.list_clusters()["clusters"]
                 if c["name"] == ctx.cluster]
        from fmcluster.render.pcs import node_role_name

        iam = ctx.client("iam")
        role = node_role_name(session.spec)
        try:
            iam.get_role(RoleName=role)
            left.append(f"IAM role {role}")
        except iam.exceptions.NoSuchEntityException:
            pass
    else:
        left += session.backend.leftovers(session)
    return left


def _storage_uses(session: Session) -> bool:
    """Whether kept storage still holds a security group (FSx keeps its network interfaces)."""
    storage = session.spec.storage
    return storage.lustre is not None or (storage.home is not None and storage.home.type == "openzfs")
