"""An EFS file system fmcluster creates for /home (PCS), with its one mount target in the compute subnet.

Found by its recorded id, else by its CreationToken (one per cluster id); tagged like everything else, so
``destroy`` finds it by tag. Deleting it deletes its mount targets first, as EFS requires.
"""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.discovery import Discovered
from fmcluster.aws.ec2 import error_code
from fmcluster.aws.existing_storage import EFS_DNS
from fmcluster.aws.ownership import is_ours, require_ours, tag_dict, tagged_for_cluster
from fmcluster.engine import Context, Observed, Resource, reads
from fmcluster.engine.waiting import pause
from fmcluster.render.common import CLUSTER_ID_TAG, RESOURCE_TAG
from fmcluster.render.documents import Document

MOUNT_TARGET_WAIT_SECONDS = 300
_PHASES = {"available": "ready", "updating": "ready", "creating": "pending", "error": "failed",
           "deleting": "pending", "deleted": "gone"}


class EfsFileSystem(Resource):
    kind = "efs"
    teardown_rank = 80
    is_storage = True
    stored_data = "every file on the file system"
    replace_on = ("PerformanceMode", "Encrypted", "SubnetId")

    def why_no_backup(self, ctx: Context, observed: Observed) -> str:
        return "EFS is backed up by AWS Backup (a backup vault and plan), which fmcluster does not manage"

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        self.key = key
        self.document = document
        self.known_id = known_id

    def _find(self, ctx: Context, known_id: str | None) -> dict[str, Any] | None:
        efs = ctx.client("efs")
        listed = reads.kept(ctx, "efs.FileSystems", known_id)  # what discovery listed in this read-only pass
        if listed is not reads.MISSING and listed is not None:
            return listed
        if known_id:
            try:
                return efs.describe_file_systems(FileSystemId=known_id)["FileSystems"][0]
            except ClientError as exc:
                if error_code(exc) != "FileSystemNotFound":
                    raise
                return None
        if self.document is None:
            return None
        token = ctx.resolve(self.document.body["create"]["CreationToken"])
        try:
            found = efs.describe_file_systems(CreationToken=token)["FileSystems"]
        except ClientError as exc:
            if error_code(exc) != "FileSystemNotFound":
                raise
            return None
        return found[0] if found else None

    def _mount_targets(self, ctx: Context, file_system_id: str) -> list[dict[str, Any]]:
        return ctx.client("efs").describe_mount_targets(FileSystemId=file_system_id).get("MountTargets", [])

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        fs = self._find(ctx, known_id or self.known_id)
        if fs is None:
            return None
        fs_id = fs["FileSystemId"]
        require_ours(f"EFS file system {fs_id}", tag_dict(fs.get("Tags")), ctx)
        state = fs.get("LifeCycleState", "available")
        phase = _PHASES.get(state, "pending")
        targets = self._mount_targets(ctx, fs_id) if phase != "gone" else []
        missing = []
        if phase == "ready":
            if not targets:
                missing = ["mount_target"]
            elif any(t.get("LifeCycleState") == "creating" for t in targets):
                phase, state = "pending", "mount target creating"
        return Observed(fs_id, state, phase,
                        {f"efs.{self.key}.id": fs_id, f"efs.{self.key}.dns_name": EFS_DNS.format(id=fs_id,
                                                                                             region=ctx.region)},
                        attributes={"PerformanceMode": fs.get("PerformanceMode"), "Encrypted": fs.get("Encrypted"),
                                    "SubnetId": targets[0].get("SubnetId") if targets else None},
                        missing=missing)

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        return {"PerformanceMode": body["create"]["PerformanceMode"], "Encrypted": body["create"]["Encrypted"],
                "SubnetId": body["mount_target"]["SubnetId"]}

    def _add_mount_target(self, ctx: Context, file_system_id: str) -> None:
        request = ctx.resolve({**self.document.body["mount_target"], "FileSystemId": file_system_id})
        ctx.client("efs").create_mount_target(**request)

    def create(self, ctx: Context, token: str) -> Observed:
        efs = ctx.client("efs")
        fs = efs.create_file_system(**ctx.resolve(self.document.body["create"]))
        fs_id = fs["FileSystemId"]
        # A mount target needs an available file system (EFS answers IncorrectFileSystemLifeCycleState before):
        # EFS makes one in seconds, so wait here rather than leave a half-made resource to the next run.
        deadline = time.monotonic() + MOUNT_TARGET_WAIT_SECONDS
        while fs.get("LifeCycleState") != "available" and time.monotonic() < deadline:
            pause(2, ctx.stop)
            fs = efs.describe_file_systems(FileSystemId=fs_id)["FileSystems"][0]
        if fs.get("LifeCycleState") != "available":
            return Observed(fs_id, fs.get("LifeCycleState", "creating"), "pending", missing=["mount_target"])
        self._add_mount_target(ctx, fs_id)
        return Observed(fs_id, "mount target creating", "pending")

    def update(self, ctx: Context, observed: Observed, changes: list, token: str) -> Observed:
        if any(c.path == "mount_target" for c in changes) and observed.id:
            self._add_mount_target(ctx, observed.id)
        return Observed(observed.id, "mount target creating", "pending", observed.outputs)

    def delete(self, ctx: Context, observed: Observed) -> None:
        efs = ctx.client("efs")
        try:
            for target in self._mount_targets(ctx, observed.id or ""):
                efs.delete_mount_target(MountTargetId=target["MountTargetId"])
            efs.delete_file_system(FileSystemId=observed.id)
        except ClientError as exc:
            if error_code(exc) not in ("FileSystemNotFound", "MountTargetNotFound"):
                raise


def scan_efs(ctx: Context) -> list:
    """EFS file systems tagged for the cluster (DescribeFileSystems has no tag filter: every page is read)."""
    found = []
    efs = ctx.client("efs")
    for page in efs.get_paginator("describe_file_systems").paginate():
        for fs in page.get("FileSystems", []):
            reads.keep(ctx, "efs.FileSystems", fs, fs["FileSystemId"])  # EfsFileSystem.read by id
            tags = tag_dict(fs.get("Tags"))
            if not tagged_for_cluster(tags, ctx) or fs.get("LifeCycleState") in ("deleting", "deleted"):
                continue
            ours = is_ours(tags, ctx)
            resource = tags.get(RESOURCE_TAG) or "efs:home"
            key = resource.partition(":")[2]
            found.append(Discovered(resource, fs["FileSystemId"], fs.get("LifeCycleState", ""),
                                    f"EFS file system {fs['FileSystemId']}", ours,
                                    EfsFileSystem(key, known_id=fs["FileSystemId"]) if ours else None,
                                    tags.get(CLUSTER_ID_TAG, "")))
    return found
