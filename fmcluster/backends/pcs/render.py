"""Spec → every request document AWS PCS needs, in the order the engine creates them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fmcluster import catalog
from fmcluster.backends.pcs import decisions as pcs_decisions
from fmcluster.backends.pcs import home as pcs_home
from fmcluster.backends.pcs import topology as pcs_topology
from fmcluster.backends.pcs.spec_rules import LOGIN_GROUP, pcs_health_checks_supported
from fmcluster.backends.slurm import node_software
from fmcluster.backends.slurm.health_checks import slurm_health_checks
from fmcluster.catalog.hardware import hardware
from fmcluster.render import storage
from fmcluster.render.common import architecture, resource_tags
from fmcluster.render.documents import SUBNET_TO_RESOLVE, Document, RenderedDocuments
from fmcluster.render.network import network_note, render_network
from fmcluster.render.templates import render_yaml
from fmcluster.spec import decisions
from fmcluster.spec.models import Queue, Spec, instance_types_of, max_nodes, min_nodes

if TYPE_CHECKING:
    from fmcluster.backends.pcs.images import Image

PURCHASE_OPTIONS = {
    "on-demand": "ONDEMAND",
    "spot": "SPOT",
    "reservation": "ONDEMAND",
    "capacity-block": "CAPACITY_BLOCK",
}
# Stand-in for the root device name, which comes from the AMI (DescribeImages RootDeviceName) at create
# time: /dev/xvda is the root device of Amazon Linux AMIs, such as AWS's PCS sample AMIs.
ROOT_DEVICE_TO_RESOLVE = "/dev/xvda"
NODE_LAYOUT = node_software.NodeLayout("pcs", imex_prolog_on_head=False, mounts_scratch=True)
NODE_MANAGED_POLICIES = ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]
ASSUME_ROLE_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}
NODE_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": ["pcs:RegisterComputeNodeGroupInstance"], "Resource": "*"}],
}


def node_role_name(cluster: str, region: str) -> str:
    # PCS only accepts node roles named AWSPCS… or under /aws-pcs/; both hold here. IAM caps names at 64.
    return f"AWSPCS-{cluster}-{region}"[:64]


def render(
    spec: Spec,
    spec_file: str = "spec.yaml",
    subnet_id: str | None = None,
    vpc_id: str | None = None,
    images: dict[str, Image] | None = None,
) -> RenderedDocuments:
    """``images`` maps an architecture to the image its nodes boot (:func:`fmcluster.backends.pcs.images.find_images`);
    without it (offline) no AMI is named unless the spec gives one, and the root device name is a stand-in."""
    rendered = RenderedDocuments(backend="pcs")
    tags = resource_tags(spec)
    network = render_network(spec)
    subnet = network.compute_subnet_id if network else spec.network.subnet_id or subnet_id or SUBNET_TO_RESOLVE
    login_subnet = network.head_subnet_id if network else subnet
    if network is not None:
        vpc_id = network.vpc_id
        rendered.documents.extend(network.documents)
        rendered.notes.append(network_note(network))
    if subnet == SUBNET_TO_RESOLVE:
        rendered.notes.append("no subnet in the spec: the default VPC's subnet in an AZ that offers the "
                              f"instance types is chosen at create time ({SUBNET_TO_RESOLVE} stands in for it)")
    tree_note = pcs_topology.network_tree_note(spec)
    if tree_note:
        rendered.notes.append(tree_note)
    if images is None:
        rendered.notes.append("the launch templates' root device name comes from the AMI at create time "
                              f"(DescribeImages RootDeviceName); {ROOT_DEVICE_TO_RESOLVE} stands in for it")

    def add(filename: str, kind: str, key: str, service: str, operations: dict[str, str], template: str,
            **context: object) -> None:
        # Each document is tagged as the plan's resource it makes; what it launches gets the cluster's tags.
        context["tags"] = resource_tags(spec, f"{kind}:{key}")
        text, body = render_yaml(template, instance_tags=tags, **context)
        rendered.documents.append(Document(filename, kind, key, service, operations, text, body))

    ssh = spec.network.ssh
    add("security-group.yaml", "security_group", "cluster", "ec2",
        {"create": "CreateSecurityGroup", "ingress": "AuthorizeSecurityGroupIngress",
         "egress": "AuthorizeSecurityGroupEgress"},
        "pcs/security_group.yaml.j2", name=f"{spec.name}-cluster", cluster=spec.name,
        vpc_id=vpc_id or "${network.vpc_id}")
    if ssh.allowed_cidr:
        add("security-group-login.yaml", "security_group", "login", "ec2",
            {"create": "CreateSecurityGroup", "ingress": "AuthorizeSecurityGroupIngress",
             "egress": "AuthorizeSecurityGroupEgress"},
            "pcs/login_security_group.yaml.j2", name=f"{spec.name}-login-ssh", cluster=spec.name,
            vpc_id=vpc_id or "${network.vpc_id}", ssh_allowed_cidr=ssh.allowed_cidr)

    placement_groups = {q.name: f"{spec.name}-{q.name}" for q in spec.queues if decisions.placement_group_enabled(q)}
    for queue_name, group_name in placement_groups.items():
        add(f"placement-group-{queue_name}.yaml", "placement_group", queue_name, "ec2",
            {"": "CreatePlacementGroup"}, "pcs/placement_group.yaml.j2", name=group_name)

    role = node_role_name(spec.name, spec.region)
    add("instance-profile.yaml", "instance_profile", "nodes", "iam",
        {"role": "CreateRole", "inline_policy": "PutRolePolicy", "profile": "CreateInstanceProfile"},
        "pcs/instance_profile.yaml.j2", cluster=spec.name, role_name=role, profile_name=role,
        assume_role_policy=json.dumps(ASSUME_ROLE_POLICY), node_policy=json.dumps(NODE_POLICY),
        managed_policy_arns=[*NODE_MANAGED_POLICIES, *spec.iam.additional_policies])

    lustre_mount = storage.lustre(add, spec, subnet)
    lustre_mounts = [lustre_mount] if lustre_mount else []
    home_mount = pcs_home.home_documents(add, spec, subnet)
    mounts = lustre_mounts + ([home_mount] if home_mount else [])

    add("cluster.yaml", "cluster", spec.name, "pcs", {"": "CreateCluster"}, "pcs/cluster.yaml.j2",
        name=spec.name, slurm_version=spec.slurm.version, size=pcs_decisions.pcs_size(spec),
        size_limit=pcs_decisions.PCS_SIZE_LIMITS[pcs_decisions.pcs_size(spec)], subnet_id=subnet,
        scaledown_idle_seconds=spec.slurm.scaledown_idle_minutes * 60, accounting=spec.slurm.accounting,
        custom_settings=_settings(_cluster_settings(spec)))

    groups = [_login_group(spec, spec_file, login_subnet)] + [
        {
            "name": decisions.compute_resource_name(q, "pcs"),
            "queue": q.name,
            "instance_type": q.instance_type,
            "instance_types": list(instance_types_of(q)),
            "min_count": min_nodes(q),
            "max_count": max_nodes(q),
            "purchase_option": PURCHASE_OPTIONS[q.capacity.type],
            "reservation_id": q.capacity.reservation_id,
            "resource_group_arn": q.capacity.resource_group_arn,
            "ultraserver": q.capacity.ultraserver,
            "capacity_block": q.capacity.type == "capacity-block",
            # the placement group document's key: the launch template refers to it by ${placement_group.<key>.name}
            "placement_group": q.name if q.name in placement_groups else None,
            "network_interfaces": decisions.efa_network_interfaces(q),
            "subnet_id": q.subnet_id or subnet,
            "root_volume_gib": decisions.queue_root_volume_gib(spec, q),
            "steps": node_software.compute_steps(spec, q, spec_file, NODE_LAYOUT),
            "health_checks": _health_checks(spec, q),
            "queue_settings": _queue_settings(q),
        }
        for q in spec.queues
    ]
    for group in groups:
        user_data = node_software.pcs_user_data(spec.name, group["name"], mounts, group["steps"])
        add(f"launch-template-{group['name']}.yaml", "launch_template", group["name"], "ec2",
            {"": "CreateLaunchTemplate"}, "pcs/launch_template.yaml.j2",
            name=f"{spec.name}-{group['name']}", node_group=group["name"], instance_type=group["instance_type"],
            key_name=ssh.key_name, root_volume_gib=group["root_volume_gib"],
            root_device_name=_root_device(group["instance_type"], images),
            reservation_id=group["reservation_id"], capacity_block=group["capacity_block"],
            resource_group_arn=group["resource_group_arn"], ultraserver=group["ultraserver"],
            placement_group=group["placement_group"], network_interfaces=group["network_interfaces"],
            login_security_group=bool(ssh.allowed_cidr) and group["name"] == LOGIN_GROUP, user_data=user_data,
            extra_security_groups=spec.network.additional_security_groups)
        add(f"compute-node-group-{group['name']}.yaml", "compute_node_group", group["name"], "pcs",
            {"": "CreateComputeNodeGroup"}, "pcs/compute_node_group.yaml.j2",
            cluster=spec.name, name=group["name"], ami_id=_ami_for(spec, group["instance_type"], images),
            subnet_id=group["subnet_id"], health_checks=group["health_checks"],
            purchase_option=group["purchase_option"], launch_template=group["name"],
            min_count=group["min_count"], max_count=group["max_count"], instance_type=group["instance_type"],
            instance_types=group.get("instance_types") or [group["instance_type"]])
    for group in groups[1:]:
        add(f"queue-{group['queue']}.yaml", "queue", group["queue"], "pcs", {"": "CreateQueue"},
            "pcs/queue.yaml.j2", cluster=spec.name, name=group["queue"], node_group=group["name"],
            custom_settings=group["queue_settings"])
    return rendered


def _ami_for(spec: Spec, instance_type: str, images: dict[str, Image] | None) -> str | None:
    if spec.image is not None and spec.image.ami is not None:
        return spec.image.ami
    image = (images or {}).get(architecture(instance_type))
    return image.ami_id if image else None


def _root_device(instance_type: str, images: dict[str, Image] | None) -> str:
    image = (images or {}).get(architecture(instance_type))
    return image.root_device_name if image else ROOT_DEVICE_TO_RESOLVE


def _settings(settings: dict[str, object]) -> list[dict[str, str]]:
    """Custom Slurm settings as PCS takes them (SlurmCustomSetting: parameterName, parameterValue)."""
    return [{"parameterName": name, "parameterValue": str(value)} for name, value in settings.items()]


def _cluster_settings(spec: Spec) -> dict[str, object]:
    """The spec's cluster settings, and the IMEX prolog where a queue's NVLink domain spans instances (the spec
    rules refuse a Prolog of the user's own then: PCS has one)."""
    settings: dict[str, object] = dict(spec.slurm.custom_settings)
    if decisions.imex_prolog(spec):
        settings["Prolog"] = pcs_decisions.PCS_IMEX_PROLOG
    return settings


def _queue_settings(queue: Queue) -> list[dict[str, str]]:
    """job_exclusive is Slurm's OverSubscribe=EXCLUSIVE on the partition (an allowed PCS queue setting)."""
    settings: dict[str, object] = {}
    if decisions.job_exclusive(queue):
        settings["OverSubscribe"] = "EXCLUSIVE"
    settings.update(queue.slurm_settings)
    return _settings(settings)


def _health_checks(spec: Spec, queue: Queue) -> dict[str, object] | None:
    """PCS instanceHealthChecks for an NVIDIA GPU queue on Slurm 26.05+: continuous monitoring, and DCGM's quick
    diagnostics each time a node starts (the least launch time; PCS picks the repair action). Otherwise none:
    the spec's rules refuse an explicit gpu_health_checks that PCS cannot honour."""
    facts = catalog.instance(queue.instance_type)
    described = hardware(queue.instance_type)  # a type outside the catalog: EC2 names the GPU's maker
    nvidia = bool(facts.accelerator.vendor == "nvidia") if facts and facts.accelerator else \
        described.has_gpus and "nvidia" in (described.accelerator_model or "").lower()
    if not (slurm_health_checks(queue) and nvidia and pcs_health_checks_supported(spec)):
        return None
    return {"healthMonitoring": {"mode": "STANDARD"}, "deepHealthChecks": {"onStart": {"profile": "QUICK"}}}


def _login_group(spec: Spec, spec_file: str, login_subnet: str) -> dict[str, Any]:
    """The head node becomes a static one-node login group: where users ssh in and submit jobs. It sits in
    network.head_subnet_id when the spec gives one (a public subnet users reach)."""
    subnet = spec.network.head_subnet_id or login_subnet
    return {
        "name": LOGIN_GROUP,
        "queue": None,
        "instance_type": spec.head_node.instance_type,
        "min_count": 1,
        "max_count": 1,
        "purchase_option": "ONDEMAND",
        "reservation_id": None,
        "resource_group_arn": None,
        "ultraserver": None,
        "capacity_block": False,
        "placement_group": None,
        "network_interfaces": [],
        "subnet_id": subnet,
        "root_volume_gib": spec.head_node.root_volume_gib,
        "steps": node_software.head_steps(spec, spec_file, NODE_LAYOUT),
        "health_checks": None,
        "queue_settings": [],
    }
