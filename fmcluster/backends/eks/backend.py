"""Amazon EKS backend: spec → the AWS resources and Kubernetes objects an EKS training cluster needs, for the
engine to reconcile; and what EKS holds now.

The create order (network → roles and security group → cluster → add-ons, launch templates, Lustre → node groups
→ the add-ons whose pods run on nodes; Kubernetes objects after the cluster, custom resources after their CRD)
follows from the references in the rendered documents and the edges :func:`apply_order.wire` adds.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from fmcluster.aws import unread
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
from fmcluster.aws.existing_storage import ExistingFsxLustre
from fmcluster.aws.fsx import FsxLustre
from fmcluster.aws.fsx_data_repository import FsxDataRepository
from fmcluster.aws.guard import scan_guard
from fmcluster.aws.iam import IamRole
from fmcluster.aws.ownership import is_ours
from fmcluster.aws.placement import Placement
from fmcluster.backends.eks import cluster_view
from fmcluster.backends.eks.addon_resource import EksAddon
from fmcluster.backends.eks.burn_in import gate_resource, verdicts
from fmcluster.backends.eks.cluster_resource import EksCluster
from fmcluster.backends.eks.kubernetes import client as kube
from fmcluster.backends.eks.nodegroup_resource import EksNodegroup
from fmcluster.backends.eks.nodes import burn_in_hold, system_nodes, ultraserver_resource
from fmcluster.backends.eks.nodes.instance_types import template_type
from fmcluster.backends.eks.profile import PROFILE
from fmcluster.backends.eks.render import ADDONS_ON_NODES, role_name
from fmcluster.backends.eks.render import render as render_eks
from fmcluster.backends.eks.resources import health_issues
from fmcluster.backends.eks.software import (
    apply_order,
    autoscaler_install,
    autoscaler_status,
    dra_driver,
    scheduler_status,
)
from fmcluster.backends.eks.software.autoscaler_iam import ROLE_PURPOSE as AUTOSCALER_ROLE
from fmcluster.backends.eks.software.manifests import managed_kinds
from fmcluster.backends.eks.software.pod_identity import PodIdentityAssociation
from fmcluster.backends.lazy import LifecycleDefaults
from fmcluster.backends.protocol import KubeEndpoint, LoginNode, LogLine
from fmcluster.catalog import eks_versions
from fmcluster.engine import Resource, reads
from fmcluster.engine.concurrently import gather
from fmcluster.errors import FmclusterError, UsageError
from fmcluster.render.common import CLUSTER_ID_TAG, CLUSTER_TAG, RESOURCE_TAG
from fmcluster.spec.networking import creates_network

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.engine import ResourceChange
    from fmcluster.spec.models import Spec

ROLES = ("cluster", "nodes", AUTOSCALER_ROLE)


class EksLifecycle(LifecycleDefaults):
    name = PROFILE.name

    def check_requirements(self) -> None:
        """EKS is driven through boto3 and the Kubernetes API client of the kubernetes extra (checked by the
        registry): nothing else to install."""

    # -- the plan -----------------------------------------------------------------------------------
    def _control_plane_network(self, context: BackendContext, placement: Placement) -> dict[str, str]:
        """Where the control plane's second subnet goes, decided once and recorded: a second Availability Zone
        for the network fmcluster makes, else a subnet of the nodes' VPC in another zone (EKS guide, "View Amazon
        EKS networking requirements for VPC and subnets": subnets in at least two Availability Zones)."""
        recorded = context.recall("control_plane", "network")
        if recorded is not None:
            return dict(recorded)
        ec2 = context.ctx.client("ec2")
        zones = sorted(z["ZoneName"] for z in ec2.describe_availability_zones(Filters=[
            {"Name": "zone-type", "Values": ["availability-zone"]}, {"Name": "state", "Values": ["available"]}],
        )["AvailabilityZones"] if z["ZoneName"] != placement.availability_zone)
        if creates_network(context.require_spec()):
            if not zones:
                raise UsageError(f"EKS needs subnets in two Availability Zones, and {context.region} offers only "
                                 f"{placement.availability_zone}")
            # The other nodes' AZ when the capacity's AZ does not offer their type (fmcluster.aws.placement)
            values = {"network.second_availability_zone": placement.head_zone or zones[0]}
        else:
            subnets = sorted((s["AvailabilityZone"], s["SubnetId"]) for page in ec2.get_paginator(
                "describe_subnets").paginate(Filters=[{"Name": "vpc-id", "Values": [placement.vpc_id]}])
                for s in page["Subnets"] if s["AvailabilityZone"] in zones)
            if not subnets:
                raise UsageError(f"EKS needs subnets in two Availability Zones, and VPC {placement.vpc_id} has "
                                 f"subnets only in {placement.availability_zone}: add a subnet in another zone of "
                                 f"{context.region}, or remove network.subnet_id so that fmcluster makes the network")
            values = {"network.control_subnet_id": subnets[0][1]}
        context.record("control_plane", "network", next(iter(values.values())), values)  # the command writes it
        return values

    def resources(self, context: BackendContext, options: dict[str, Any] | None = None) -> list[Resource]:
        spec = context.require_spec()
        placement = context.placement()
        context.ctx.publish(self._control_plane_network(context, placement))
        rendered = render_eks(spec, subnet_id=placement.subnet_id, vpc_id=placement.vpc_id,
                              system_apart=placement.created and placement.head_zone is not None)
        cluster = spec.name
        resources = build(rendered.documents, makers(spec, rendered.documents), PROFILE.display)
        groups = tuple(r.name for r in resources if r.kind == "eks_nodegroup")
        for resource in resources:
            if resource.kind == "eks_addon" and resource.key in ADDONS_ON_NODES:
                resource.extra_edges = tuple(sorted(set(resource.extra_edges) | set(groups)))
        apply_order.wire([r for r in resources if isinstance(r, kube.KubeObject)], f"eks_cluster:{cluster}")
        resources += ultraserver_resource.resources(spec)  # after their node groups (issue 39)
        # The burn-in gate (issue 37) after its node group and after the software its check job needs on the nodes:
        # the device plugins, the MPI Operator and the scheduler (every Kubernetes object fmcluster applies).
        software = tuple(sorted(r.name for r in resources if isinstance(r, kube.KubeObject)))
        for gate in gate_resource.resources(spec):
            gate.extra_edges = software
            resources.append(gate)
        control_routes = "route_table:control"
        if any(r.name == control_routes for r in resources):  # nodes in the second subnet boot with its route
            for resource in resources:
                if resource.kind == "eks_nodegroup" and "subnet.control.id" in resource.references():
                    resource.extra_edges = tuple(sorted({*resource.extra_edges, control_routes}))
        return resources

    def waypoints(self, context: BackendContext, changes: list[ResourceChange]) -> list[tuple[str, Spec]]:
        from fmcluster.backends.eks import upgrades

        return upgrades.waypoints(context, changes)

    # What a node count changes: the node group's scaling, and the quota of the queue's scheduler objects (sized
    # at its most nodes): a Kueue ClusterQueue's resourceGroups, a Volcano Queue's capability, a KAI Queue's
    # resources.
    SCALED_PATHS = ("scalingConfig.", "spec.resourceGroups", "spec.capability.", "spec.resources.")

    def scales(self, path: str) -> bool:
        return path.startswith(self.SCALED_PATHS)

    def scale_own_group(self, data: dict[str, Any], name: str, count: Any) -> bool:
        """``scale NAME system=N`` sizes the system node group (kubernetes.system_nodes): a fixed count (the Cluster
        Autoscaler sizes only elastic queues), of at least 1 (the spec's rule)."""
        if name != system_nodes.NODEGROUP_NAME:
            return False
        if not isinstance(count, int):
            raise UsageError(f"{name}={count.min}:{count.max}: the {name} node group runs a fixed number of nodes "
                             f"(the Cluster Autoscaler sizes only queues); write {name}=N")
        data.setdefault("kubernetes", {})["system_nodes"] = count
        return True

    def scaled(self, old: Spec, new: Spec) -> Spec:
        """A count change that makes the cluster gain or lose its Cluster Autoscaler (a queue turning elastic, or
        the last elastic queue turning fixed) installs or removes software, which ``scale`` does not do: refused
        with the way to do it. Within an elastic queue, ``scale`` sets min and max; the autoscaler keeps the
        desired size."""
        before, after = autoscaler_install.wanted(old), autoscaler_install.wanted(new)
        if (before is None) != (after is None):
            turned = [q.name for q in new.queues if q.name in {o.name for o in old.queues}
                      and autoscaler_install.is_elastic(q) != autoscaler_install.is_elastic(
                          next(o for o in old.queues if o.name == q.name))]
            what = "gains" if after is not None else "loses"
            raise UsageError(f"with {', '.join(turned)} {'elastic' if after is not None else 'fixed'}, the cluster "
                             f"{what} the Cluster Autoscaler (it runs while a queue is elastic), which `scale` does "
                             "not install or remove: write the new nodes in the spec and run `fmcluster create SPEC`")
        return new

    # -- what AWS holds -----------------------------------------------------------------------------
    def _cluster(self, context: BackendContext) -> dict[str, Any] | None:
        def fetch() -> dict[str, Any] | None:
            try:
                return context.ctx.client("eks").describe_cluster(name=context.name)["cluster"]
            except ClientError as exc:
                if error_code(exc) == "ResourceNotFoundException":
                    return None
                raise

        return reads.once(context.ctx, EksCluster.snapshot_kind, context.name, fetch)

    def _members(self, context: BackendContext, kind: str) -> list[dict[str, Any]]:
        """The cluster's node groups or add-ons, described (one gone between the list and the read is skipped);
        in a read-only pass, once for describe, discovery and the plan's reads together."""
        ctx = context.ctx
        eks = ctx.client("eks")
        list_call, describe, field, item, shape = {
            "nodegroup": ("list_nodegroups", eks.describe_nodegroup, "nodegroups", "nodegroupName",
                          EksNodegroup.snapshot_kind),
            "addon": ("list_addons", eks.describe_addon, "addons", "addonName", EksAddon.snapshot_kind)}[kind]

        def read(name: str) -> dict[str, Any] | None:
            try:
                return describe(clusterName=context.name, **{item: name})[kind]
            except ClientError as exc:
                if error_code(exc) != "ResourceNotFoundException":
                    raise
                return None

        def fetch() -> list[dict[str, Any]]:
            described = [reads.once(ctx, shape, name, lambda name=name: read(name))
                         for page in eks.get_paginator(list_call).paginate(clusterName=context.name)
                         for name in page[field]]
            return [d for d in described if d is not None]

        return reads.once(ctx, f"{shape}s", context.name, fetch)

    def find_cluster_id(self, context: BackendContext) -> str | None:
        cluster = self._cluster(context)
        if cluster is None:
            return None
        tags = cluster.get("tags") or {}
        return tags.get(CLUSTER_ID_TAG) if tags.get(CLUSTER_TAG) == context.name else None

    def discover(self, context: BackendContext) -> list[Discovered]:
        ctx = context.ctx

        def cluster_part() -> list[Discovered]:
            cluster = self._cluster(context)
            return self._discover_cluster(context, cluster) if cluster is not None else []

        roles = [functools.partial(scan_role, ctx, key, role_name(context.name, context.region, key)) for key in ROLES]
        return gather([lambda: scan_ec2(ctx, context.stack_kinds), lambda: scan_fsx(ctx, context.stack_kinds), *roles,
                       cluster_part,
                       lambda: scan_guard(ctx),  # the budget guard's schedules and backstop
                       lambda: [instance_found(i, "an EKS node") for i in scan_instances(ctx)]])

    def _discover_cluster(self, context: BackendContext, cluster: dict[str, Any]) -> list[Discovered]:
        ctx = context.ctx
        tags = cluster.get("tags") or {}
        ours = is_ours(tags, ctx)
        name = cluster["name"]
        found = [Discovered(f"eks_cluster:{name}", cluster.get("arn", name), cluster["status"],
                            f"EKS cluster {name} ({cluster['status']})", ours, EksCluster(name) if ours else None,
                            tags.get(CLUSTER_ID_TAG, ""))]
        if cluster["status"] == "DELETING":
            return found
        for kind, make in (("nodegroup", EksNodegroup), ("addon", EksAddon)):
            for item in self._members(context, kind):
                item_tags = item.get("tags") or {}
                mine = is_ours(item_tags, ctx)
                key = item[f"{kind}Name"]
                found.append(Discovered(f"eks_{kind}:{key}", item.get(f"{kind}Arn", key), item["status"],
                                        f"EKS {'node group' if kind == 'nodegroup' else 'add-on'} {key} "
                                        f"({item['status']})", mine, make(key, cluster=name) if mine else None,
                                        item_tags.get(CLUSTER_ID_TAG, "")))
        found += self._discover_associations(context, name)
        access = kube.KubeAccess.of(ctx, name)
        if access is not None and ours:
            try:
                objects = kube.owned_objects(access, managed_kinds())
            except FmclusterError as exc:  # a caller without Kubernetes access still sees (and deletes) AWS's side
                unread.note(ctx, "kubernetes", str(exc).replace("\n  → ", "; "))
                objects = []
            for manifest in objects:
                key = kube.object_key(manifest)
                found.append(Discovered(f"kube_object:{key}", key, "present", f"Kubernetes {kube.describe(manifest)}",
                                        True, kube.KubeObject(key, None, cluster=name, manifest=manifest),
                                        ctx.cluster_id))
        return found

    def _discover_associations(self, context: BackendContext, cluster: str) -> list[Discovered]:
        """The cluster's EKS Pod Identity associations that fmcluster made (the Cluster Autoscaler's), by their tags."""
        ctx = context.ctx
        eks = ctx.client("eks")
        found = []
        for page in eks.get_paginator("list_pod_identity_associations").paginate(clusterName=cluster):
            for summary in page["associations"]:
                try:
                    association = eks.describe_pod_identity_association(
                        clusterName=cluster, associationId=summary["associationId"])["association"]
                except ClientError as exc:
                    if error_code(exc) == "ResourceNotFoundException":
                        continue
                    raise
                tags = association.get("tags") or {}
                if tags.get(CLUSTER_TAG) != context.name:
                    continue  # someone else's association: not fmcluster's to report or delete
                mine = is_ours(tags, ctx)
                key = tags.get(RESOURCE_TAG, "").partition(":")[2] or association["associationId"]
                handle = PodIdentityAssociation(key, cluster=cluster, namespace=association["namespace"],
                                                service_account=association["serviceAccount"]) if mine else None
                found.append(Discovered(f"{PodIdentityAssociation.kind}:{key}", association["associationArn"],
                                        "ACTIVE", f"EKS Pod Identity association {association['namespace']}/"
                                        f"{association['serviceAccount']}", mine, handle,
                                        tags.get(CLUSTER_ID_TAG, "")))
        return found

    def describe(self, context: BackendContext) -> dict[str, Any]:
        report: dict[str, Any] = {"name": context.name, "backend": PROFILE.name, "region": context.region,
                                  "status": "NOT_FOUND", "backend_status": None, "queues": [],
                                  "slurm_endpoint": None, "kubernetes_endpoint": None, "kubernetes_version": None,
                                  "instances": [], "problems": [], "scheduler": None,
                                  "autoscaler": None}
        cluster = self._cluster(context)
        if cluster is None:
            return report
        report["backend_status"] = cluster["status"]
        report["kubernetes_endpoint"] = cluster.get("endpoint")
        report["kubernetes_version"] = cluster.get("version")
        report["created"] = cluster.get("createdAt")
        report["control_plane_usd_per_hour"] = eks_versions.control_plane_usd_per_hour(cluster.get("version") or "")
        deleting = cluster["status"] == "DELETING"
        groups = [] if deleting else self._members(context, "nodegroup")
        addons = [] if deleting else self._members(context, "addon")
        instances: dict[str, list[dict[str, Any]]] = {}
        for instance in scan_instances(context.ctx, [{"Name": "tag:eks:cluster-name", "Values": [context.name]}]):
            group = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}.get("eks:nodegroup-name", "")
            instances.setdefault(group, []).append(instance)
        for group in groups:
            scaling = group.get("scalingConfig") or {}
            members = instances.get(group["nodegroupName"], [])
            report["queues"].append({
                "name": group["nodegroupName"],
                "instance_type": ", ".join(group.get("instanceTypes") or [])
                                 or template_type(context.ctx, group.get("launchTemplate") or {}),
                "min": scaling.get("minSize", 0), "max": scaling.get("maxSize", 0),
                "desired": scaling.get("desiredSize", 0), "status": group["status"],
                "node_group_status": group["status"],
                "running_instances": sum(1 for i in members if i["State"]["Name"] == "running"),
            })
            report["instances"] += [instance_row(i, group["nodegroupName"]) for i in members]
        access = kube.KubeAccess.of(context.ctx, context.name) if groups else None
        unread: list[str] = []
        if access is not None and context.spec is not None:
            try:
                inside = cluster_view.read(access, context.spec.kubernetes.scheduler,
                                           [q["name"] for q in report["queues"]])
                report["scheduler"] = scheduler_status.read(access, context.spec.kubernetes.scheduler)
                report["autoscaler"] = autoscaler_status.read(access, context.spec)
                if dra_driver.needed(context.spec):
                    report["dra_driver"] = dra_driver.read(access)
            except FmclusterError as exc:  # a teammate without an access entry still sees what AWS holds
                unread.append(f"the cluster's Kubernetes API was not read: {exc}")
            else:
                for queue in report["queues"]:
                    queue.update(inside.get(queue["name"], {}))
                verdicts.attach(report, verdicts.replaced(context.ctx.client("ec2"), context.name)
                                if burn_in_hold.gated_queues(context.spec) else {})
                for queue in report["queues"]:
                    unread += system_nodes.problems(queue)
                    unread += [f"queue {queue['name']}: node {u['node']} reports {u['condition']}=False "
                               f"({u['reason'] or 'no reason'}), from the EKS node monitoring agent: node auto repair "
                               "acts on it after the condition's wait" for u in queue.get("unhealthy_nodes") or []]
                unread += scheduler_status.problems(report["scheduler"])
                unread += autoscaler_status.problems(report["autoscaler"])
                unread += dra_driver.problems(report["dra_driver"]) if report.get("dra_driver") else []
        # A Capacity Block group made before its block begins cannot launch yet: that is waiting, not a problem.
        waiting = context.queues_waiting()
        report["problems"] = unread + [f"{what} {item[name]}: {health_issues(item)}"
                              for what, items, name in (("node group", groups, "nodegroupName"),
                                                        ("add-on", addons, "addonName"))
                              for item in items if health_issues(item) and not (
                                  what == "node group" and item[name] in waiting
                                  and item.get("capacityType") == "CAPACITY_BLOCK")]
        report["status"] = PROFILE.overall_status(cluster["status"],
                                                  [g["status"] for g in groups] + [a["status"] for a in addons])
        return report

    def kube_access(self, context: BackendContext) -> KubeEndpoint | None:
        access = kube.KubeAccess.of(context.ctx, context.name)
        if access is None:
            return None
        return KubeEndpoint(access.cluster, access.region, access.endpoint, access.ca_data, access.token)

    def login_node(self, context: BackendContext) -> LoginNode | None:
        """EKS has no login node: users reach the cluster through its Kubernetes API."""
        return None

    def cluster_logs(self, context: BackendContext, since: float | None, lines: int) -> tuple[list[LogLine], list[str]]:
        return [], ["fmcluster turns on no EKS control plane logging (CreateCluster logging), so AWS holds no "
                    f"logs of {context.name}'s own; the pods' logs are in the cluster (kubectl logs, after "
                    f"`fmcluster kubeconfig {context.name}`)"]


def makers(spec: Spec, documents: list[Any], options: dict[str, Any] | None = None) -> dict[str, Maker]:
    """Which resource applies each kind of document the EKS renderer makes (also what the spec-field walk builds
    its resources with, tests/spec/test_schema_walk.py)."""
    cluster = spec.name
    return SHARED | by_key({"placement_group": PlacementGroup, "launch_template": LaunchTemplate,
                            "iam_role": IamRole, "fsx_lustre": FsxLustre,
                            "fsx_data_repository": FsxDataRepository, "existing_fsx_lustre": ExistingFsxLustre,
                            "eks_cluster": EksCluster}) | {
        "eks_addon": lambda document: EksAddon(document.key, document, cluster=cluster,
                                               kubernetes_version=spec.kubernetes.version),
        "eks_nodegroup": lambda document: EksNodegroup(document.key, document, cluster=cluster,
                                                       types=_group_types(documents, document)),
        "eks_pod_identity_association": lambda document: PodIdentityAssociation(document.key, document,
                                                                                cluster=cluster),
        "kube_object": lambda document: kube.KubeObject(document.key, document, cluster=cluster)}


def _group_types(documents: list[Any], group: Any) -> tuple[str, ...]:
    """The instance types the rendered documents give a node group: its own ``instanceTypes``, or its launch
    template's ``InstanceType`` (EKS takes them in one place only)."""
    if group.body.get("instanceTypes"):
        return tuple(group.body["instanceTypes"])
    for document in documents:
        if document.kind == "launch_template" and document.key == group.key:
            found = (document.body.get("LaunchTemplateData") or {}).get("InstanceType")
            return (found,) if found else ()
    return ()
