"""How the plan takes an EKS queue's instance_type edit, by where EKS keeps the type ("Customize managed nodes with
launch templates": in the launch template or in the node group, not both). One type: the template's new version is
rolled onto the same node group (UpdateNodegroupVersion), nodes of the old type included. The node group's own
``instanceTypes`` (several types): a replacement, since UpdateNodegroupConfig takes no instanceTypes (EKS API
reference; botocore's model). Nodes of another type under a template version that already names the spec's type:
no update moves them, so a replacement too. The replacement deletes the node group, then creates it again under
the same name (EKS node group names are unique in a cluster, and the queue's name is the group's)."""

from __future__ import annotations

from fmcluster.backends.eks.nodegroup_resource import EksNodegroup
from fmcluster.backends.eks.nodes.instance_types import GROUP_TYPES, NODE_TYPES
from fmcluster.engine import AttributeChange
from fmcluster.render.documents import Document


def _group(types: tuple[str, ...]) -> EksNodegroup:
    body = {"clusterName": "c", "nodegroupName": "cpu", **({"instanceTypes": list(types)} if len(types) > 1 else {})}
    return EksNodegroup("cpu", Document("eks-nodegroup-cpu.yaml", "eks_nodegroup", "cpu", "eks", {}, "", body),
                        cluster="c", types=types)


def test_one_type_rolls_with_the_template_version():
    group = _group(("m7i.4xlarge",))
    changes = [AttributeChange("launchTemplate.version", "3", "4"),
               AttributeChange(NODE_TYPES, ["m7i.2xlarge"], ["m7i.4xlarge"])]
    assert group.replacement_reason(changes) is None
    assert group.update_steps(changes) == [("update_version", changes)]


def test_nodes_of_another_type_without_a_new_template_version_need_a_new_group():
    why = _group(("m7i.4xlarge",)).replacement_reason([AttributeChange(NODE_TYPES, ["m7i.2xlarge"], ["m7i.4xlarge"])])
    assert why and "m7i.2xlarge" in why and "UpdateNodegroupConfig takes no instanceTypes" in why, why


def test_the_groups_own_instance_types_are_fixed():
    group = _group(("m7i.4xlarge", "m7i.8xlarge"))
    why = group.replacement_reason([AttributeChange(GROUP_TYPES, ["m7i.2xlarge", "m7i.4xlarge"],
                                                    ["m7i.4xlarge", "m7i.8xlarge"])])
    assert why and "instanceTypes" in why and "UpdateNodegroupConfig" in why, why
