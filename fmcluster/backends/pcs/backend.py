"""AWS PCS backend: spec → the resources PCS needs, for the engine to reconcile; and what PCS holds now.

PCS has no waiters: resources are polled by status. The create order (security group → placement groups,
launch templates, instance profile, FSx → cluster → node groups → queues) is not written here: it follows
from the references in the rendered documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from fmcluster.aws.build import SHARED, Maker, build, by_key
from fmcluster.aws.discovery import (
    Discovered,
    instance_found,
    instance_row,
    scan_ec2,
    scan_fsx,
    scan_instances,
    scan_role,
)
from fmcluster.aws.ec2 import LaunchTemplate, PlacementGroup, error_code
from fmcluster.aws.efs import EfsFileSystem, scan_efs
from fmcluster.aws.existing_storage import ExistingEfs, ExistingFsxLustre, ExistingFsxVolume
from fmcluster.aws.fsx import FsxLustre, FsxOpenZfs
from fmcluster.aws.fsx_data_repository import FsxDataRepository
from fmcluster.aws.guard import scan_guard
from fmcluster.aws.iam import InstanceProfile
from fmcluster.aws.ownership import is_ours
from fmcluster.backends.lazy import LifecycleDefaults
from fmcluster.backends.pcs.decisions import PCS_SIZE_LIMITS, pcs_nodes, pcs_size
from fmcluster.backends.pcs.images import SAMPLE_CAUTION, Image, architectures, find_images
from fmcluster.backends.pcs.logs import cluster_logs
from fmcluster.backends.pcs.profile import PROFILE
from fmcluster.backends.pcs.render import node_role_name
from fmcluster.backends.pcs.render import render as render_pcs
from fmcluster.backends.pcs.resources import PcsCluster, PcsNodeGroup, PcsQueue, error_info
from fmcluster.backends.pcs.spec_rules import LOGIN_GROUP
from fmcluster.backends.protocol import LoginNode, LogLine
from fmcluster.engine import Resource, reads
from fmcluster.engine.concurrently import gather
from fmcluster.errors import UsageError
from fmcluster.render.common import CLUSTER_ID_TAG, CLUSTER_TAG

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.backends.pcs.images import Image
    from fmcluster.spec.models import Spec

# Shared storage: /home made by fmcluster (FSx for OpenZFS or EFS), and look-ups of existing file systems.
def _id_and_name(item: dict[str, Any]) -> tuple[str, str]:
    """What PCS is asked for a cluster, node group or queue by: its id or its name."""
    return item["id"], item["name"]


STORAGE_RESOURCES: dict[str, type[Resource]] = {
    "fsx_openzfs": FsxOpenZfs, "efs": EfsFileSystem, "existing_fsx_lustre": ExistingFsxLustre,
    "existing_fsx_volume": ExistingFsxVolume, "existing_efs": ExistingEfs,
}



class PcsLifecycle(LifecycleDefaults):
    name = PROFILE.name

    def check_requirements(self) -> None:
        """PCS is driven through boto3 alone: nothing else to install."""

    # -- the plan -----------------------------------------------------------------------------------
    def _images(self, context: BackendContext) -> dict[str, Image]:
        """The image per architecture, found once and recorded: a newer sample AMI published later must not
        turn every re-run into a node-group update. A new ``image.ami`` in the spec is found again."""
        from dataclasses import asdict

        spec = context.require_spec()
        wanted = (spec.image.ami or "") if spec.image else ""
        recorded = context.recall("images", "pcs")
        if recorded is not None and recorded.get("ami") == wanted and \
                architectures(spec) <= set(recorded.get("images", {})):
            images = {arch: Image(**fields) for arch, fields in recorded["images"].items()}
            samples = [i for i in images.values() if i.sample]
            if samples:
                context.warn(f"{SAMPLE_CAUTION}: " + ", ".join(f"{i.name} ({i.ami_id})" for i in samples))
            return images
        images = find_images(spec, context.ctx.client("ec2"), warn=context.warn)
        # The command writes it (a reading command, status, does not: it finds them again next time).
        context.record("images", "pcs", None, {"ami": wanted, "images": {a: asdict(i) for a, i in images.items()}})
        return images

    def resources(self, context: BackendContext, options: dict[str, Any] | None = None) -> list[Resource]:
        spec = context.require_spec()
        placement = context.placement()
        rendered = render_pcs(spec, context.spec_file, subnet_id=placement.subnet_id, vpc_id=placement.vpc_id,
                              images=self._images(context))
        return build(rendered.documents, makers(spec, rendered.documents), PROFILE.display)

    def scales(self, path: str) -> bool:
        return path.startswith("scalingConfiguration.")

    def scale_data(self, data: dict[str, Any]) -> dict[str, Any]:
        # The size the new counts would pick is not the cluster's: :meth:`scaled` checks them against that.
        return {**data, "pcs": {"size": "auto"}}

    def scaled(self, old: Spec, new: Spec) -> Spec:
        """A PCS cluster's size is fixed when it is created: the new counts must fit the size it has."""
        size = pcs_size(old)
        if pcs_nodes(new) > PCS_SIZE_LIMITS[size]:
            raise UsageError(f"cannot scale: the cluster is size {size}, fixed at creation (at most "
                             f"{PCS_SIZE_LIMITS[size]} nodes, the login node included); these counts make "
                             f"{pcs_nodes(new)}. A bigger cluster needs a new one (pcs.size in its spec)")
        return new.model_copy(update={"pcs": old.pcs})

    # -- what AWS holds -----------------------------------------------------------------------------
    def _cluster(self, context: BackendContext) -> dict[str, Any] | None:
        def fetch() -> dict[str, Any] | None:
            try:
                return context.ctx.client("pcs").get_cluster(clusterIdentifier=context.name)["cluster"]
            except ClientError as exc:
                if error_code(exc) == "ResourceNotFoundException":
                    return None
                raise

        return reads.once(context.ctx, "pcs.Cluster", context.name, fetch, _id_and_name)

    def _tags(self, context: BackendContext, arn: str) -> dict[str, str] | None:
        """The resource's tags; None when it is gone (deleted between listing and asking)."""
        try:
            return context.ctx.tags(arn, lambda: context.ctx.client("pcs").list_tags_for_resource(
                resourceArn=arn).get("tags") or {})
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise

    def find_cluster_id(self, context: BackendContext) -> str | None:
        cluster = self._cluster(context)
        if cluster is None:
            return None

        tags = self._tags(context, cluster["arn"]) or {}
        return tags.get(CLUSTER_ID_TAG) if tags.get(CLUSTER_TAG) == context.name else None

    def _members(self, context: BackendContext, cluster_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The cluster's node groups and queues, each read whole (describe needs their scaling and errors); in a
        read-only pass, once for describe, discovery and the plan's reads together."""
        ctx = context.ctx
        pcs = ctx.client("pcs")

        def fetch() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            groups = [reads.once(ctx, "pcs.ComputeNodeGroup", s["id"], lambda s=s: pcs.get_compute_node_group(
                clusterIdentifier=cluster_id, computeNodeGroupIdentifier=s["id"])["computeNodeGroup"], _id_and_name)
                for page in pcs.get_paginator("list_compute_node_groups").paginate(clusterIdentifier=cluster_id)
                for s in page["computeNodeGroups"]]
            queues = [reads.once(ctx, "pcs.Queue", s["id"], lambda s=s: pcs.get_queue(
                clusterIdentifier=cluster_id, queueIdentifier=s["id"])["queue"], _id_and_name)
                for page in pcs.get_paginator("list_queues").paginate(clusterIdentifier=cluster_id)
                for s in page["queues"]]
            return groups, queues

        return reads.once(ctx, "pcs.ClusterMembers", cluster_id, fetch)

    def discover(self, context: BackendContext) -> list[Discovered]:
        ctx = context.ctx
        role = node_role_name(context.name, context.region)

        def cluster_part() -> list[Discovered]:
            cluster = self._cluster(context)
            return self._discover_cluster(context, cluster) if cluster is not None else []

        return gather([lambda: scan_ec2(ctx, context.stack_kinds), lambda: scan_fsx(ctx, context.stack_kinds),
                       lambda: scan_efs(ctx), lambda: scan_role(ctx, "nodes", role, role), cluster_part,
                       lambda: scan_guard(ctx),  # the budget guard's schedules and backstop
                       lambda: [instance_found(i, "a PCS node") for i in scan_instances(ctx)]])

    def _discover_cluster(self, context: BackendContext, cluster: dict[str, Any]) -> list[Discovered]:
        ctx = context.ctx
        tags = self._tags(context, cluster["arn"])
        if tags is None:
            return []
        ours = is_ours(tags, ctx)
        found = [Discovered(f"cluster:{cluster['name']}", cluster["id"], cluster["status"],
                            f"PCS cluster {cluster['name']} ({cluster['id']}, {cluster['status']})", ours,
                            PcsCluster(cluster["name"], known_id=cluster["id"]) if ours else None,
                            tags.get(CLUSTER_ID_TAG, ""))]
        if cluster["status"] == "DELETING":
            return found
        groups, queues = self._members(context, cluster["id"])
        for kind, items, make in (("compute_node_group", groups, PcsNodeGroup), ("queue", queues, PcsQueue)):
            for item in items:
                member_tags = self._tags(context, item["arn"])
                if member_tags is None:
                    continue
                mine = is_ours(member_tags, ctx)
                found.append(Discovered(
                    f"{kind}:{item['name']}", item["id"], item["status"],
                    f"PCS {kind.replace('_', ' ')} {item['name']} ({item['id']}, {item['status']})", mine,
                    make(item["name"], cluster=cluster["id"], known_id=item["id"]) if mine else None,
                    member_tags.get(CLUSTER_ID_TAG, "")))
        return found

    def describe(self, context: BackendContext) -> dict[str, Any]:
        report: dict[str, Any] = {"name": context.name, "backend": PROFILE.name, "region": context.region,
                                  "status": "NOT_FOUND", "backend_status": None, "queues": [],
                                  "slurm_endpoint": None, "instances": [], "problems": []}
        cluster = self._cluster(context)
        if cluster is None:
            return report
        endpoints = cluster.get("endpoints") or []
        report["slurm_endpoint"] = ", ".join(f"{e.get('privateIpAddress')}:{e.get('port')}" for e in endpoints) \
            or None
        report["backend_status"] = cluster["status"]
        report["error"] = error_info(cluster) or None
        groups, queues = ([], []) if cluster["status"] == "DELETING" else self._members(context, cluster["id"])
        by_id = {g["id"]: g for g in groups}
        instances: dict[str, list[dict[str, Any]]] = {}
        for instance in scan_instances(context.ctx, [{"Name": "tag:aws:pcs:cluster-id", "Values": [cluster["id"]]}]):
            group = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}.get("aws:pcs:compute-node-group-id")
            instances.setdefault(group or "", []).append(instance)
        for group in groups:
            for instance in instances.get(group["id"], []):
                report["instances"].append(instance_row(instance, group["name"]))
        for queue in queues:
            configs = queue.get("computeNodeGroupConfigurations") or []
            members = [by_id[c["computeNodeGroupId"]] for c in configs if c.get("computeNodeGroupId") in by_id]
            scaling = [m.get("scalingConfiguration", {}) for m in members]
            types = sorted({c["instanceType"] for m in members for c in m.get("instanceConfigs") or []})
            report["queues"].append({
                "name": queue["name"], "instance_type": ", ".join(types) or None,
                "min": sum(s.get("minInstanceCount", 0) for s in scaling),
                "max": sum(s.get("maxInstanceCount", 0) for s in scaling),
                "status": queue["status"], "node_group_status": ", ".join(m["status"] for m in members) or None,
                "running_instances": sum(1 for m in members for i in instances.get(m["id"], [])
                                         if i["State"]["Name"] == "running"),
            })
        # PCS keeps a node group ACTIVE when its nodes fail to launch or register ("provisioning status doesn't
        # indicate the overall health of the compute node group", botocore's PCS model); errorInfo says why.
        report["problems"] = [f"{kind} {item['name']}: {error_info(item)}"
                              for kind, items in (("compute node group", groups), ("queue", queues))
                              for item in items if error_info(item)]
        report["status"] = PROFILE.overall_status(cluster["status"],
                                                  [g["status"] for g in groups] + [q["status"] for q in queues])
        return report

    def login_node(self, context: BackendContext) -> LoginNode | None:
        cluster = self._cluster(context)
        if cluster is None:
            return None
        groups, _ = self._members(context, cluster["id"])
        login = next((g for g in groups if g["name"] == LOGIN_GROUP), None)
        if login is None:
            return None
        # PCS tags the instances it launches with their node group's id.
        nodes = sorted((i for i in scan_instances(context.ctx, [{"Name": "tag:aws:pcs:compute-node-group-id",
                                                                 "Values": [login["id"]]}])
                        if i["State"]["Name"] in ("pending", "running")),
                       key=lambda i: (i["State"]["Name"] != "running", str(i.get("LaunchTime"))))
        if not nodes:
            return None
        node = nodes[0]
        return LoginNode(node["InstanceId"], PROFILE.login_role, node["State"]["Name"], node.get("PublicIpAddress"),
                         node.get("PrivateIpAddress"))

    def cluster_logs(self, context: BackendContext, since: float | None, lines: int) -> tuple[list[LogLine], list[str]]:
        cluster = self._cluster(context)
        if cluster is None:
            return [], [f"PCS has no cluster {context.name} in {context.region}"]
        return cluster_logs(context.ctx, cluster, since, lines)


def makers(spec: Spec, documents: list[Any], options: dict[str, Any] | None = None) -> dict[str, Maker]:
    """Which resource applies each kind of document the PCS renderer makes (also what the spec-field walk builds
    its resources with, tests/spec/test_schema_walk.py)."""
    cluster = spec.name
    return SHARED | by_key({"placement_group": PlacementGroup, "launch_template": LaunchTemplate,
                            "instance_profile": InstanceProfile, "fsx_lustre": FsxLustre,
                            "fsx_data_repository": FsxDataRepository, "cluster": PcsCluster,
                            **STORAGE_RESOURCES}) | {
        "compute_node_group": lambda document: PcsNodeGroup(document.key, document, cluster=cluster),
        "queue": lambda document: PcsQueue(document.key, document, cluster=cluster)}
