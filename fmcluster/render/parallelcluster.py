"""Spec → ParallelCluster 3 cluster configuration."""

from __future__ import annotations

from fmcluster import __version__, catalog
from fmcluster.render.common import (
    PCLUSTER_VERSION,
    SSH_CLOSED_CIDR,
    compute_root_volume_gib,
    resource_tags,
)
from fmcluster.render.documents import SUBNET_TO_RESOLVE, Document, RenderedDocuments
from fmcluster.render.templates import render_yaml
from fmcluster.spec import decisions
from fmcluster.spec.models import Spec, max_nodes, min_nodes

CAPACITY_TYPES = {
    "on-demand": "ONDEMAND",
    "spot": "SPOT",
    "reservation": "ONDEMAND",
    "capacity-block": "CAPACITY_BLOCK",
}
# ParallelCluster cannot create an OpenZFS file system, only mount a volume; fmcluster creates it first.
OPENZFS_VOLUME_TO_CREATE = "fsvol-00000000000000000"


def render_parallelcluster(
    spec: Spec,
    spec_file: str = "spec.yaml",
    subnet_id: str | None = None,
    openzfs_volume_id: str | None = None,
) -> RenderedDocuments:
    """Render the cluster configuration. ``subnet_id`` fills a subnet the spec left to create time."""
    rendered = RenderedDocuments(backend="parallelcluster")
    compute_subnet = spec.network.subnet_id or subnet_id or SUBNET_TO_RESOLVE
    if compute_subnet == SUBNET_TO_RESOLVE:
        rendered.notes.append("no subnet in the spec: the default VPC's subnet in an AZ that offers the "
                              f"instance types is chosen at create time ({SUBNET_TO_RESOLVE} stands in for it)")
    queues = []
    for queue in spec.queues:
        facts = catalog.instance(queue.instance_type)
        efa = decisions.efa_enabled(queue)
        queues.append({
            "name": queue.name,
            "instance_type": queue.instance_type,
            "compute_resource": decisions.compute_resource_name(queue, "parallelcluster"),
            "capacity_type": CAPACITY_TYPES[queue.capacity.type],
            "reservation_id": queue.capacity.reservation_id,
            "min_count": min_nodes(queue),
            "max_count": max_nodes(queue),
            "efa": efa,
            "efa_gdr": efa and bool(facts and facts.accelerator.kind == "gpu"),
            "placement_group": decisions.placement_group_enabled(queue),
            "gpu_health_checks": queue.gpu_health_checks and bool(facts and facts.accelerator.kind == "gpu"),
            "subnet_id": compute_subnet,
            "root_volume_gib": compute_root_volume_gib(spec),
            "has_nvme": bool(facts and facts.nvme_gb),
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
        if home.type == "openzfs":
            volume = openzfs_volume_id or OPENZFS_VOLUME_TO_CREATE
            if volume == OPENZFS_VOLUME_TO_CREATE:
                rendered.notes.append("ParallelCluster mounts OpenZFS but cannot create it: fmcluster creates the "
                                      f"file system first ({OPENZFS_VOLUME_TO_CREATE} stands in for its root volume)")
            shared_storage.append({"kind": "openzfs", "name": "home", "mount": home.mount, "volume_id": volume})
        else:
            shared_storage.append({"kind": "efs", "name": "home", "mount": home.mount, "deletion_policy": "Retain"})

    ssh = spec.network.ssh
    text, body = render_yaml(
        "parallelcluster/cluster.yaml.j2",
        pcluster_version=PCLUSTER_VERSION,
        fmcluster_version=__version__,
        spec_file=spec_file,
        region=spec.region,
        os=spec.os,
        custom_ami=spec.image.ami if spec.image else None,
        head_node={
            "instance_type": spec.head_node.instance_type,
            "subnet_id": spec.network.head_subnet_id or compute_subnet,
            "key_name": ssh.key_name,
            "ssh_allowed_cidr": ssh.allowed_cidr or SSH_CLOSED_CIDR,
            "root_volume_gib": spec.head_node.root_volume_gib,
        },
        slurm={
            "scaledown_idle_minutes": spec.slurm.scaledown_idle_minutes,
            # DRAIN lets running jobs finish; a shrink then needs a compute-fleet stop, which `scale` asks about.
            "queue_update_strategy": "DRAIN",
            "database": spec.slurm.database,
        },
        queues=queues,
        shared_storage=shared_storage,
        monitoring=spec.software.monitoring,
        tags=resource_tags(spec),
    )
    rendered.documents.append(Document(
        filename="cluster-config.yaml", kind="pcluster_cluster", key=spec.name, service="pcluster",
        operations={"": "create_cluster"}, text=text, body=body,
    ))
    return rendered
