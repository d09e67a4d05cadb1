"""The ParallelCluster cluster (one CloudFormation stack that ParallelCluster builds), its compute fleet, and
compute nodes that outlive a deleted stack, as engine resources.

What differs, and whether it can change in place, is ParallelCluster's own answer: ``update_cluster`` with
``dryrun=True`` returns its change set and the update policy of each change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fmcluster.aws.discovery import scan_instances
from fmcluster.aws.ownership import require_ours, tag_dict
from fmcluster.backends.parallelcluster.api import (
    FLEET_PHASES,
    PHASES,
    api_error,
    content_of,
    failure_detail,
    latest_event,
    pcluster,
    set_fleet,
)
from fmcluster.engine import AttributeChange, Context, EngineFailed, Observed, Resource, Unknown, reads
from fmcluster.engine.references import references
from fmcluster.errors import FmclusterError
from fmcluster.render.documents import Document

# What ParallelCluster says when a change can be made once the compute fleet is stopped.
FLEET_STOP_NOTES = ("compute fleet", "compute nodes must be stopped", "QueueUpdateStrategy")


def described_cluster(ctx: Context, name: str) -> dict[str, Any] | None:
    """ParallelCluster's DescribeCluster of ``name``, None when it has none; in a read-only pass, read once for the
    backend's describe, its discovery and this resource's read (fmcluster.engine.reads)."""
    def fetch() -> dict[str, Any] | None:
        with pcluster() as pc:
            try:
                return pc.describe_cluster(cluster_name=name, region=ctx.region)
            except Exception as exc:
                if type(exc).__name__ == "NotFoundException":
                    return None
                raise api_error(f"pcluster_cluster:{name}", exc) from None

    return reads.once(ctx, "pcluster.Cluster", name, fetch)


class PclusterCluster(Resource):
    """The cluster. Its config may refer to what fmcluster creates first (``${fsx_openzfs.home.
    root_volume_id}``): references are filled from the engine's values when the config is sent."""

    kind = "pcluster_cluster"
    teardown_rank = 10

    def __init__(self, key: str, document: Document | None = None, rollback: bool = True,
                 stop_fleet_for_update: bool = False, locate: Callable[[str], str | None] | None = None):
        self.key = key
        self.document = document
        self.rollback = rollback
        self.stop_fleet_for_update = stop_fleet_for_update
        self.locate = locate

    def resolved_config(self, ctx: Context) -> dict[str, Any]:
        missing = sorted(ref for ref in references(self.document.body) if ref not in ctx.values)
        if missing:
            raise EngineFailed(f"{self.name}: the config needs {', '.join(missing)}, which nothing has provided yet")
        return ctx.resolve(self.document.body)

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        described = described_cluster(ctx, self.key)
        if described is None:
            return None
        with pcluster() as pc:
            require_ours(f"ParallelCluster cluster {self.key}", tag_dict(described.get("tags")), ctx)
            status = described["cloudFormationStackStatus"]
            phase = PHASES.get(status, "pending")
            if "ROLLBACK" in status:
                phase = "pending" if status.endswith("IN_PROGRESS") and status.startswith("UPDATE") else "failed"
            if status == "DELETE_COMPLETE":
                return None
            if phase == "failed":
                detail = failure_detail(pc, self.key, ctx.region, described)
                detail += ("; keep a failed stack for debugging with `fmcluster create SPEC --no-rollback`"
                           if self.rollback else "")
            else:
                detail = latest_event(pc, self.key, ctx.region) if phase == "pending" else ""
            head = described.get("headNode") or {}
            outputs = {f"pcluster_cluster.{self.key}.head_node_ip": head.get("publicIpAddress")
                       or head.get("privateIpAddress"),
                       f"pcluster_cluster.{self.key}.fleet": described.get("computeFleetStatus")}
            return Observed(described.get("cloudformationStackArn"), status, phase, outputs, detail)

    def create(self, ctx: Context, token: str) -> Observed:
        with pcluster() as pc:
            try:
                created = pc.create_cluster(cluster_name=self.key, cluster_configuration=self.resolved_config(ctx),
                                            region=ctx.region, rollback_on_failure=self.rollback)
            except Exception as exc:
                if type(exc).__name__ == "ConflictException":  # a previous run got this far: attach to it
                    return self.read(ctx, None) or Observed(None, "CREATE_IN_PROGRESS", "pending")
                raise api_error(self.name, exc, "fix the spec and re-run the same command", self.locate) from None
        cluster = created["cluster"]
        return Observed(cluster.get("cloudformationStackArn"), cluster.get("cloudFormationStackStatus",
                                                                           "CREATE_IN_PROGRESS"), "pending")

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        """ParallelCluster's change set for the rendered config against the deployed one."""
        config = ctx.resolve(self.document.body, partial=True)
        if references(config) or _has_unknown(config):
            return [AttributeChange("ClusterConfiguration", "deployed", "(known after apply)")]
        with pcluster() as pc:
            try:
                pc.update_cluster(cluster_name=self.key, cluster_configuration=config, region=ctx.region,
                                  dryrun=True)
            except Exception as exc:
                return _change_set(self.name, exc)
        return []

    def replacement_reason(self, changes: list[AttributeChange]) -> str | None:
        fixed = [c for c in changes if c.note and not any(n in c.note for n in FLEET_STOP_NOTES)]
        if not fixed:
            return None
        return "ParallelCluster cannot update in place: " + "; ".join(f"{c.path}: {c.note}" for c in fixed)

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        needs_stop = any(c.note and any(n in c.note for n in FLEET_STOP_NOTES) for c in changes)
        if needs_stop and not self.stop_fleet_for_update:
            raise EngineFailed(f"{self.name}: this update needs the compute fleet stopped, which was not agreed to")
        with pcluster() as pc:
            if needs_stop:
                set_fleet(pc, self.key, ctx.region, "STOP_REQUESTED", "STOPPED", ctx.stop)
            try:
                pc.update_cluster(cluster_name=self.key, cluster_configuration=self.resolved_config(ctx),
                                  region=ctx.region)
            except Exception as exc:
                raise api_error(self.name, exc) from None
        return Observed(observed.id, "UPDATE_IN_PROGRESS", "pending")

    def delete(self, ctx: Context, observed: Observed) -> None:
        with pcluster() as pc:
            try:
                pc.delete_cluster(cluster_name=self.key, region=ctx.region)
            except Exception as exc:
                if type(exc).__name__ != "NotFoundException":
                    raise api_error(self.name, exc) from None


def _has_unknown(value: Any) -> bool:
    if isinstance(value, Unknown):
        return True
    if isinstance(value, dict):
        return any(_has_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return False


def _change_set(resource: str, exc: Exception) -> list[AttributeChange]:
    """A dry-run update's answer → changes, each failed check's message kept as the change's note."""
    name = type(exc).__name__
    content = content_of(exc)
    message = getattr(content, "message", "") or str(exc)
    if name == "BadRequestException" and "No changes found" in message:
        return []
    if name not in ("DryrunOperationException", "UpdateClusterBadRequestException"):
        raise api_error(resource, exc) from None
    notes = {e.parameter: e.message or "" for e in getattr(content, "update_validation_errors", None) or []}
    changes = [AttributeChange(c.parameter, _value(c.current_value), _value(c.requested_value),
                               notes.get(c.parameter, ""))
               for c in getattr(content, "change_set", None) or []]
    if name == "UpdateClusterBadRequestException" and not changes:
        # The config itself fails ParallelCluster's validators: say so rather than show an empty change.
        raise api_error(resource, exc) from None
    return changes


def _value(text: Any) -> Any:
    return None if text in (None, "-") else text


class ComputeFleet(Resource):
    """The cluster's compute fleet: RUNNING when the engine is done. Deleted with the cluster."""

    kind = "compute_fleet"
    teardown_rank = 5
    owned_by_parent = True
    STATUS = "ComputeFleetStatus"

    def __init__(self, key: str):
        self.key = key
        self.extra_edges = (f"pcluster_cluster:{key}",)

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        with pcluster() as pc:
            try:
                status = pc.describe_compute_fleet(cluster_name=self.key, region=ctx.region)["status"]
            except Exception as exc:
                if type(exc).__name__ == "NotFoundException":
                    return None
                raise api_error(self.name, exc) from None
        return Observed(self.key, status, FLEET_PHASES.get(status, "pending"))

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        # A fleet stopped for an update (or by hand) is started again: the spec's nodes should be up.
        if observed.status in ("STOPPED", "DISABLED"):
            return [AttributeChange(self.STATUS, observed.status, "RUNNING")]
        return []

    def create(self, ctx: Context, token: str) -> Observed:
        raise EngineFailed(f"{self.name}: the cluster has no compute fleet yet")

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        with pcluster() as pc:
            try:
                pc.update_compute_fleet(cluster_name=self.key, status="START_REQUESTED", region=ctx.region)
            except Exception as exc:
                raise api_error(self.name, exc) from None
        return Observed(self.key, "START_REQUESTED", "pending")

    def delete(self, ctx: Context, observed: Observed) -> None:
        raise FmclusterError(f"{self.name} is deleted with its cluster's stack")


class ClusterInstances(Resource):
    """Compute nodes that outlive their cluster's stack (a failed delete, a node launched late): ended with
    ParallelCluster's own ``delete_cluster_instances``. Only ever in a teardown."""

    kind = "cluster_instances"
    teardown_rank = 15

    def __init__(self, key: str):
        self.key = key

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        live = scan_instances(ctx, [{"Name": "tag:parallelcluster:cluster-name", "Values": [self.key]}])
        if not live:
            return None
        for instance in live:
            require_ours(f"EC2 instance {instance['InstanceId']}", tag_dict(instance.get("Tags")), ctx)
        return Observed(",".join(sorted(i["InstanceId"] for i in live)), f"{len(live)} running", "ready")

    def create(self, ctx: Context, token: str) -> Observed:
        raise EngineFailed(f"{self.name} are made by the cluster, never by fmcluster")

    def delete(self, ctx: Context, observed: Observed) -> None:
        with pcluster() as pc:
            try:
                pc.delete_cluster_instances(cluster_name=self.key, region=ctx.region, force=True)
            except Exception as exc:
                raise api_error(self.name, exc) from None
