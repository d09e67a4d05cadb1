"""ParallelCluster 3 backend: the cluster is one CloudFormation stack that ParallelCluster builds through its
Python API; fmcluster makes before it only what ParallelCluster cannot (an OpenZFS /home and its NFS
security group), and reads the deployed configuration back for ``status``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fmcluster.aws.build import SHARED, Maker, build, by_key
from fmcluster.aws.discovery import instance_found, scan_ec2, scan_fsx, scan_instances
from fmcluster.aws.fsx import FsxOpenZfs
from fmcluster.aws.ownership import is_ours, tag_dict
from fmcluster.aws.s3 import ScriptsBucket, scan_buckets
from fmcluster.backends.base import Backend, Discovered, LoginNode, LogLine, Question
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
from fmcluster.engine import Resource, ResourceChange
from fmcluster.render.common import CLUSTER_ID_TAG, CLUSTER_TAG

if TYPE_CHECKING:
    from fmcluster.spec.models import Spec
    from fmcluster.verbs.session import Session

SLURMCTLD_PORT = 6817


class ParallelClusterBackend(Backend):
    name = PROFILE.name

    def check_requirements(self) -> None:
        """ParallelCluster synthesises its CloudFormation template with the CDK, which runs on Node.js."""
        find_node()

    def resources(self, session: Session, options: dict[str, Any] | None = None) -> list[Resource]:
        options = options or {}
        spec = session.require_spec()
        placement = session.placement()
        rendered = render_parallelcluster(spec, session.spec_file, subnet_id=placement.subnet_id,
                                          vpc_id=placement.vpc_id)
        return [*build(rendered.documents, makers(spec, rendered.documents, options), PROFILE.display),
                ComputeFleet(spec.name)]

    def scales(self, path: str) -> bool:
        # A shrink stops the compute fleet; starting it again is part of the same scale.
        return path.endswith(".MinCount") or path.endswith(".MaxCount") or path == ComputeFleet.STATUS

    def questions(self, session: Session, changes: list[ResourceChange]) -> list[Question]:
        stops = [c for change in changes if change.action == "update" for c in change.attributes
                 if c.note and any(note in c.note for note in FLEET_STOP_NOTES)]
        if not stops:
            return []
        return [Question(
            "this change needs the compute fleet stopped first (ParallelCluster's update rules: "
            f"{stops[0].note.rstrip('.')}): running jobs are ended, then the fleet is started again",
            f"Stop the compute fleet of {session.name}, update, and start it again?", {"stop_fleet": True})]

    # -- what AWS holds -----------------------------------------------------------------------------
    def _describe(self, session: Session) -> dict[str, Any] | None:
        """ParallelCluster's DescribeCluster; in a read-only pass, once for describe, discovery and the plan."""
        return described_cluster(session.ctx, session.name)

    def find_cluster_id(self, session: Session) -> str | None:
        described = self._describe(session)
        if described is None:
            return None
        tags = tag_dict(described.get("tags"))
        return tags.get(CLUSTER_ID_TAG) if tags.get(CLUSTER_TAG) == session.name else None

    def discover(self, session: Session) -> list[Discovered]:
        ctx = session.ctx
        found: list[Discovered] = []
        described = self._describe(session)
        if described is not None and described["cloudFormationStackStatus"] != "DELETE_COMPLETE":
            tags = tag_dict(described.get("tags"))
            ours = is_ours(tags, ctx)
            found.append(Discovered(
                f"pcluster_cluster:{session.name}", described.get("cloudformationStackArn") or session.name,
                described["cloudFormationStackStatus"],
                f"ParallelCluster cluster {session.name} (stack {described['cloudFormationStackStatus']})",
                ours, PclusterCluster(session.name) if ours else None, tags.get(CLUSTER_ID_TAG, "")))
        found += scan_ec2(ctx) + scan_fsx(ctx) + scan_buckets(ctx)
        nodes = scan_instances(ctx, [{"Name": "tag:parallelcluster:cluster-name", "Values": [session.name]}])
        if nodes and described is None:  # the stack is gone and its nodes are not: end them
            found.append(Discovered(f"cluster_instances:{session.name}", session.name, f"{len(nodes)} running",
                                    f"{len(nodes)} compute nodes of {session.name} outliving its stack", True,
                                    ClusterInstances(session.name)))
        found += [instance_found(i, "a ParallelCluster node") for i in nodes]
        return found

    def describe(self, session: Session) -> dict[str, Any]:
        report: dict[str, Any] = {"name": session.name, "backend": PROFILE.name, "region": session.region,
                                  "status": "NOT_FOUND", "backend_status": None, "queues": [],
                                  "slurm_endpoint": None, "instances": [], "problems": []}
        described = self._describe(session)
        if described is None:
            return report
        with pcluster() as pc:
            try:
                instances = pc.describe_cluster_instances(cluster_name=session.name,
                                                          region=session.region).get("instances", [])
            except Exception as exc:
                raise api_error(f"pcluster_cluster:{session.name}", exc) from None
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

    def login_node(self, session: Session) -> LoginNode | None:
        head = (self._describe(session) or {}).get("headNode") or {}
        if not head.get("instanceId"):
            return None
        return LoginNode(head["instanceId"], PROFILE.login_role, head.get("state"), head.get("publicIpAddress"),
                         head.get("privateIpAddress"))

    def cluster_logs(self, session: Session, since: float | None, lines: int) -> tuple[list[LogLine], list[str]]:
        return cluster_logs(session.name, session.region, since, lines)


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
