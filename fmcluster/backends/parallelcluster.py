"""ParallelCluster 3 backend, through ParallelCluster's own Python API ``pcluster.lib`` (never the
``pcluster`` command). The cluster is one CloudFormation stack that ParallelCluster builds; its compute
fleet is a second resource, so a scale that had to stop the fleet starts it again through the engine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fmcluster.engine import Context, EngineFailed, Observed, Resource
from fmcluster.errors import AwsError, FmclusterError
from fmcluster.network import Placement
from fmcluster.nodejs import quiet_jsii_banner
from fmcluster.render.documents import RenderedDocuments, references
from fmcluster.render.parallelcluster import render_parallelcluster
from fmcluster.spec.models import Spec, max_nodes, min_nodes

_PHASES = {
    "CREATE_IN_PROGRESS": "pending", "UPDATE_IN_PROGRESS": "pending", "DELETE_IN_PROGRESS": "pending",
    "CREATE_COMPLETE": "ready", "UPDATE_COMPLETE": "ready", "CREATE_FAILED": "failed",
    "UPDATE_FAILED": "failed", "DELETE_FAILED": "failed",
}
# STOPPED is settled (ready); ``differs`` then asks for the fleet to be started again.
_FLEET_PHASES = {"RUNNING": "ready", "STOPPED": "ready", "STOP_REQUESTED": "pending",
                 "STOPPING": "pending", "START_REQUESTED": "pending", "STARTING": "pending",
                 "PROTECTED": "failed", "ENABLED": "ready", "DISABLED": "pending", "UNKNOWN": "pending"}


def check_requirements() -> None:
    """ParallelCluster synthesises its CloudFormation template with the CDK, which runs on Node.js."""
    from fmcluster.nodejs import find_node

    find_node()


@contextmanager
def _pcluster() -> Iterator[Any]:
    """pcluster.lib, with its root-logger chatter kept out of the user's terminal."""
    import asyncio

    import pcluster.lib as pc

    _quiet_cdk_preload()
    quiet_jsii_banner()
    # The engine calls from worker threads; ParallelCluster's CDK step (jsii) wants an event loop there.
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield pc
    finally:
        logging.disable(previous)


def _quiet_cdk_preload() -> None:
    """pcluster preloads the CDK in a background thread; if the command ends first (say, a config that
    fails validation), that thread dies noisily at exit. Its failure changes nothing: keep it off screen."""
    import threading

    previous = threading.excepthook
    if getattr(previous, "_fmcluster", False):
        return

    def hook(args: Any) -> None:
        if args.thread is not None and "import_cdk" in args.thread.name:
            return
        previous(args)

    hook._fmcluster = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def _content(exc: Exception) -> Any:
    return getattr(exc, "content", None)


def _api_error(resource: str, exc: Exception, hint: str = "",
               locate: Callable[[str], str | None] | None = None) -> FmclusterError:
    """A pcluster.lib exception as one message, ParallelCluster's validation findings grouped by level,
    each with the spec position it is about where ``locate`` can tell."""
    content = _content(exc)
    if content is None:
        from fmcluster.aws import describe_error

        return describe_error(resource, exc, hint)
    lines = [getattr(content, "message", None) or type(exc).__name__]
    findings = (getattr(content, "configuration_validation_errors", None) or []) + \
        (getattr(content, "update_validation_errors", None) or [])
    by_level: dict[str, list[str]] = {}
    for item in findings:
        text = getattr(item, "message", str(item))
        where = getattr(item, "parameter", None)
        by_level.setdefault(str(getattr(item, "level", "ERROR") or "ERROR"), []).append(
            f"{getattr(item, 'type', '') or where or ''}: {text}".strip(": "))
    for level in ("ERROR", "WARNING", "INFO"):
        for text in by_level.get(level, []):
            where = locate(text) if locate else None
            lines.append(f"{level}: {text}" + (f"\n    ← {where}" if where else ""))
    return AwsError(resource, type(exc).__name__.removesuffix("Exception"), "\n".join(lines), hint)


def _failure_detail(pc: Any, name: str, region: str, described: dict[str, Any]) -> str:
    parts = [f"{f.get('failureCode')}: {f.get('failureReason')}" for f in described.get("failures") or []]
    try:
        events = pc.get_cluster_stack_events(cluster_name=name, region=region)["events"]
    except Exception:  # the stack may already be rolling back or gone; the failures above still stand
        events = []
    failed = [e for e in events if str(e.get("resourceStatus", "")).endswith("FAILED")][:5]
    parts += [f"{e.get('logicalResourceId')} {e.get('resourceStatus')}: {e.get('resourceStatusReason', '')}"
              for e in failed]
    return "; ".join(parts)


def _latest_event(pc: Any, name: str, region: str) -> str:
    try:
        events = pc.get_cluster_stack_events(cluster_name=name, region=region)["events"]
    except Exception:  # progress detail only; never fail a poll over it
        return ""
    if not events:
        return ""
    newest = events[0]
    return f"{newest.get('logicalResourceId')} {newest.get('resourceStatus')}"


class PclusterCluster(Resource):
    """The ParallelCluster cluster. Its config may refer to what fmcluster creates first (``${fsx_openzfs.
    root_volume_id}``): references are filled from the engine's values when the config is sent."""

    kind = "pcluster_cluster"

    def __init__(self, spec: Spec, config: dict[str, Any], rollback: bool, applied: Spec | None,
                 stop_fleet_for_update: bool = False, depends_on: tuple[str, ...] = (),
                 locate: Callable[[str], str | None] | None = None):
        self.key = spec.name
        self.spec = spec
        self.config = config
        self.rollback = rollback
        self.applied = applied
        self.stop_fleet_for_update = stop_fleet_for_update
        self.depends_on = depends_on
        self.locate = locate

    def resolved_config(self, ctx: Context) -> dict[str, Any]:
        missing = sorted(ref for ref in references(self.config) if ref not in ctx.values)
        if missing:
            raise EngineFailed(f"{self.name}: the config needs {', '.join(missing)}, which nothing has provided yet")
        return ctx.resolve(self.config)

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        with _pcluster() as pc:
            try:
                described = pc.describe_cluster(cluster_name=self.key, region=ctx.region)
            except Exception as exc:
                if type(exc).__name__ == "NotFoundException":
                    return None
                raise _api_error(self.name, exc) from None
            status = described["cloudFormationStackStatus"]
            phase = _PHASES.get(status, "pending")
            if "ROLLBACK" in status:
                phase = "pending" if status.endswith("IN_PROGRESS") and status.startswith("UPDATE") else "failed"
            if phase == "failed":
                detail = _failure_detail(pc, self.key, ctx.region, described)
                detail += ("; keep a failed stack for debugging with `fmcluster create SPEC --no-rollback`"
                           if self.rollback else "")
            else:
                detail = _latest_event(pc, self.key, ctx.region) if phase == "pending" else ""
            head = described.get("headNode") or {}
            outputs = {"cluster.head_node_ip": head.get("publicIpAddress") or head.get("privateIpAddress"),
                       "cluster.fleet": described.get("computeFleetStatus")}
            return Observed(described.get("cloudformationStackArn"), status, phase, outputs, detail)

    def create(self, ctx: Context) -> Observed:
        with _pcluster() as pc:
            try:
                created = pc.create_cluster(cluster_name=self.key, cluster_configuration=self.resolved_config(ctx),
                                            region=ctx.region, rollback_on_failure=self.rollback)
            except Exception as exc:
                if type(exc).__name__ == "ConflictException":  # a previous run got this far: attach to it
                    return self.read(ctx, None) or Observed(None, "CREATE_IN_PROGRESS", "pending")
                raise _api_error(self.name, exc, "fix the spec and re-run; nothing was created",
                                 self.locate) from None
        cluster = created["cluster"]
        return Observed(cluster.get("cloudformationStackArn"), cluster.get("cloudFormationStackStatus",
                                                                           "CREATE_IN_PROGRESS"), "pending")

    def differs(self, ctx: Context, observed: Observed) -> str | None:
        if self.applied is None:
            return None
        changes = [f"{new.name} {min_nodes(old)}..{max_nodes(old)} → {min_nodes(new)}..{max_nodes(new)}"
                   for old, new in zip(self.applied.queues, self.spec.queues, strict=False)
                   if (min_nodes(old), max_nodes(old)) != (min_nodes(new), max_nodes(new))]
        return ", ".join(changes) or None

    def update(self, ctx: Context, observed: Observed) -> Observed:
        with _pcluster() as pc:
            if self.stop_fleet_for_update:
                set_fleet(pc, self.key, ctx.region, "STOP_REQUESTED", "STOPPED")
            try:
                pc.update_cluster(cluster_name=self.key, cluster_configuration=self.resolved_config(ctx),
                                  region=ctx.region)
            except Exception as exc:
                raise _api_error(self.name, exc) from None
        return Observed(observed.id, "UPDATE_IN_PROGRESS", "pending")

    def delete(self, ctx: Context, observed: Observed) -> None:
        with _pcluster() as pc:
            try:
                pc.delete_cluster(cluster_name=self.key, region=ctx.region)
            except Exception as exc:
                if type(exc).__name__ != "NotFoundException":
                    raise _api_error(self.name, exc) from None


class ComputeFleet(Resource):
    """The cluster's compute fleet: RUNNING when the engine is done. Deleted with the cluster."""

    kind = "compute_fleet"
    owned_by_parent = True

    def __init__(self, name: str):
        self.key = name
        self.depends_on = (f"pcluster_cluster:{name}",)

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        with _pcluster() as pc:
            try:
                status = pc.describe_compute_fleet(cluster_name=self.key, region=ctx.region)["status"]
            except Exception as exc:
                if type(exc).__name__ == "NotFoundException":
                    return None
                raise _api_error(self.name, exc) from None
        return Observed(self.key, status, _FLEET_PHASES.get(status, "pending"))

    def create(self, ctx: Context) -> Observed:
        raise EngineFailed(f"{self.name}: the cluster has no compute fleet yet")

    def differs(self, ctx: Context, observed: Observed) -> str | None:
        return "start the stopped compute fleet" if observed.status == "STOPPED" else None

    def update(self, ctx: Context, observed: Observed) -> Observed:
        with _pcluster() as pc:
            try:
                pc.update_compute_fleet(cluster_name=self.key, status="START_REQUESTED", region=ctx.region)
            except Exception as exc:
                raise _api_error(self.name, exc) from None
        return Observed(self.key, "START_REQUESTED", "pending")

    def delete(self, ctx: Context, observed: Observed) -> None:
        """Goes with the cluster's stack."""


def set_fleet(pc: Any, name: str, region: str, request: str, until: str, timeout: float = 1800) -> None:
    """Request a compute-fleet state change and wait for it (ParallelCluster's fleet-stop dance)."""
    try:
        pc.update_compute_fleet(cluster_name=name, status=request, region=region)
    except Exception as exc:
        raise _api_error(f"compute_fleet:{name}", exc) from None
    deadline = time.monotonic() + timeout
    waited = 0.0
    while time.monotonic() < deadline:
        if pc.describe_compute_fleet(cluster_name=name, region=region)["status"] == until:
            return
        pause = max(0.5, min(10.0, waited * 0.15))
        time.sleep(pause)
        waited += pause
    raise EngineFailed(f"compute fleet of {name} did not reach {until} within {timeout / 60:.0f} min")


def render_documents(spec: Spec, placement: Placement, spec_file: str) -> RenderedDocuments:
    return render_parallelcluster(spec, spec_file, subnet_id=placement.subnet_id, vpc_id=placement.vpc_id)


def build_resources(spec: Spec, placement: Placement, generation: str, spec_file: str = "spec.yaml",
                    applied: Spec | None = None, rollback: bool = True,
                    stop_fleet_for_update: bool = False,
                    locate: Callable[[str], str | None] | None = None) -> list[Resource]:
    """[OpenZFS security group, OpenZFS file system] (for an OpenZFS /home: ParallelCluster only mounts
    one), then the cluster, rendered with the file system's root volume once it exists, and its fleet."""
    from fmcluster.backends.aws_resources import FsxOpenZfs, NfsSecurityGroup
    from fmcluster.backends.pcs import client_token

    rendered = render_documents(spec, placement, spec_file)
    resources: list[Resource] = []
    cluster_depends: tuple[str, ...] = ()
    for document in rendered.by_kind("fsx_openzfs"):
        group = NfsSecurityGroup(rendered.one("security_group", "fsx_openzfs"), placement.vpc_id)
        file_system = FsxOpenZfs(document, spec.name, (group.name,),
                                 client_token(spec, generation, f"fsx_openzfs/{document.key}")[:36])
        resources += [group, file_system]
        cluster_depends += (file_system.name,)
    cluster = PclusterCluster(spec, rendered.one("pcluster_cluster").body, rollback, applied, stop_fleet_for_update,
                              depends_on=cluster_depends, locate=locate)
    return [*resources, cluster, ComputeFleet(spec.name)]


def _storage_values(session: Any, resources: list[Resource]) -> dict[str, Any]:
    """Outputs of the storage the cluster's config refers to, read from AWS (``scale`` runs no engine first)."""
    values: dict[str, Any] = {}
    for resource in resources:
        if resource.is_storage:
            observed = resource.read(session.ctx, None)
            if observed is None:
                raise EngineFailed(f"{resource.name} no longer exists: re-run `fmcluster create` to recreate it")
            values.update(observed.outputs)
    return values


def scale(session: Any, old_spec: Spec, new_spec: Spec, yes: bool) -> None:
    """ParallelCluster's update rules: show its change set; shrinking needs the compute fleet stopped."""
    from fmcluster import ui
    from fmcluster.lifecycle import confirm, run_engine

    placement = session.placement()
    planned = build_resources(new_spec, placement, session.generation(), session.spec_file)
    cluster = next(r for r in planned if isinstance(r, PclusterCluster))
    config = cluster.config
    if references(config):
        from fmcluster.render.documents import resolve

        config = resolve(config, _storage_values(session, planned))
    needs_stop = False
    with _pcluster() as pc:
        try:
            pc.update_cluster(cluster_name=new_spec.name, cluster_configuration=config, region=session.region,
                              dryrun=True)
        except Exception as exc:
            content = _content(exc)
            name = type(exc).__name__
            if name == "DryrunOperationException":
                for change in getattr(content, "change_set", None) or []:
                    ui.note(f"ParallelCluster change: {change.parameter}: {change.current_value} → "
                            f"{change.requested_value}")
            elif name == "UpdateClusterBadRequestException" and any(
                    "stop" in (e.message or "").lower() for e in getattr(content, "update_validation_errors", [])
                    or []):
                needs_stop = True
            else:
                raise _api_error(f"pcluster_cluster:{new_spec.name}", exc) from None
    if needs_stop:
        ui.warning("this change needs the compute fleet stopped first (ParallelCluster's update rules): "
                   "running jobs are ended, then the fleet is started again after the update")
        confirm(f"Stop the compute fleet of {new_spec.name}, update, and start it again?", yes)
    else:
        ui.note("ParallelCluster applies this change live (no fleet stop)")
        confirm(f"Apply these changes to {new_spec.name}?", yes)
    resources = build_resources(new_spec, placement, session.generation(), session.spec_file, applied=old_spec,
                                stop_fleet_for_update=needs_stop)
    run_engine(session, f"Scaling {new_spec.name}", "apply", resources)


def describe(session: Any) -> dict[str, Any]:
    """describe_cluster + describe_cluster_instances, in the backend-neutral shape of DESIGN §3."""
    spec: Spec = session.spec
    region = session.region
    report: dict[str, Any] = {"name": spec.name, "backend": "parallelcluster", "region": region,
                              "status": "NOT_FOUND", "queues": [], "resources": []}
    with _pcluster() as pc:
        try:
            described = pc.describe_cluster(cluster_name=spec.name, region=region)
        except Exception as exc:
            if type(exc).__name__ == "NotFoundException":
                return report
            raise _api_error(f"pcluster_cluster:{spec.name}", exc) from None
        instances = pc.describe_cluster_instances(cluster_name=spec.name, region=region).get("instances", [])
    report["status"] = described["clusterStatus"]
    report["cloudformation_stack_status"] = described["cloudFormationStackStatus"]
    report["compute_fleet"] = described.get("computeFleetStatus")
    report["version"] = described.get("version")
    head = described.get("headNode") or {}
    if head:
        report["head_node"] = (f"{head.get('instanceId')} {head.get('state')} "
                               f"{head.get('publicIpAddress') or head.get('privateIpAddress') or ''}").strip()
    report["resources"].append({"type": "pcluster_cluster", "key": spec.name,
                                "id": described.get("cloudformationStackArn"),
                                "status": described["cloudFormationStackStatus"]})
    for instance in instances:
        report["resources"].append({"type": f"instance:{instance.get('nodeType', '').lower()}", "key": "",
                                    "id": instance.get("instanceId"), "status": instance.get("state")})
    for queue in spec.queues:
        running = sum(1 for i in instances if i.get("queueName") == queue.name and i.get("state") == "running")
        report["queues"].append({"name": queue.name, "instance_type": queue.instance_type,
                                 "min": min_nodes(queue), "max": max_nodes(queue),
                                 "status": described.get("computeFleetStatus"), "running_instances": running})
    return report


def leftovers(session: Any) -> list[str]:
    """What a deleted ParallelCluster cluster could leave: its stack, its instances."""
    left = []
    cloudformation = session.ctx.client("cloudformation")
    try:
        stack = cloudformation.describe_stacks(StackName=session.spec.name)["Stacks"][0]
        if stack["StackStatus"] != "DELETE_COMPLETE":
            left.append(f"CloudFormation stack {session.spec.name} ({stack['StackStatus']})")
    except Exception as exc:  # ValidationError: the stack does not exist, which is what we want
        if "does not exist" not in str(exc):
            raise
    ec2 = session.ctx.client("ec2")
    reservations = ec2.describe_instances(Filters=[
        {"Name": "tag:parallelcluster:cluster-name", "Values": [session.spec.name]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])["Reservations"]
    left += [f"EC2 instance {i['InstanceId']} (ParallelCluster node)" for r in reservations for i in r["Instances"]]
    return left


def after_teardown(session: Any, yes: bool) -> None:
    """The stack is gone; compute nodes it launched can outlive it (a failed delete, a node launched late).
    Offer ParallelCluster's own ``delete_cluster_instances(force=True)`` for them."""
    from fmcluster import ui
    from fmcluster.lifecycle import confirm

    orphans = [item for item in leftovers(session) if item.startswith("EC2 instance")]
    if not orphans:
        return
    ui.warning(f"the stack of {session.spec.name} is gone but {len(orphans)} of its instances still run: "
               + ", ".join(item.split()[2] for item in orphans))
    confirm("Terminate them with ParallelCluster's delete_cluster_instances?", yes)
    with _pcluster() as pc:
        try:
            pc.delete_cluster_instances(cluster_name=session.spec.name, region=session.region, force=True)
        except Exception as exc:
            raise _api_error(f"pcluster_cluster:{session.spec.name}", exc) from None
    ec2 = session.ctx.client("ec2")
    ids = [item.split()[2] for item in orphans]
    ec2.get_waiter("instance_terminated").wait(InstanceIds=ids, WaiterConfig={"Delay": 2, "MaxAttempts": 150})


def login_node(session: Any) -> Any:
    """The cluster's head node from ``pcluster.lib.describe_cluster``, or None when the cluster is gone."""
    from fmcluster.connect.login import LoginNode

    with _pcluster() as pc:
        try:
            described = pc.describe_cluster(cluster_name=session.spec.name, region=session.region)
        except Exception as exc:
            if type(exc).__name__ == "NotFoundException":
                return None
            raise _api_error(f"pcluster_cluster:{session.spec.name}", exc) from None
    head = described.get("headNode") or {}
    if not head.get("instanceId"):
        return None
    return LoginNode(head["instanceId"], "head node", head.get("state"), head.get("publicIpAddress"),
                     head.get("privateIpAddress"))


def cluster_logs(session: Any, since: float | None, lines: int) -> tuple[list[Any], list[str]]:
    """The stack's CloudFormation events and the cluster's CloudWatch log streams, through pcluster.lib
    (the last ``lines`` events of each stream; with ``since``, only what came after it)."""
    import datetime

    from fmcluster.connect.logs import LogLine, epoch

    name, region = session.spec.name, session.region
    out: list[Any] = []
    with _pcluster() as pc:
        try:
            events, token = [], None
            while True:
                page = pc.get_cluster_stack_events(cluster_name=name, region=region,
                                                   **({"next_token": token} if token else {}))
                events += page.get("events") or []
                token = page.get("nextToken") or page.get("next_token")
                if not token:
                    break
        except Exception as exc:
            if type(exc).__name__ == "NotFoundException":
                return [], [f"ParallelCluster has no cluster {name} in {region}"]
            raise _api_error(f"pcluster_cluster:{name}", exc) from None
        for event in sorted(events, key=lambda e: epoch(e["timestamp"]))[-lines:]:
            reason = event.get("resourceStatusReason")
            out.append(LogLine(epoch(event["timestamp"]), "cloudformation",
                               f"{event.get('logicalResourceId')} {event.get('resourceStatus')}"
                               + (f": {reason}" if reason else "")))
        try:
            streams = pc.list_cluster_log_streams(cluster_name=name, region=region).get("logStreams") or []
        except Exception as exc:  # logging off, or no log group yet: say so, keep the stack events
            return out, [f"no CloudWatch log streams for {name}: {getattr(_content(exc), 'message', None) or exc}"]
        start = {"start_time": datetime.datetime.fromtimestamp(since, datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ")} if since else {}
        for item in streams:
            stream = item["logStreamName"]
            page = pc.get_cluster_log_events(cluster_name=name, log_stream_name=stream, region=region,
                                             start_from_head=False, limit=lines, **start)
            out += [LogLine(epoch(e["timestamp"]), stream, str(e.get("message", "")).rstrip())
                    for e in page.get("events") or []]
    return out, [] if streams else [f"the CloudWatch log group of {name} has no streams yet"]
