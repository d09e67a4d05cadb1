"""Spec → ParallelCluster 3 cluster configuration."""

from __future__ import annotations

from fmcluster import __version__
from fmcluster.backends.slurm import node_software
from fmcluster.backends.slurm.health_checks import slurm_health_checks
from fmcluster.backends.slurm.openzfs import (
    OPENZFS_DEPLOYMENT_TYPE,
    OPENZFS_NFS_EXPORT_OPTIONS,
    openzfs_throughput_mbps,
)
from fmcluster.backends.slurm.topology_plugin import TOPOLOGY_PLUGIN, TREE, tree_topology
from fmcluster.catalog.hardware import hardware
from fmcluster.render.common import resource_tags
from fmcluster.render.documents import SUBNET_TO_RESOLVE, Document, RenderedDocuments
from fmcluster.render.network import network_note, render_network
from fmcluster.render.templates import render_yaml
from fmcluster.spec import decisions
from fmcluster.spec.models import Spec, instance_types_of, max_nodes, min_nodes

# Without an allowed network, SSH stays closed to the outside: a loopback-only rule is how ParallelCluster
# expresses "no one" (its own default would be 0.0.0.0/0).
SSH_CLOSED_CIDR = "127.0.0.1/32"
# ParallelCluster cannot create an OpenZFS file system, only mount a volume; fmcluster creates it first and
# fills this reference with its root volume's id at create time (``validate`` uses a stand-in offline).
OPENZFS_ROOT_VOLUME = "${fsx_openzfs.home.root_volume_id}"
# NFS ports an OpenZFS client needs (FSx OpenZFS guide, "Managing file system access"; ParallelCluster's FSX_PORTS).
OPENZFS_NFS_PORT_RANGES = ((111, 111), (2049, 2049), (20001, 20003))
PCLUSTER_VERSION = "3.16.1"
NODE_LAYOUT = node_software.NodeLayout("parallelcluster", imex_prolog_on_head=True, mounts_scratch=False,
                                       keeps_slurm_topology=True)
# ParallelCluster's cookbook makes each p6e-gb200 UltraServer a Slurm block (topology/block) itself
# (ULTRASERVER_INSTANCE_PREFIX_LIST in pcluster/constants.py, 3.16.1).
SCHEDULER_BLOCK_FAMILIES = ("p6e-gb200",)
# What the head node's topology step needs beyond ParallelCluster's own head-node policy (which already allows
# ec2:DescribeInstances): ec2:DescribeInstanceTopology. ParallelCluster's HeadNode/Iam takes policies only by ARN
# (AdditionalIamPolicies), so the narrowest it can name without fmcluster owning an IAM policy is AWS's read-only
# EC2 policy (ec2:Describe*), the one AWS's sample aws-samples/ec2-topology-aware-for-slurm names.
TOPOLOGY_READ_POLICY = "arn:aws:iam::aws:policy/AmazonEC2ReadOnlyAccess"
CAPACITY_TYPES = {
    "on-demand": "ONDEMAND",
    "spot": "SPOT",
    "reservation": "ONDEMAND",
    "capacity-block": "CAPACITY_BLOCK",
}
def render(
    spec: Spec,
    spec_file: str = "spec.yaml",
    subnet_id: str | None = None,
    vpc_id: str | None = None,
) -> RenderedDocuments:
    """Render the cluster configuration (first), then the requests for what fmcluster creates before it (an
    OpenZFS /home and its security group). ``subnet_id`` fills a subnet the spec left to create time."""
    rendered = RenderedDocuments(backend="parallelcluster")
    network = render_network(spec)
    compute_subnet = network.compute_subnet_id if network else spec.network.subnet_id or subnet_id or SUBNET_TO_RESOLVE
    if network is not None:
        vpc_id = network.vpc_id
        rendered.notes.append(network_note(network))
    if compute_subnet == SUBNET_TO_RESOLVE:
        rendered.notes.append("no subnet in the spec: the default VPC's subnet in an AZ that offers the "
                              f"instance types is chosen at create time ({SUBNET_TO_RESOLVE} stands in for it)")
    queues = []
    for queue in spec.queues:
        facts = hardware(queue.instance_type)
        efa = decisions.efa_enabled(queue)
        queues.append({
            "name": queue.name,
            "instance_type": queue.instance_type,
            "compute_resource": decisions.compute_resource_name(queue, "parallelcluster"),
            "capacity_type": CAPACITY_TYPES[queue.capacity.type],
            "reservation_id": queue.capacity.reservation_id,
            "resource_group_arn": queue.capacity.resource_group_arn,
            "ultraserver": queue.capacity.ultraserver,
            "min_count": min_nodes(queue),
            "max_count": max_nodes(queue),
            "efa": efa,
            "placement_group": decisions.placement_group_enabled(queue),
            "gpu_health_checks": slurm_health_checks(queue) and facts.has_gpus,
            "subnet_id": queue.subnet_id or compute_subnet,
            "instance_types": list(instance_types_of(queue)),
            "root_volume_gib": decisions.queue_root_volume_gib(spec, queue),
            "scratch_mount": decisions.scratch_mount(queue),
            "job_exclusive": decisions.job_exclusive(queue),
            "custom_settings": dict(queue.slurm_settings),
            "custom_actions": node_software.custom_actions(
                node_software.compute_steps(spec, queue, spec_file, NODE_LAYOUT)),
            # the cluster's policies, then the queue's own (ParallelCluster gives each queue its own role)
            "policies": list(dict.fromkeys([*spec.iam.additional_policies,
                                            *(queue.iam.additional_policies if queue.iam else [])])),
        })

    shared_storage = []
    lustre = spec.storage.lustre
    if lustre is not None:
        repositories = []
        if lustre.s3_import or lustre.s3_export:
            repositories.append({
                "name": "s3-data",
                "s3_path": lustre.s3_import or lustre.s3_export,
                "file_system_path": "/data",
                "batch_import": lustre.s3_import is not None,
                "export": lustre.s3_export is not None,
            })
        shared_storage.append({
            "kind": "lustre",
            "name": "lustre",
            "mount": lustre.mount,
            "existing_id": lustre.existing_id,
            "capacity_gib": lustre.capacity_gib,
            "deployment_type": lustre.deployment_type,
            "throughput_per_tib": lustre.throughput_per_tib,
            "deletion_policy": "Retain",
            "repositories": repositories,
        })
    home = spec.storage.home
    if home is not None:
        if home.existing_id:
            kind = "openzfs" if home.type == "openzfs" else "efs"
            shared_storage.append({"kind": kind, "name": "home", "mount": home.mount, "volume_id": home.existing_id,
                                   "existing_id": home.existing_id})
        elif home.type == "openzfs":
            rendered.notes.append("ParallelCluster mounts OpenZFS but cannot create it: fmcluster creates the "
                                  f"file system first and fills {OPENZFS_ROOT_VOLUME} with its root volume")
            shared_storage.append({"kind": "openzfs", "name": "home", "mount": home.mount,
                                   "volume_id": OPENZFS_ROOT_VOLUME})
        else:
            shared_storage.append({"kind": "efs", "name": "home", "mount": home.mount, "deletion_policy": "Retain",
                                   "existing_id": None})

    head_steps = node_software.head_steps(spec, spec_file, NODE_LAYOUT)
    tree = tree_topology(spec, SCHEDULER_BLOCK_FAMILIES)
    if tree:
        rendered.notes.append(f"{TOPOLOGY_PLUGIN}={TREE}: the head node keeps topology.conf from EC2 "
                              "DescribeInstanceTopology (at start and every 5 minutes)")
    objects = node_software.bucket_objects(spec, spec_file, NODE_LAYOUT)
    ssh = spec.network.ssh
    text, body = render_yaml(
        "parallelcluster/cluster.yaml.j2",
        pcluster_version=PCLUSTER_VERSION,
        fmcluster_version=__version__,
        spec_file=spec_file,
        region=spec.region,
        os=decisions.operating_system(spec),
        custom_ami=spec.image.ami if spec.image else None,
        head_node={
            "instance_type": spec.head_node.instance_type,
            "subnet_id": network.head_subnet_id if network else spec.network.head_subnet_id or compute_subnet,
            "key_name": ssh.key_name,
            "ssh_allowed_cidr": ssh.allowed_cidr or SSH_CLOSED_CIDR,
            "root_volume_gib": spec.head_node.root_volume_gib,
            "policies": list(dict.fromkeys([*([TOPOLOGY_READ_POLICY] if tree else []), *spec.iam.additional_policies])),
        },
        slurm={
            "scaledown_idle_minutes": spec.slurm.scaledown_idle_minutes,
            # DRAIN lets running jobs finish; a shrink then needs a compute-fleet stop, which `scale` asks about.
            "queue_update_strategy": "DRAIN",
            "database": spec.slurm.database,
            "custom_settings": [{name: value} for name, value in spec.slurm.custom_settings.items()]
            + ([{TOPOLOGY_PLUGIN: TREE}] if tree else []),
        },
        head_custom_actions=node_software.custom_actions(head_steps),
        scripts_bucket=node_software.BUCKET_REFERENCE if objects else None,
        bootstrap_buckets=sorted({b.run[len("s3://"):].split("/")[0] for b in spec.bootstrap
                                  if b.run.startswith("s3://")}),
        queues=queues,
        access={"policies": spec.iam.additional_policies, "security_groups": spec.network.security_groups,
                "additional_security_groups": spec.network.additional_security_groups},
        shared_storage=shared_storage,
        monitoring=spec.software.monitoring,
        # ParallelCluster puts these on its stack and everything the stack makes.
        tags=resource_tags(spec, f"pcluster_cluster:{spec.name}"),
    )
    rendered.documents.append(Document(
        filename="cluster-config.yaml", kind="pcluster_cluster", key=spec.name, service="pcluster",
        operations={"": "create_cluster"}, text=text, body=body,
    ))
    if home is not None and home.type == "openzfs" and not home.existing_id:
        _render_openzfs(rendered, spec, compute_subnet, vpc_id)
    if objects:
        text, body = render_yaml(
            "parallelcluster/scripts_bucket.yaml.j2", bucket=node_software.SCRIPTS_BUCKET, region=spec.region,
            tags=resource_tags(spec, "bucket:scripts"),
            objects=[{"key": f"{node_software.BUCKET_PREFIX}/{o.name}", "source": str(o.source), "sha256": o.sha256}
                     for o in objects])
        rendered.documents.append(Document(
            filename="scripts-bucket.yaml", kind="bucket", key="scripts", service="s3",
            operations={"create": "CreateBucket", "tagging": "PutBucketTagging", "versioning": "PutBucketVersioning",
                        "public_access": "PutPublicAccessBlock"}, text=text, body=body))
    if network is not None:
        rendered.documents.extend(network.documents)
    return rendered


def _render_openzfs(rendered: RenderedDocuments, spec: Spec, subnet_id: str, vpc_id: str | None) -> None:
    home = spec.storage.home
    assert home is not None
    ports = [str(low) if low == high else f"{low}-{high}" for low, high in OPENZFS_NFS_PORT_RANGES]
    text, body = render_yaml(
        "parallelcluster/fsx_openzfs_security_group.yaml.j2", name=f"{spec.name}-fsx-openzfs", cluster=spec.name,
        vpc_id=vpc_id or "${network.vpc_id}", ports=ports, port_ranges=OPENZFS_NFS_PORT_RANGES,
        tags=resource_tags(spec, "security_group:fsx_openzfs"))
    rendered.documents.append(Document(
        filename="fsx-openzfs-security-group.yaml", kind="security_group", key="fsx_openzfs", service="ec2",
        operations={"create": "CreateSecurityGroup", "ingress": "AuthorizeSecurityGroupIngress",
                    "egress": "AuthorizeSecurityGroupEgress"}, text=text, body=body))
    throughput = openzfs_throughput_mbps(spec)
    text, body = render_yaml(
        "parallelcluster/fsx_openzfs.yaml.j2", deployment_type=OPENZFS_DEPLOYMENT_TYPE, mount=home.mount,
        capacity_gib=home.capacity_gib, throughput_mbps=throughput, backup_retention_days=7, subnet_id=subnet_id,
        nfs_exports=[{"clients": "*", "options": OPENZFS_NFS_EXPORT_OPTIONS}],
        tags={**resource_tags(spec, "fsx_openzfs:home"), "Name": f"{spec.name}-home"})
    rendered.documents.append(Document(
        filename="fsx-openzfs.yaml", kind="fsx_openzfs", key="home", service="fsx",
        operations={"": "CreateFileSystem"}, text=text, body=body))
