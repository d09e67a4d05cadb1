"""ParallelCluster 3 backend: the cluster is one CloudFormation stack that ParallelCluster builds through its
Python API; fmcluster makes before it only what ParallelCluster cannot (an OpenZFS /home and its NFS
security group), and reads the deployed configuration back for ``status``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fmcluster.aws.build import SHARED, Maker, build, by_key
from fmcluster.aws.discovery import Discovered, instance_found, scan_ec2, scan_fsx, scan_instances
from fmcluster.aws.fsx import FsxOpenZfs
from fmcluster.aws.guard import scan_guard
from fmcluster.aws.ownership import is_ours, tag_dict
from fmcluster.aws.s3 import ScriptsBucket, scan_buckets
from fmcluster.backends.lazy import LifecycleDefaults
from fmcluster.backends.parallelcluster.api import api_error, pcluster
from fmcluster.backends.parallelcluster.logs import cluster_logs
from fmcluster.backends.parallelcluster.nodejs import find_node
from fmcluster.backends.parallelcluster.profile import PROFILE
from fmcluster.backends.parallelcluster.render import render as render_parallelcluster
from fmcluster.backends.parallelcluster.resources import (
    FLEET_STOP_NOTES,
    ClusterInstances,
    ComputeFleet,
    PclusterCluster,
    described_cluster,
)
from fmcluster.backends.protocol import LoginNode, LogLine, Question
from fmcluster.engine import Resource, ResourceChange
from fmcluster.engine.concurrently import gather
from fmcluster.render.common import CLUSTER_ID_TAG, CLUSTER_TAG

if TYPE_CHECKING:
    from fmcluster.backends.context import BackendContext
    from fmcluster.spec.models import Spec

SLURMCTLD_PORT = 6817


class ParallelClusterLifecycle(LifecycleDefaults):
    name = PROFILE.name

    def check_requirements(self) -> None:
        """ParallelCluster synthesises its CloudFormation template with the CDK, which runs on Node.js."""
        find_node()

    def resources(self, context: BackendContext, options: dict[str, Any] | None = None) -> list[Resource]:
        options = options or {}
        spec = context.require_spec()
        placement = context.placement()
        rendered = render_parallelcluster(spec, context.spec_file, subnet_id=placement.subnet_id,
                                          vpc_id=placement.vpc_id)
        return [*build(rendered.documents, makers(spec, rendered.documents, options), PROFILE.display),
                ComputeFleet(spec.name)]

    def scales(self, path: str) -> bool:
        # A shrink stops the compute fleet; starting it again is part of the same scale.
        return path.endswith(".MinCount") or path.endswith(".MaxCount") or path == ComputeFleet.STATUS

    def questions(self, context: BackendContext, changes: list[ResourceChange]) -> list[Question]:
        stops = [c for change in changes if change.action == "update" for c in change.attributes
                 if c.note and any(note in c.note for note in FLEET_STOP_NOTES)]
        if not stops:
            return []
        return [Question(
            "this change needs the compute fleet stopped first (ParallelCluster's update rules: "
            f"{stops[0].note.rstrip('.')}): running jobs are ended, then the fleet is started again",
            f"Stop the compute fleet of {context.name}, update, and start it again?", {"stop_fleet": True})]

    # -- what AWS holds -----------------------------------------------------------------------------
    def _describe(self, context: BackendContext) -> dict[str, Any] | None:
        """ParallelCluster's DescribeCluster; in a read-only pass, once for describe, discovery and the plan."""
        return described_cluster(context.ctx, context.name)

    def find_cluster_id(self, context: BackendContext) -> str | None:
        described = self._describe(context)
        if described is None:
            return None
        tags = tag_dict(described.get("tags"))
        return tags.get(CLUSTER_ID_TAG) if tags.get(CLUSTER_TAG) == context.name else None

    def discover(self, context: BackendContext) -> list[Discovered]:
        ctx = context.ctx

        def stack_and_nodes() -> list[Discovered]:
            described = self._describe(context)
            nodes = scan_instances(ctx, [{"Name": "tag:parallelcluster:cluster-name", "Values": [context.name]}])
            found: list[Discovered] = [instance_found(i, "a ParallelCluster node") for i in nodes]
            if nodes and described is None:  # the stack is gone and its nodes are not: end them
                found.insert(0, Discovered(
                    f"cluster_instances:{context.name}", context.name, f"{len(nodes)} running",
                    f"{len(nodes)} compute nodes of {context.name} outliving its stack", True,
                    ClusterInstances(context.name)))
            if described is not None and described["cloudFormationStackStatus"] != "DELETE_COMPLETE":
                tags = tag_dict(described.get("tags"))
                ours = is_ours(tags, ctx)
                found.insert(0, Discovered(
                    f"pcluster_cluster:{context.name}", described.get("cloudformationStackArn") or context.name,
                    described["cloudFormationStackStatus"],
                    f"ParallelCluster cluster {context.name} (stack {described['cloudFormationStackStatus']})",
                    ours, PclusterCluster(context.name) if ours else None, tags.get(CLUSTER_ID_TAG, "")))
            return found

        # ParallelCluster's DescribeCluster (a dozen calls of its own) beside fmcluster's scans
        return gather([stack_and_nodes, lambda: scan_ec2(ctx, context.stack_kinds),
                       lambda: scan_fsx(ctx, context.stack_kinds), lambda: scan_buckets(ctx),
                       lambda: scan_guard(ctx)])  # the budget guard's schedules and backstop

    def describe(self, context: BackendContext) -> dict[str, Any]:
        report: dict[str, Any] = {"name": context.name, "backend": PROFILE.name, "region": context.region,
                                  "status": "NOT_FOUND", "backend_status": None, "queues": [],
                                  "slurm_endpoint": None, "instances": [], "problems": []}
        described = self._describe(context)
        if described is None:
            return report
        with pcluster() as pc:
            try:
                instances = pc.describe_cluster_instances(cluster_name=context.name,
                                                          region=context.region).get("instances", [])
            except Exception as exc:
                raise api_error(f"pcluster_cluster:{context.name}", exc) from None
        stack_status = described["cloudFormationStackStatus"]
        report["status"] = PROFILE.common_status(described.get("clusterStatus") or stack_status)
        report["backend_status"] = described.get("clusterStatus") or stack_status
        report["cloudformation_stack_status"] = stack_status
        report["compute_fleet"] = described.get("computeFleetStatus")
        report["version"] = described.get("version")
        report["problems"] = [f"{f.get('failureCode')}: {f.get('failureReason')}"
                              for f in described.get("failures") or []]
        head = described.get("headNode") or {}
        if head:
            report["head_node"] = (f"{head.get('instanceId')} {head.get('state')} "
                                   f"{head.get('publicIpAddress') or head.get('privateIpAddress') or ''}").strip()
            if head.get("privateIpAddress"):
                report["slurm_endpoint"] = f"{head['privateIpAddress']}:{SLURMCTLD_PORT}"
        for instance in instances:
            report["instances"].append({
                "id": instance.get("instanceId"), "queue": instance.get("queueName") or "(head node)",
                "instance_type": instance.get("instanceType"), "state": instance.get("state"),
                "launch_time": instance.get("launchTime"), "node_type": instance.get("nodeType")})
        for queue in _deployed_queues(described):
            running = sum(1 for i in instances if i.get("queueName") == queue["name"] and i.get("state") == "running")
            report["queues"].append({**queue, "status": described.get("computeFleetStatus"),
                                     "running_instances": running})
        return report

    def login_node(self, context: BackendContext) -> LoginNode | None:
        head = (self._describe(context) or {}).get("headNode") or {}
        if not head.get("instanceId"):
            return None
        return LoginNode(head["instanceId"], PROFILE.login_role, head.get("state"), head.get("publicIpAddress"),
                         head.get("privateIpAddress"))

    def cluster_logs(self, context: BackendContext, since: float | None, lines: int) -> tuple[list[LogLine], list[str]]:
        return cluster_logs(context.name, context.region, since, lines)


def _deployed_queues(described: dict[str, Any]) -> list[dict[str, Any]]:
    """The queues of the configuration ParallelCluster deployed (not the spec's): what AWS runs."""
    url = (described.get("clusterConfiguration") or {}).get("url")
    if not url:
        return []
    import ssl
    import urllib.request

    import yaml

    context = ssl.create_default_context(cafile=os.environ.get("AWS_CA_BUNDLE") or None)
    with urllib.request.urlopen(url, context=context, timeout=30) as response:  # noqa: S310 (a presigned S3 URL)
        config = yaml.safe_load(response.read())
    queues = []
    for queue in (config.get("Scheduling") or {}).get("SlurmQueues") or []:
        resources = queue.get("ComputeResources") or []
        types = sorted({r.get("InstanceType") for r in resources if r.get("InstanceType")} |
                       {i.get("InstanceType") for r in resources for i in r.get("Instances") or []})
        queues.append({"name": queue["Name"], "instance_type": ", ".join(types) or None,
                       "min": sum(r.get("MinCount", 0) for r in resources),
                       "max": sum(r.get("MaxCount", 10) for r in resources)})
    return queues


def makers(spec: Spec, documents: list[Any], options: dict[str, Any] | None = None) -> dict[str, Maker]:
    """Which resource applies each kind of document the ParallelCluster renderer makes (also what the spec-field
    walk builds its resources with, tests/spec/test_schema_walk.py)."""
    options = options or {}
    return SHARED | by_key({"fsx_openzfs": FsxOpenZfs, "bucket": ScriptsBucket}) | {
        "pcluster_cluster": lambda document: PclusterCluster(
            document.key, document, rollback=options.get("rollback", True),
            stop_fleet_for_update=options.get("stop_fleet", False), locate=options.get("locate"))}
