"""What instance types an EKS managed node group really runs, for drift and for the plan of an ``instance_type`` edit.

EKS keeps a node group's instance types in one of two places, fixed at creation ("Customize managed nodes with
launch templates": instance types go in the launch template or the node group, not both): the node group's
``instanceTypes`` (CreateNodegroup; UpdateNodegroupConfig takes no ``instanceTypes``, so a change there needs a new
node group), or the launch template's ``InstanceType``, where a new template version with another type is rolled
onto the same node group by UpdateNodegroupVersion ("When you update your node group to a different version of
your launch template, all nodes in the group are recycled to match the new configuration of the specified launch
template version"). DescribeNodegroup reports no ``instanceTypes`` for the second kind (EKS API, Nodegroup), so the
template version is read; and the nodes themselves are read (EC2 DescribeInstances by the ``eks:nodegroup-name`` tag
EKS puts on them), since a template that says the new type while the nodes run the old one is not in sync.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.discovery import scan_instances
from fmcluster.aws.ec2 import template_version
from fmcluster.engine import Context, reads

LAUNCH_TEMPLATES_PAGE = "EKS User Guide, 'Customize managed nodes with launch templates'"
# The attribute paths of the two comparisons: the group's own list, and the types its nodes run.
GROUP_TYPES = "instanceTypes"
NODE_TYPES = "nodes.instanceTypes"


def template_type(ctx: Context, template: dict[str, Any]) -> str | None:
    """The ``InstanceType`` of the launch template version a node group runs (None: the template names none)."""
    if not template.get("id") or not template.get("version"):
        return None
    try:
        version = template_version(ctx, template["id"], template["version"])
    except ClientError:
        return None
    return ((version or {}).get("LaunchTemplateData") or {}).get("InstanceType")


def node_types(ctx: Context, cluster: str, group: str) -> list[str]:
    """The distinct instance types of the node group's live instances, sorted ([] when it has none)."""
    def fetch() -> list[str]:
        found = scan_instances(ctx, [{"Name": "tag:eks:cluster-name", "Values": [cluster]},
                                     {"Name": "tag:eks:nodegroup-name", "Values": [group]}])
        return sorted({i["InstanceType"] for i in found})

    return reads.once(ctx, "ec2.NodegroupInstanceTypes", f"{cluster}/{group}", fetch)


def group_types(live: dict[str, Any], in_template: str | None) -> list[str] | None:
    """The node group's own ``instanceTypes``, None when its launch template carries the type (then the group's
    list, where a service reports one anyway, only repeats the template)."""
    if in_template:
        return None
    types = live.get(GROUP_TYPES)
    return sorted(types) if isinstance(types, list) and types else None


def foreign_nodes(running: list[str], wanted: list[str]) -> bool:
    """Nodes of a type the spec does not name (a group of several types may run any of them)."""
    return bool(running) and not set(running) <= set(wanted)
