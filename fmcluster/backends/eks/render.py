"""Spec → every request document an EKS cluster needs: the AWS side (network, roles, cluster, add-ons, Lustre, a
launch template and a managed node group per queue) and the Kubernetes side (the manifests of
:mod:`fmcluster.backends.eks.software.manifests`, one document each)."""

from __future__ import annotations

import ipaddress
import json

import yaml

from fmcluster.backends.eks.nodes import burn_in_hold, local_storage, scale_from_zero, system_nodes
from fmcluster.backends.eks.nodes import repair as node_repair
from fmcluster.backends.eks.nodes.images import node_image, standard_image
from fmcluster.backends.eks.software import autoscaler_iam, autoscaler_install, dra_driver
from fmcluster.backends.eks.software import manifests as kube_manifests
from fmcluster.catalog.hardware import hardware
from fmcluster.engine.object_keys import object_key
from fmcluster.render import storage
from fmcluster.render.common import resource_tags
from fmcluster.render.documents import SUBNET_TO_RESOLVE, Document, RenderedDocuments
from fmcluster.render.network import VPC_KEY, network_note, render_network
from fmcluster.render.templates import render_yaml
from fmcluster.spec import decisions
from fmcluster.spec.models import Queue, Spec, instance_types_of, max_nodes, min_nodes

# The control plane's second subnet: a created network's subnet in a second Availability Zone, or (in the spec's
# VPC) a subnet the backend picks outside the nodes' zone at create time.
CONTROL_SUBNET = "control"
SECOND_ZONE_REFERENCE = "${network.second_availability_zone}"
CONTROL_SUBNET_REFERENCE = "${network.control_subnet_id}"
CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "spot": "SPOT", "reservation": "ON_DEMAND",
                  "capacity-block": "CAPACITY_BLOCK"}
# EKS guide, "Amazon EKS cluster IAM role" and "Amazon EKS node IAM role"; SSM lets `fmcluster ssh`-style access
# and Session Manager reach the nodes.
CLUSTER_POLICIES = ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]
NODE_POLICIES = ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
                 "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
                 "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
                 "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]
# The managed add-ons every cluster gets (EKS guide, "Amazon EKS add-ons"), and what each is for.
ADDONS = {
    "vpc-cni": "Pod networking (the Amazon VPC CNI)",
    "kube-proxy": "Service networking on every node",
    "coredns": "cluster DNS",
    "eks-pod-identity-agent": "IAM credentials for pods (EKS Pod Identity)",
    "aws-fsx-csi-driver": "FSx for Lustre volumes for pods (the FSx CSI driver)",
}
# Add-ons whose pods run on the nodes: made once the node groups exist, or EKS reports them DEGRADED meanwhile.
ADDONS_ON_NODES = ("coredns", "aws-fsx-csi-driver")
# Where those add-ons' Deployments run: the system node group, by the keys each add-on's configuration schema
# (`aws eks describe-addon-configuration`) takes. CoreDNS's schema has nodeSelector and tolerations at the top;
# the FSx CSI driver's follows its Helm chart's values (kubernetes-sigs/aws-fsx-csi-driver
# charts/aws-fsx-csi-driver/values.yaml), where the controller Deployment's are controller.nodeSelector and
# controller.tolerations (its node DaemonSet must stay on every node, so node.* is left alone).
_ON_SYSTEM_NODES = {"nodeSelector": system_nodes.NODE_SELECTOR, "tolerations": [system_nodes.TOLERATION]}
ADDON_CONFIGURATION = {
    "coredns": ({**_ON_SYSTEM_NODES}, "CoreDNS's Deployment on the system node group (nodeSelector, tolerations)"),
    "aws-fsx-csi-driver": ({"controller": {**_ON_SYSTEM_NODES}},
                           "the FSx CSI controller on the system node group (controller.nodeSelector, "
                           "controller.tolerations); its node DaemonSet stays on every node"),
}
# The system nodes' root volume: the AL2023 image and a few controller images (the EKS-optimized AMI's own root
# volume is 20 GiB; this leaves room for image pulls during upgrades).
SYSTEM_ROOT_VOLUME_GIB = 50


def _trust(service: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]})


def role_name(cluster: str, region: str, purpose: str) -> str:
    """IAM role names are per account: the Region keeps two clusters of one name apart (the spec rules keep it
    within IAM's 64 characters)."""
    return f"{cluster}-{region}-eks-{purpose}"


def control_subnet_cidr(vpc_cidr: str) -> str:
    """The tenth sixteenth of the VPC, after the compute half and the public sixteenth."""
    return str(list(ipaddress.ip_network(vpc_cidr).subnets(prefixlen_diff=4))[9])


def render(spec: Spec, spec_file: str = "spec.yaml", subnet_id: str | None = None,
           vpc_id: str | None = None, system_apart: bool = False) -> RenderedDocuments:
    """``spec_file`` is what the Slurm backends name in node scripts; EKS nodes run none of fmcluster's.
    ``system_apart``: the created network's compute AZ (a Capacity Block's) does not offer the system nodes'
    type, so they go to the control plane's second subnet (in an AZ that does), routed through the NAT gateway."""
    rendered = RenderedDocuments(backend="eks")
    instance_tags = resource_tags(spec)
    network = render_network(spec)
    if network is not None:
        vpc_id = network.vpc_id
        subnet = network.compute_subnet_id
        rendered.documents.extend(network.documents)
        rendered.notes.append(network_note(network, "the NAT gateway") + "; EKS's control plane also takes a "
                              "subnet in a second Availability Zone, chosen at create time")
    else:
        subnet = spec.network.subnet_id or subnet_id or SUBNET_TO_RESOLVE
        rendered.notes.append("EKS's control plane takes subnets in two Availability Zones: the nodes' subnet and one "
                              "of the same VPC in another zone, picked at create time")

    def add(filename: str, kind: str, key: str, service: str, operations: dict[str, str], template: str,
            **context: object) -> None:
        context.setdefault("tags", resource_tags(spec, f"{kind}:{key}"))
        text, body = render_yaml(template, instance_tags=instance_tags, **context)
        rendered.documents.append(Document(filename, kind, key, service, operations, text, body))

    if network is not None:
        add("subnet-control.yaml", "subnet", CONTROL_SUBNET, "ec2", {"create": "CreateSubnet"},
            "network/subnet.yaml.j2", vpc_key=VPC_KEY, cidr=control_subnet_cidr(spec.network.vpc_cidr), public=False,
            availability_zone=SECOND_ZONE_REFERENCE,
            tags={**resource_tags(spec, f"subnet:{CONTROL_SUBNET}"), "Name": f"{spec.name}-{CONTROL_SUBNET}"},
            purpose="subnet in a second Availability Zone for the EKS control plane (EKS requires two)")
        control_subnet = f"${{subnet.{CONTROL_SUBNET}.id}}"
        if system_apart:
            text, body = render_yaml(
                "network/route_table.yaml.j2", key=CONTROL_SUBNET, vpc_key=VPC_KEY, subnet_key=CONTROL_SUBNET,
                nat_key=VPC_KEY, igw_key=None,
                tags={**resource_tags(spec, f"route_table:{CONTROL_SUBNET}"), "Name": f"{spec.name}-{CONTROL_SUBNET}"},
                purpose="second subnet's routes (the system nodes there): the internet through the NAT gateway")
            rendered.documents.append(Document("route-table-control.yaml", "route_table", CONTROL_SUBNET, "ec2",
                                               {"create": "CreateRouteTable", "route": "CreateRoute",
                                                "associate": "AssociateRouteTable"}, text, body))
    else:
        control_subnet = CONTROL_SUBNET_REFERENCE

    add("security-group.yaml", "security_group", "cluster", "ec2",
        {"create": "CreateSecurityGroup", "ingress": "AuthorizeSecurityGroupIngress",
         "egress": "AuthorizeSecurityGroupEgress"},
        "eks/security_group.yaml.j2", name=f"{spec.name}-nodes", cluster=spec.name,
        vpc_id=vpc_id or "${network.vpc_id}")
    add("iam-role-cluster.yaml", "iam_role", "cluster", "iam", {"role": "CreateRole"}, "eks/iam_role.yaml.j2",
        cluster=spec.name, role_name=role_name(spec.name, spec.region, "cluster"),
        purpose="EKS cluster role (EKS manages the control plane's network interfaces with it)",
        assume_role_policy=_trust("eks.amazonaws.com"), managed_policy_arns=CLUSTER_POLICIES)
    add("iam-role-nodes.yaml", "iam_role", "nodes", "iam", {"role": "CreateRole"}, "eks/iam_role.yaml.j2",
        cluster=spec.name, role_name=role_name(spec.name, spec.region, "nodes"),
        purpose="EKS node role (every managed node group's instances)",
        assume_role_policy=_trust("ec2.amazonaws.com"),
        managed_policy_arns=[*NODE_POLICIES, *spec.iam.additional_policies])
    add("eks-cluster.yaml", "eks_cluster", spec.name, "eks", {"": "CreateCluster"}, "eks/cluster.yaml.j2",
        name=spec.name, version=spec.kubernetes.version, subnets=[subnet, control_subnet])
    for addon, purpose in ADDONS.items():
        values, note = ADDON_CONFIGURATION.get(addon, (None, ""))
        add(f"eks-addon-{addon}.yaml", "eks_addon", addon, "eks", {"": "CreateAddon"}, "eks/addon.yaml.j2",
            cluster=spec.name, name=addon, purpose=purpose, configuration_note=note,
            configuration_values=json.dumps(values, sort_keys=True, separators=(",", ":")) if values else None)

    if node_repair.wanted(spec):
        add(f"eks-addon-{node_repair.ADDON}.yaml", "eks_addon", node_repair.ADDON, "eks", {"": "CreateAddon"},
            "eks/addon.yaml.j2", cluster=spec.name, name=node_repair.ADDON, purpose=node_repair.ADDON_PURPOSE,
            configuration_note="", configuration_values=None)

    storage.lustre(add, spec, subnet)

    placement_groups = {q.name for q in spec.queues if decisions.placement_group_enabled(q)}
    for name in sorted(placement_groups):
        add(f"placement-group-{name}.yaml", "placement_group", name, "ec2", {"": "CreatePlacementGroup"},
            "pcs/placement_group.yaml.j2", name=f"{spec.name}-{name}")
    for queue in spec.queues:
        _queue_documents(spec, queue, subnet, queue.name in placement_groups, add)
        scratch = local_storage.note(queue)
        if scratch:
            rendered.notes.append(scratch)
    _system_documents(spec, control_subnet if network is not None and system_apart else subnet, add)
    _autoscaler_documents(spec, add)

    rendered.examples += [dra_driver.example(queue, kube_manifests.WORKLOAD_NAMESPACE) for queue in spec.queues
                          if dra_driver.serves(queue)]
    for manifest in kube_manifests.manifests(spec):
        key = object_key(manifest)
        name = manifest["metadata"]["name"].replace(".", "-")
        rendered.documents.append(Document(f"k8s-{manifest['kind'].lower()}-{name}.yaml", "kube_object", key,
                                           "kubernetes", {"": "apply"}, _dump(manifest),
                                           manifest))
    return rendered


def _dump(manifest: dict) -> str:
    # libyaml when present: the scheduler releases are megabytes of CRD schema, which the pure-Python dumper
    # takes seconds over.
    return yaml.dump(manifest, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def _queue_documents(spec: Spec, queue: Queue, subnet: str, placement_group: bool, add: object) -> None:
    types = instance_types_of(queue)
    capacity = queue.capacity
    # A Capacity Block's template names its type (EKS guide); a queue of several types names them in the node
    # group instead (EKS takes them in one place only).
    in_template = len(types) == 1
    interfaces = decisions.efa_network_interfaces(queue) or [{"card": 0, "device": 0, "efa": False,
                                                              "efa_only": False}]
    add(f"launch-template-{queue.name}.yaml", "launch_template", queue.name, "ec2", {"": "CreateLaunchTemplate"},
        "eks/launch_template.yaml.j2", name=f"{spec.name}-{queue.name}", queue=queue.name, cluster=spec.name,
        instance_type=queue.instance_type, instance_type_in_template=in_template, key_name=spec.network.ssh.key_name,
        root_volume_gib=decisions.queue_root_volume_gib(spec, queue), reservation_id=capacity.reservation_id,
        resource_group_arn=capacity.resource_group_arn, capacity_block=capacity.type == "capacity-block",
        placement_group=queue.name if placement_group else None, network_interfaces=interfaces,
        efa=decisions.efa_enabled(queue), extra_security_groups=spec.network.additional_security_groups,
        node_config=local_storage.node_config(queue), scratch_path=local_storage.scratch_path(queue),
        ultraserver=capacity.ultraserver)
    add(f"eks-nodegroup-{queue.name}.yaml", "eks_nodegroup", queue.name, "eks", {"": "CreateNodegroup"},
        "eks/nodegroup.yaml.j2", cluster=spec.name, name=queue.name, purpose=f'queue "{queue.name}"',
        kubernetes_version=spec.kubernetes.version,
        instance_types=list(types), taints=burn_in_hold.taints(queue),
        instance_type_in_template=in_template, min_size=min_nodes(queue), max_size=max_nodes(queue),
        # A fixed queue runs its count; an elastic one starts at its min, and from then on the Cluster Autoscaler
        # sets the desired size (fmcluster compares and changes only min and max of such a group).
        desired_size=min_nodes(queue), subnet_id=queue.subnet_id or subnet, ami_type=node_image(queue).ami_type,
        capacity_type=CAPACITY_TYPES[capacity.type], labels=kube_manifests.node_labels(queue),
        node_repair=node_repair.node_repair_config(queue), node_repair_note=node_repair.plan_note(queue) or "off",
        **_elastic_tags(spec, queue))


def _elastic_tags(spec: Spec, queue: Queue) -> dict[str, dict[str, str]]:
    """An elastic queue's node group also carries what the Cluster Autoscaler needs to scale it from zero."""
    if not autoscaler_install.is_elastic(queue):
        return {}
    return {"tags": {**resource_tags(spec, f"eks_nodegroup:{queue.name}"), **scale_from_zero.nodegroup_tags(queue)}}


def _autoscaler_documents(spec: Spec, add: object) -> None:
    """With an elastic queue: the Cluster Autoscaler's IAM role and the EKS Pod Identity association that hands it
    to the autoscaler's ServiceAccount (its Kubernetes objects are among the manifests)."""
    if autoscaler_install.wanted(spec) is None:
        return
    name = role_name(spec.name, spec.region, autoscaler_iam.ROLE_PURPOSE)
    add("iam-role-autoscaler.yaml", "iam_role", autoscaler_iam.ROLE_PURPOSE, "iam",
        {"role": "CreateRole", "inline_policy": "PutRolePolicy"}, "eks/pod_identity_role.yaml.j2", cluster=spec.name,
        role_name=name, purpose="Cluster Autoscaler role (EKS Pod Identity)",
        assume_role_policy=json.dumps(autoscaler_iam.trust_policy()), policy_name=autoscaler_iam.POLICY_NAME,
        policy=json.dumps(autoscaler_iam.permissions_policy(spec)),
        policy_note="Describe calls on *, which AWS scopes no further; DescribeNodegroup on this cluster's node "
                    "groups; SetDesiredCapacity and TerminateInstanceInAutoScalingGroup only on Auto Scaling groups "
                    f"tagged {autoscaler_iam.CLUSTER_NAME_TAG}={spec.name} in {spec.region}")
    add("eks-pod-identity-autoscaler.yaml", "eks_pod_identity_association", autoscaler_iam.ROLE_PURPOSE, "eks",
        {"": "CreatePodIdentityAssociation"}, "eks/pod_identity_association.yaml.j2", cluster=spec.name,
        purpose="the Cluster Autoscaler's AWS credentials", namespace=autoscaler_install.NAMESPACE,
        service_account=autoscaler_install.SERVICE_ACCOUNT, role_key=autoscaler_iam.ROLE_PURPOSE)


def _system_documents(spec: Spec, subnet: str, add: object) -> None:
    """The ``system`` node group (:mod:`fmcluster.backends.eks.nodes.system_nodes`): On-Demand, no EFA and no placement
    group (its pods talk to the API server, not to each other), labelled and tainted so that only cluster software
    lands there, in the nodes' private subnet (whose route reaches the registries and the EKS API), or in the
    second private subnet when the nodes' AZ does not offer its type. Its launch
    template does for it what the queues' do: IMDSv2, an encrypted root volume, the cluster's security groups."""
    name = system_nodes.NODEGROUP_NAME
    instance_type = spec.kubernetes.system_instance_type
    count = spec.kubernetes.system_nodes
    add(f"launch-template-{name}.yaml", "launch_template", name, "ec2", {"": "CreateLaunchTemplate"},
        "eks/launch_template.yaml.j2", name=f"{spec.name}-{name}", queue=name, cluster=spec.name,
        instance_type=instance_type, instance_type_in_template=True, key_name=spec.network.ssh.key_name,
        root_volume_gib=SYSTEM_ROOT_VOLUME_GIB, reservation_id=None, resource_group_arn=None, capacity_block=False,
        placement_group=None, network_interfaces=[{"card": 0, "device": 0, "efa": False, "efa_only": False}],
        efa=False, extra_security_groups=spec.network.additional_security_groups, node_config=None,
        scratch_path=None, ultraserver=None)
    add(f"eks-nodegroup-{name}.yaml", "eks_nodegroup", name, "eks", {"": "CreateNodegroup"},
        "eks/nodegroup.yaml.j2", cluster=spec.name, name=name, purpose="cluster software (the system node group)",
        kubernetes_version=spec.kubernetes.version,
        instance_types=[instance_type], instance_type_in_template=True, min_size=count, max_size=count,
        desired_size=count, subnet_id=subnet,
        ami_type=standard_image(hardware(instance_type).architecture or "x86_64").ami_type,
        capacity_type=CAPACITY_TYPES["on-demand"], labels=dict(system_nodes.NODE_SELECTOR),
        taints=[system_nodes.EKS_TAINT], node_repair=None, node_repair_note="")
