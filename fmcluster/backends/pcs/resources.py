"""The PCS cluster, its compute node groups and its queues, as engine resources.

What PCS can change in place is read from botocore's PCS model rather than written down here: a member of
a ``Create…`` request that its ``Update…`` request lacks (a cluster's ``size``, a node group's
``instanceConfigs``) can only change by replacing the resource.
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code
from fmcluster.aws.ownership import require_ours
from fmcluster.engine import AttributeChange, Context, Observed, Resource, flatten, reads
from fmcluster.render.documents import Document

PHASES = {
    "CREATING": "pending", "UPDATING": "pending", "DELETING": "pending", "RESUMING": "pending",
    "SUSPENDING": "pending", "ACTIVE": "ready", "CREATE_FAILED": "failed", "UPDATE_FAILED": "failed",
    "DELETE_FAILED": "failed", "SUSPENDED": "failed", "DELETED": "gone",
}
# Members that say which resource a request is about, not what it should be.
_NOT_ATTRIBUTES = {"clientToken", "tags", "clusterIdentifier", "computeNodeGroupIdentifier", "queueIdentifier",
                   "clusterName", "computeNodeGroupName", "queueName"}


@functools.cache
def _input_shape(operation: str) -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("pcs").operation_model(operation).input_shape


def _members(operation: str) -> frozenset[str]:
    return frozenset(_input_shape(operation).members)


def _project(value: Any, shape: Any) -> Any:
    """``value`` cut to what ``shape`` accepts (UpdateCluster's scheduler takes a version but no type)."""
    if shape.type_name == "structure" and isinstance(value, dict):
        return {k: _project(v, shape.members[k]) for k, v in value.items() if k in shape.members}
    if shape.type_name == "list" and isinstance(value, list):
        return [_project(item, shape.member) for item in value]
    return value


@functools.cache
def create_only(create: str, update: str) -> tuple[str, ...]:
    """What a ``create`` request sets that no ``update`` request can change."""
    return tuple(sorted(_members(create) - _members(update) - _NOT_ATTRIBUTES))


def error_info(item: dict[str, Any]) -> str:
    return "; ".join(f"{e.get('code', '')}: {e.get('message', '')}" for e in item.get("errorInfo") or [])


class PcsResource(Resource):
    """What the three PCS resources share: read by id or name, owned by tags, compared member by member."""

    create_operation: ClassVar[str]
    update_operation: ClassVar[str]
    response_key: ClassVar[str]
    # What a read-only pass keeps its Get answer as (fmcluster.engine.reads), shared with the backend's describe.
    snapshot_kind: ClassVar[str]

    def __init__(self, key: str, document: Document | None = None, cluster: str | None = None,
                 known_id: str | None = None):
        self.key = key
        self.document = document
        # The cluster (name or id) a node group or queue lives in.
        self.cluster = cluster
        self.known_id = known_id

    @property
    def replace_on(self) -> tuple[str, ...]:  # type: ignore[override]
        return create_only(self.create_operation, self.update_operation)

    @abstractmethod
    def _get(self, ctx: Context, ident: str) -> dict[str, Any]:
        """The resource as PCS describes it (``Get…``)."""

    def _outputs(self, item: dict[str, Any]) -> dict[str, Any]:
        return {f"{self.kind}.{self.key}.id": item["id"]}

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        ident = known_id or self.known_id or self.key
        try:
            # In a read-only pass, what describe and discovery already read of it (one Get per resource).
            item = reads.once(ctx, self.snapshot_kind, ident, lambda: self._get(ctx, ident),
                              lambda found: (found["id"], found["name"]))
            if item is None:  # the backend's describe found it absent in this pass
                return None
            # A resource can vanish between the two calls (its delete finishing): then it is gone.
            tags = ctx.tags(item["arn"], lambda: ctx.client("pcs").list_tags_for_resource(
                resourceArn=item["arn"]).get("tags") or {})
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        require_ours(f"PCS {self.kind.replace('_', ' ')} {item.get('name')} ({item['id']})", tags, ctx)
        attributes = flatten({k: v for k, v in item.items() if k in _members(self.create_operation)})
        return Observed(item["id"], item["status"], PHASES.get(item["status"], "pending"), self._outputs(item),
                        error_info(item), attributes=attributes)

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        return flatten({k: v for k, v in body.items() if k not in _NOT_ATTRIBUTES})

    def _changed_members(self, ctx: Context, changes: list[AttributeChange]) -> dict[str, Any]:
        """The whole value of every top-level member a change touches: PCS replaces members, not leaves."""
        body = ctx.resolve(self.document.body)
        shape = _input_shape(self.update_operation)
        members = {c.path.split(".")[0] for c in changes}
        return {member: _project(body[member], shape.members[member]) for member in sorted(members)
                if member in shape.members and member in body}


class PcsCluster(PcsResource):
    kind = "cluster"
    snapshot_kind = "pcs.Cluster"
    teardown_rank = 40
    create_operation = "CreateCluster"
    update_operation = "UpdateCluster"

    def _get(self, ctx: Context, ident: str) -> dict[str, Any]:
        return ctx.client("pcs").get_cluster(clusterIdentifier=ident)["cluster"]

    def _outputs(self, item: dict[str, Any]) -> dict[str, Any]:
        endpoints = item.get("endpoints") or []
        address = ", ".join(f"{e.get('privateIpAddress')}:{e.get('port')}" for e in endpoints)
        return {f"cluster.{self.key}.id": item["id"], f"cluster.{self.key}.endpoint": address}

    def create(self, ctx: Context, token: str) -> Observed:
        cluster = ctx.client("pcs").create_cluster(clientToken=token, **ctx.resolve(self.document.body))["cluster"]
        return Observed(cluster["id"], cluster["status"], PHASES.get(cluster["status"], "pending"),
                        {f"cluster.{self.key}.id": cluster["id"]})

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        cluster = ctx.client("pcs").update_cluster(clusterIdentifier=observed.id, clientToken=token,
                                                   **self._changed_members(ctx, changes))["cluster"]
        return Observed(cluster["id"], cluster["status"], PHASES.get(cluster["status"], "pending"))

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("pcs").delete_cluster(clusterIdentifier=observed.id)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException" and observed.status != "DELETING":
                raise


class PcsNodeGroup(PcsResource):
    kind = "compute_node_group"
    snapshot_kind = "pcs.ComputeNodeGroup"
    teardown_rank = 30
    create_operation = "CreateComputeNodeGroup"
    update_operation = "UpdateComputeNodeGroup"

    def _get(self, ctx: Context, ident: str) -> dict[str, Any]:
        return ctx.client("pcs").get_compute_node_group(clusterIdentifier=self.cluster,
                                                        computeNodeGroupIdentifier=ident)["computeNodeGroup"]

    def _outputs(self, item: dict[str, Any]) -> dict[str, Any]:
        scaling = item.get("scalingConfiguration", {})
        return {f"compute_node_group.{self.key}.id": item["id"],
                # the budget guard's role names it (fmcluster/backends/pcs/guard.py)
                f"compute_node_group.{self.key}.arn": item.get("arn"),
                f"compute_node_group.{self.key}.min": scaling.get("minInstanceCount"),
                f"compute_node_group.{self.key}.max": scaling.get("maxInstanceCount")}

    def create(self, ctx: Context, token: str) -> Observed:
        group = ctx.client("pcs").create_compute_node_group(
            clientToken=token, **ctx.resolve(self.document.body))["computeNodeGroup"]
        return Observed(group["id"], group["status"], PHASES.get(group["status"], "pending"))

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        group = ctx.client("pcs").update_compute_node_group(
            clusterIdentifier=self.cluster, computeNodeGroupIdentifier=observed.id, clientToken=token,
            **self._changed_members(ctx, changes))["computeNodeGroup"]
        return Observed(group["id"], group["status"], PHASES.get(group["status"], "pending"))

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("pcs").delete_compute_node_group(clusterIdentifier=self.cluster,
                                                        computeNodeGroupIdentifier=observed.id)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException" and observed.status != "DELETING":
                raise


class PcsQueue(PcsResource):
    kind = "queue"
    snapshot_kind = "pcs.Queue"
    teardown_rank = 20
    create_operation = "CreateQueue"
    update_operation = "UpdateQueue"

    def _get(self, ctx: Context, ident: str) -> dict[str, Any]:
        return ctx.client("pcs").get_queue(clusterIdentifier=self.cluster, queueIdentifier=ident)["queue"]

    def create(self, ctx: Context, token: str) -> Observed:
        queue = ctx.client("pcs").create_queue(clientToken=token, **ctx.resolve(self.document.body))["queue"]
        return Observed(queue["id"], queue["status"], PHASES.get(queue["status"], "pending"))

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        queue = ctx.client("pcs").update_queue(clusterIdentifier=self.cluster, queueIdentifier=observed.id,
                                               clientToken=token, **self._changed_members(ctx, changes))["queue"]
        return Observed(queue["id"], queue["status"], PHASES.get(queue["status"], "pending"))

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("pcs").delete_queue(clusterIdentifier=self.cluster, queueIdentifier=observed.id)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException" and observed.status != "DELETING":
                raise
