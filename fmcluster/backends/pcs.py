"""AWS PCS backend: spec → the resources PCS needs, in dependency order, for the engine to reconcile.

PCS has no waiters: resources are polled by status. Create order: security group → placement groups,
launch templates, instance profile, (FSx) → cluster (wait ACTIVE) → node groups (wait ACTIVE) → queues.
"""

from __future__ import annotations

import hashlib
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.backends.aws_resources import (
    FsxDataRepository,
    FsxLustre,
    InstanceProfile,
    LaunchTemplate,
    PlacementGroup,
    SecurityGroup,
    error_code,
)
from fmcluster.engine import Context, Observed, Resource
from fmcluster.network import Placement
from fmcluster.render.documents import Document
from fmcluster.render.pcs import render_pcs
from fmcluster.spec.models import Spec

_PHASES = {
    "CREATING": "pending", "UPDATING": "pending", "DELETING": "pending", "RESUMING": "pending",
    "SUSPENDING": "pending", "ACTIVE": "ready", "CREATE_FAILED": "failed", "UPDATE_FAILED": "failed",
    "DELETE_FAILED": "failed", "SUSPENDED": "failed", "DELETED": "gone",
}


def client_token(spec: Spec, generation: str, resource: str) -> str:
    """Same cluster generation + same resource → same token, so a repeated create returns the same thing."""
    return hashlib.sha256(f"{spec.region}/{spec.name}/{generation}/{resource}".encode()).hexdigest()[:40]



def _error_info(item: dict[str, Any]) -> str:
    return "; ".join(f"{e.get('code', '')}: {e.get('message', '')}" for e in item.get("errorInfo") or [])


class PcsCluster(Resource):
    kind = "cluster"

    def __init__(self, document: Document, token: str):
        self.key = document.key
        self.document = document
        self.token = token
        self.depends_on = ("security_group:cluster",)

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        try:
            cluster = ctx.client("pcs").get_cluster(clusterIdentifier=known_id or self.key)["cluster"]
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        endpoints = cluster.get("endpoints") or []
        outputs = {"cluster.id": cluster["id"],
                   "cluster.endpoint": ", ".join(f"{e.get('privateIpAddress')}:{e.get('port')}" for e in endpoints)}
        return Observed(cluster["id"], cluster["status"], _PHASES.get(cluster["status"], "pending"), outputs,
                        _error_info(cluster))

    def create(self, ctx: Context) -> Observed:
        cluster = ctx.client("pcs").create_cluster(clientToken=self.create_token(self.token),
                                                   **ctx.resolve(self.document.body))["cluster"]
        return Observed(cluster["id"], cluster["status"], _PHASES.get(cluster["status"], "pending"),
                        {"cluster.id": cluster["id"]})

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("pcs").delete_cluster(clusterIdentifier=observed.id)
        except ClientError as exc:
            if error_code(exc) not in ("ResourceNotFoundException",) and observed.status != "DELETING":
                raise


class PcsNodeGroup(Resource):
    kind = "compute_node_group"

    def __init__(self, document: Document, cluster_name: str, token: str, depends_on: tuple[str, ...]):
        self.key = document.key
        self.document = document
        self.cluster_name = cluster_name
        self.token = token
        self.depends_on = depends_on
        scaling = document.body["scalingConfiguration"]
        self.min_count, self.max_count = scaling["minInstanceCount"], scaling["maxInstanceCount"]

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        try:
            group = ctx.client("pcs").get_compute_node_group(
                clusterIdentifier=self.cluster_name, computeNodeGroupIdentifier=known_id or self.key
            )["computeNodeGroup"]
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        scaling = group.get("scalingConfiguration", {})
        outputs = {f"compute_node_group.{self.key}.id": group["id"],
                   f"compute_node_group.{self.key}.min": scaling.get("minInstanceCount"),
                   f"compute_node_group.{self.key}.max": scaling.get("maxInstanceCount")}
        return Observed(group["id"], group["status"], _PHASES.get(group["status"], "pending"), outputs,
                        _error_info(group))

    def create(self, ctx: Context) -> Observed:
        group = ctx.client("pcs").create_compute_node_group(
            clientToken=self.create_token(self.token), **ctx.resolve(self.document.body))["computeNodeGroup"]
        return Observed(group["id"], group["status"], _PHASES.get(group["status"], "pending"))

    def differs(self, ctx: Context, observed: Observed) -> str | None:
        low = observed.outputs.get(f"compute_node_group.{self.key}.min")
        high = observed.outputs.get(f"compute_node_group.{self.key}.max")
        if (low, high) != (self.min_count, self.max_count):
            return f"nodes {low}..{high} → {self.min_count}..{self.max_count}"
        return None

    def update(self, ctx: Context, observed: Observed) -> Observed:
        group = ctx.client("pcs").update_compute_node_group(
            clusterIdentifier=self.cluster_name, computeNodeGroupIdentifier=observed.id,
            scalingConfiguration={"minInstanceCount": self.min_count, "maxInstanceCount": self.max_count},
            clientToken=hashlib.sha256(f"{self.token}/{self.min_count}/{self.max_count}".encode()).hexdigest()[:40],
        )["computeNodeGroup"]
        return Observed(group["id"], group["status"], _PHASES.get(group["status"], "pending"))

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("pcs").delete_compute_node_group(clusterIdentifier=self.cluster_name,
                                                        computeNodeGroupIdentifier=observed.id)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException" and observed.status != "DELETING":
                raise


class PcsQueue(Resource):
    kind = "queue"

    def __init__(self, document: Document, cluster_name: str, token: str, node_group: str):
        self.key = document.key
        self.document = document
        self.cluster_name = cluster_name
        self.token = token
        self.depends_on = (f"compute_node_group:{node_group}",)

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        try:
            queue = ctx.client("pcs").get_queue(clusterIdentifier=self.cluster_name,
                                                queueIdentifier=known_id or self.key)["queue"]
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        return Observed(queue["id"], queue["status"], _PHASES.get(queue["status"], "pending"),
                        {f"queue.{self.key}.id": queue["id"]}, _error_info(queue))

    def create(self, ctx: Context) -> Observed:
        queue = ctx.client("pcs").create_queue(clientToken=self.create_token(self.token),
                                               **ctx.resolve(self.document.body))["queue"]
        return Observed(queue["id"], queue["status"], _PHASES.get(queue["status"], "pending"))

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("pcs").delete_queue(clusterIdentifier=self.cluster_name, queueIdentifier=observed.id)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException" and observed.status != "DELETING":
                raise


def find_sample_amis(spec: Spec, ec2: Any) -> dict[str, str]:
    """Newest PCS sample AMI per architecture the spec needs (PCS has no default AMI)."""
    from fmcluster.errors import UsageError
    from fmcluster.render.pcs import architecture

    needed = {architecture(t) for t in [spec.head_node.instance_type, *(q.instance_type for q in spec.queues)]}
    found = {}
    for arch in sorted(needed):
        pattern = f"aws-pcs-sample_ami-{spec.os}-{arch}-slurm-{spec.slurm.version}*"
        images = ec2.describe_images(Owners=["amazon"], Filters=[{"Name": "name", "Values": [pattern]}])["Images"]
        if not images:
            raise UsageError(f"no PCS sample AMI matches {pattern} in {spec.region}: set image.ami to an AMI with "
                             "the PCS agent and Slurm installed")
        found[arch] = max(images, key=lambda image: image.get("CreationDate", ""))["ImageId"]
    return found


def build_resources(spec: Spec, placement: Placement, generation: str, spec_file: str = "spec.yaml",
                    ami_ids: dict[str, str] | None = None) -> list[Resource]:
    """The PCS plan: every resource, wired by its references."""
    rendered = render_pcs(spec, spec_file, subnet_id=placement.subnet_id, vpc_id=placement.vpc_id,
                          ami_ids=ami_ids)
    resources: list[Resource] = [SecurityGroup(rendered.one("security_group"), placement.vpc_id)]
    for document in rendered.by_kind("placement_group"):
        resources.append(PlacementGroup(document))
    resources.append(InstanceProfile(rendered.one("instance_profile")))
    for document in rendered.by_kind("fsx_lustre"):
        resources.append(FsxLustre(document, spec.name, ("security_group:cluster",),
                                   client_token(spec, generation, "fsx_lustre")[:36]))
    for document in rendered.by_kind("fsx_data_repository"):
        resources.append(FsxDataRepository(document, client_token(spec, generation, f"dra/{document.key}")[:36]))
    lustre = ("fsx_lustre:lustre",) if rendered.by_kind("fsx_lustre") else ()
    for document in rendered.by_kind("launch_template"):
        group = next((d for d in rendered.by_kind("placement_group") if f"placement_group.{d.key}"
                      in document.text or d.body["GroupName"] in document.text), None)
        depends = ("security_group:cluster",) + ((f"placement_group:{group.key}",) if group else ()) + lustre
        resources.append(LaunchTemplate(document, depends))
    resources.append(PcsCluster(rendered.one("cluster"), client_token(spec, generation, "cluster")))
    for document in rendered.by_kind("compute_node_group"):
        depends = ("cluster:" + spec.name, f"launch_template:{document.key}", "instance_profile:nodes")
        resources.append(PcsNodeGroup(document, spec.name, client_token(spec, generation, f"ng/{document.key}"),
                                      depends))
    for document in rendered.by_kind("queue"):
        node_group = document.body["computeNodeGroupConfigurations"][0]["computeNodeGroupId"]
        node_group = node_group.removeprefix("${compute_node_group.").removesuffix(".id}")
        resources.append(PcsQueue(document, spec.name, client_token(spec, generation, f"q/{document.key}"),
                                  node_group))
    return resources


def describe(session: Any) -> dict[str, Any]:
    """Live state from PCS and EC2, in the backend-neutral shape of DESIGN §3."""
    ctx = session.ctx
    spec: Spec = session.spec
    pcs = ctx.client("pcs")
    report: dict[str, Any] = {"name": spec.name, "backend": "pcs", "region": ctx.region, "status": "NOT_FOUND",
                              "queues": [], "resources": [], "slurm_endpoint": None}
    try:
        cluster = pcs.get_cluster(clusterIdentifier=spec.name)["cluster"]
    except ClientError as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
        return report
    report["status"] = cluster["status"]
    endpoints = cluster.get("endpoints") or []
    report["slurm_endpoint"] = ", ".join(f"{e.get('privateIpAddress')}:{e.get('port')}" for e in endpoints) or None
    report["resources"].append({"type": "cluster", "key": spec.name, "id": cluster["id"], "status": cluster["status"]})
    groups = {}
    running: dict[str, int] = {}
    for summary in pcs.list_compute_node_groups(clusterIdentifier=cluster["id"])["computeNodeGroups"]:
        group = pcs.get_compute_node_group(clusterIdentifier=cluster["id"],
                                           computeNodeGroupIdentifier=summary["id"])["computeNodeGroup"]
        groups[group["id"]] = group
        running[group["id"]] = _running_instances(ctx, group["id"])
        report["resources"].append({"type": "compute_node_group", "key": group["name"], "id": group["id"],
                                    "status": group["status"], "running_instances": running[group["id"]],
                                    "error": _error_info(group) or None})
    types = {q.name: q.instance_type for q in spec.queues}
    for summary in pcs.list_queues(clusterIdentifier=cluster["id"])["queues"]:
        queue = pcs.get_queue(clusterIdentifier=cluster["id"], queueIdentifier=summary["id"])["queue"]
        report["resources"].append({"type": "queue", "key": queue["name"], "id": queue["id"],
                                    "status": queue["status"]})
        configs = queue.get("computeNodeGroupConfigurations") or []
        group = groups.get(configs[0]["computeNodeGroupId"]) if configs else None
        scaling = (group or {}).get("scalingConfiguration", {})
        report["queues"].append({
            "name": queue["name"], "instance_type": types.get(queue["name"]),
            "min": scaling.get("minInstanceCount"), "max": scaling.get("maxInstanceCount"),
            "status": queue["status"], "node_group_status": (group or {}).get("status"),
            "running_instances": running.get(group["id"], 0) if group else 0,
        })
    return report


def _running_instances(ctx: Context, group_id: str) -> int:
    reservations = ctx.client("ec2").describe_instances(Filters=[
        {"Name": "tag:aws:pcs:compute-node-group-id", "Values": [group_id]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"]
    return sum(len(r["Instances"]) for r in reservations)


def login_node(session: Any) -> Any:
    """The EC2 instance of the cluster's ``login`` compute node group (PCS tags its instances with the group's
    id), or None when the cluster, the group or a live instance is missing."""
    from fmcluster.connect.login import LoginNode
    from fmcluster.render.pcs import LOGIN_GROUP

    try:
        group = session.ctx.client("pcs").get_compute_node_group(
            clusterIdentifier=session.spec.name, computeNodeGroupIdentifier=LOGIN_GROUP)["computeNodeGroup"]
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        raise
    reservations = session.ctx.client("ec2").describe_instances(Filters=[
        {"Name": "tag:aws:pcs:compute-node-group-id", "Values": [group["id"]]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"]
    instances = sorted((i for r in reservations for i in r["Instances"]), key=lambda i: str(i.get("LaunchTime")))
    if not instances:
        return None
    node = instances[0]
    return LoginNode(node["InstanceId"], "login node", node["State"]["Name"], node.get("PublicIpAddress"),
                     node.get("PrivateIpAddress"))


def cluster_logs(session: Any, since: float | None, lines: int) -> tuple[list[Any], list[str]]:
    """PCS scheduler and job-completion logs, where a CloudWatch Logs delivery is set up for the cluster
    (PCS vends them through CloudWatch Logs deliveries; fmcluster does not create one)."""
    from fmcluster.connect.logs import LogLine

    name = session.spec.name
    try:
        cluster = session.ctx.client("pcs").get_cluster(clusterIdentifier=name)["cluster"]
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return [], [f"PCS has no cluster {name} in {session.region}"]
        raise
    logs = session.ctx.client("logs")
    sources = {s["name"] for s in logs.describe_delivery_sources().get("deliverySources", [])
               if cluster["arn"] in (s.get("resourceArns") or [])}
    groups = []
    for delivery in logs.describe_deliveries().get("deliveries", []):
        if delivery.get("deliverySourceName") in sources:
            destination = logs.get_delivery_destination(
                name=delivery["deliveryDestinationArn"].rsplit(":", 1)[-1].removeprefix("delivery-destination/"))
            arn = destination["deliveryDestination"].get("deliveryDestinationConfiguration", {}).get(
                "destinationResourceArn", "")
            if ":log-group:" in arn:
                groups.append(arn.split(":log-group:", 1)[1].removesuffix(":*"))
    if not groups:
        where = "to S3 or Firehose only" if sources else "nowhere: no log delivery is set up for the cluster"
        return [], [f"PCS sends the scheduler logs of {name} {where}; fmcluster reads CloudWatch Logs (see "
                    "https://docs.aws.amazon.com/pcs/latest/userguide/monitoring_scheduler-logs.html)"]
    out = []
    for group in groups:
        kwargs = {"startTime": int(since * 1000)} if since else {}
        events = logs.filter_log_events(logGroupName=group, **kwargs).get("events", [])[-lines:]
        out += [LogLine(e["timestamp"] / 1000, e.get("logStreamName", group), e["message"].rstrip()) for e in events]
    return out, []
