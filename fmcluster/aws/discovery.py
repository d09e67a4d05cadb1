"""Find what AWS holds for a cluster by its tags, with every list paginated.

The scans serve three readers: ``destroy`` (what to delete, also when the local record is gone), the
leftover check after it (anything still tagged is reported, never "nothing left"), and ``status`` (every
resource fmcluster made, and drift: what exists that the spec no longer has).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import LaunchTemplate, PlacementGroup, SecurityGroup, error_code
from fmcluster.aws.fsx import FsxLustre, FsxOpenZfs
from fmcluster.aws.fsx_data_repository import FsxDataRepository, associations
from fmcluster.aws.iam import IamRole, InstanceProfile
from fmcluster.aws.network_plan import RESOURCES as NETWORK_RESOURCES
from fmcluster.aws.network_plan import scan_network
from fmcluster.aws.ownership import is_ours, tag_dict, tagged_for_cluster
from fmcluster.engine import Context, Resource, reads
from fmcluster.render.common import CLUSTER_ID_TAG, CLUSTER_TAG, RESOURCE_TAG


@dataclass
class Discovered:
    """Something in AWS tagged for the cluster: a resource fmcluster manages (``handle`` reads and deletes
    it), or one it only reports (the nodes a scheduler launched)."""

    resource: str  # kind:key
    id: str
    status: str
    description: str
    ours: bool = True
    handle: Resource | None = None
    # The fmcluster:cluster-id it carries ("" when it carries none).
    cluster_id: str = ""
    # Made by the backend's own stack (it carries the stack's tags): the stack updates it, never the plan; a
    # teardown deletes it only if the stack's deletion left it (a retained file system).
    stack_made: bool = False
    # When it started to bill, where AWS says and it bills by the hour on its own (a NAT gateway).
    created: Any = None

    def as_json(self) -> dict[str, Any]:
        kind, _, key = self.resource.partition(":")
        found = {"type": kind, "key": key, "id": self.id, "status": self.status}
        return found | ({"created": str(self.created)} if self.created is not None else {})


def _network_handle(cls: Callable[..., Resource], key: str, ident: str) -> Resource:
    return cls(key, known_id=ident)


_HANDLES: dict[str, Callable[[str, str], Resource]] = {
    "security_group": lambda key, ident: SecurityGroup(key, known_id=ident),
    "launch_template": lambda key, ident: LaunchTemplate(key, known_id=ident),
    "placement_group": lambda key, ident: PlacementGroup(key, known_id=ident),
    "fsx_lustre": lambda key, ident: FsxLustre(key, known_id=ident),
    "fsx_openzfs": lambda key, ident: FsxOpenZfs(key, known_id=ident),
    "fsx_data_repository": lambda key, ident: FsxDataRepository(key, known_id=ident),
}
_HANDLES.update({kind: functools.partial(_network_handle, cls) for kind, cls in NETWORK_RESOURCES.items()})
LIVE_INSTANCE_STATES = ["pending", "running", "stopping", "stopped"]


def _found(ctx: Context, tags: dict[str, str], ident: str, status: str, description: str,
           fallback: str, stack_kinds: Collection[str]) -> Discovered:
    """A tagged resource: managed (with a handle) when it names a resource of the plan and is this cluster's;
    reported otherwise, saying whose it is. ``stack_kinds``: the kinds of the backends' own stacks."""
    resource = tags.get(RESOURCE_TAG) or fallback
    # CloudFormation copies the stack's tags onto what the stack makes (its security groups, a retained Lustre
    # file system): the tag names the stack, not this resource.
    stack_kind, named, _ = resource.partition(":")
    stack_made = bool(named) and stack_kind in stack_kinds
    if stack_made:
        resource = fallback
    kind, _, key = resource.partition(":")
    ours = is_ours(tags, ctx)
    if not ours:
        description += f" (tagged for an earlier cluster of this name, id {tags.get(CLUSTER_ID_TAG, 'none')})"
    handle = _HANDLES[kind](key, ident) if ours and kind in _HANDLES else None
    return Discovered(resource, ident, status, description, ours, handle, tags.get(CLUSTER_ID_TAG, ""), stack_made)


def _cluster_filter(ctx: Context) -> list[dict[str, Any]]:
    return [{"Name": f"tag:{CLUSTER_TAG}", "Values": [ctx.cluster]}]


def scan_ec2(ctx: Context, stack_kinds: Collection[str]) -> list[Discovered]:
    """The cluster's security groups, launch templates, placement groups and network; what a backend's own stack
    made (its tag names one of ``stack_kinds``) is told apart (``Discovered.stack_made``)."""
    ec2 = ctx.client("ec2")
    found: list[Discovered] = []
    for page in ec2.get_paginator("describe_security_groups").paginate(Filters=_cluster_filter(ctx)):
        for group in page["SecurityGroups"]:
            reads.keep(ctx, "ec2.SecurityGroups", group, group["GroupId"])
            tags = tag_dict(group.get("Tags"))
            if tagged_for_cluster(tags, ctx):
                found.append(_found(ctx, tags, group["GroupId"], "available",
                                    f"security group {group['GroupId']} ({group['GroupName']})",
                                    f"security_group:{group['GroupName']}", stack_kinds))
    for page in ec2.get_paginator("describe_launch_templates").paginate(Filters=_cluster_filter(ctx)):
        for template in page["LaunchTemplates"]:
            reads.keep(ctx, "ec2.LaunchTemplates", template, template["LaunchTemplateId"],
                       template["LaunchTemplateName"])
            tags = tag_dict(template.get("Tags"))
            if tagged_for_cluster(tags, ctx):
                ident, name = template["LaunchTemplateId"], template["LaunchTemplateName"]
                found.append(_found(ctx, tags, ident, "available", f"launch template {ident} ({name})",
                                    f"launch_template:{name}", stack_kinds))
    # DescribePlacementGroups has no pagination: it answers with every group at once.
    for group in ec2.describe_placement_groups(Filters=_cluster_filter(ctx))["PlacementGroups"]:
        reads.keep(ctx, "ec2.PlacementGroups", group, group["GroupName"])
        tags = tag_dict(group.get("Tags"))
        if tagged_for_cluster(tags, ctx) and group.get("State") not in ("deleted", "deleting"):
            found.append(_found(ctx, tags, group["GroupName"], group.get("State", "available"),
                                f"placement group {group['GroupName']}", f"placement_group:{group['GroupName']}",
                                stack_kinds))
    for kind, ident, state, tags, description, created in scan_network(ctx):  # the network fmcluster created
        found.append(replace(_found(ctx, tags, ident, state, description, f"{kind}:{ident}", stack_kinds),
                             created=created))
    return found


def scan_instances(ctx: Context, extra_filters: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Live instances tagged for the cluster (or matching ``extra_filters`` instead of the tag)."""
    ec2 = ctx.client("ec2")
    filters = (extra_filters or _cluster_filter(ctx)) + [{"Name": "instance-state-name",
                                                          "Values": LIVE_INSTANCE_STATES}]
    pages = ec2.get_paginator("describe_instances").paginate(Filters=filters)
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def instance_row(instance: dict[str, Any], queue: str) -> dict[str, Any]:
    """One of ``describe``'s ``instances``: a node of ``queue`` as EC2 describes it."""
    return {"id": instance["InstanceId"], "queue": queue, "instance_type": instance["InstanceType"],
            "state": instance["State"]["Name"], "launch_time": instance.get("LaunchTime")}


def instance_found(instance: dict[str, Any], owner: str) -> Discovered:
    ident, state = instance["InstanceId"], instance["State"]["Name"]
    return Discovered(f"instance:{ident}", ident, state,
                      f"EC2 instance {ident} ({instance['InstanceType']}, {state}; {owner})")


def scan_fsx(ctx: Context, stack_kinds: Collection[str]) -> list[Discovered]:
    """The cluster's FSx file systems and their data repository associations (``stack_kinds``: as :func:`scan_ec2`)."""
    fsx = ctx.client("fsx")
    found: list[Discovered] = []
    for page in fsx.get_paginator("describe_file_systems").paginate():
        for fs in page["FileSystems"]:
            reads.keep(ctx, "fsx.FileSystems", fs, fs["FileSystemId"])  # FsxFileSystem.read by id
            tags = tag_dict(fs.get("Tags"))
            if not tagged_for_cluster(tags, ctx) or fs.get("Lifecycle") == "DELETING":
                continue
            kind = {"LUSTRE": "fsx_lustre", "OPENZFS": "fsx_openzfs"}.get(fs["FileSystemType"], "fsx")
            found.append(_found(ctx, tags, fs["FileSystemId"], fs.get("Lifecycle", ""),
                                f"FSx file system {fs['FileSystemId']} ({fs['FileSystemType']})", f"{kind}:{kind}",
                                stack_kinds))
            if fs["FileSystemType"] != "LUSTRE":
                continue
            for association in associations(fsx, fs["FileSystemId"]):
                dra_tags = tag_dict(association.get("Tags"))
                if tagged_for_cluster(dra_tags, ctx) and association.get("Lifecycle") != "DELETING":
                    found.append(_found(ctx, dra_tags, association["AssociationId"], association.get("Lifecycle", ""),
                                        f"FSx data repository association {association['AssociationId']}",
                                        "fsx_data_repository:s3", stack_kinds))
    return found


def _entity(call: Callable[[], dict[str, Any]], field: str) -> dict[str, Any] | None:
    """An IAM Get…'s entity; None when IAM has no such entity."""
    try:
        return call()[field]
    except ClientError as exc:
        if error_code(exc) != "NoSuchEntity":
            raise
        return None


def scan_role(ctx: Context, key: str, role_name: str, profile_name: str | None = None) -> list[Discovered]:
    """A role fmcluster made, and the instance profile that carries it when it has one, by the names fmcluster
    gives them (IAM has no tag filter on lists)."""
    iam = ctx.client("iam")
    parts: list[tuple[str, dict[str, str]]] = []
    parts_to_read = [("role", "iam.Role", role_name, lambda: iam.get_role(RoleName=role_name), "Role")]
    if profile_name is not None:
        parts_to_read.append(("instance profile", "iam.InstanceProfile", profile_name,
                              lambda: iam.get_instance_profile(InstanceProfileName=profile_name), "InstanceProfile"))
    for what, shape, name, call, field in parts_to_read:
        # InstanceProfile.read asks for the same role and profile: in a read-only pass it gets these answers.
        item = reads.once(ctx, shape, name, lambda call=call, field=field: _entity(call, field))
        if item is not None:
            parts.append((what, tag_dict(item.get("Tags"))))
    if not parts:
        return []
    ours = all(is_ours(tags, ctx) for _, tags in parts)
    mine = [tags for _, tags in parts if tagged_for_cluster(tags, ctx)]
    description = (f"IAM role {role_name}" if profile_name is None else
                   f"IAM role {role_name} and instance profile {profile_name} ({', '.join(w for w, _ in parts)})")
    if not ours:
        owner = mine[0].get(CLUSTER_ID_TAG, "none") if mine else "another owner"
        description += f" (not this cluster's: {owner})"
    if profile_name is None:
        kind, handle = "iam_role", IamRole(key, role_name=role_name) if ours else None
    else:
        kind, handle = "instance_profile", InstanceProfile(key, role_name=role_name, profile_name=profile_name) \
            if ours else None
    ids = {tags.get(CLUSTER_ID_TAG, "") for tags in mine}
    return [Discovered(f"{kind}:{key}", role_name, "available", description, ours, handle,
                       ids.pop() if len(ids) == 1 else "")]
