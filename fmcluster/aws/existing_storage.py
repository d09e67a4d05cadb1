"""Storage the cluster uses but does not own: an existing FSx for Lustre file system, FSx for OpenZFS volume or
EFS file system. Each is a look-up in the plan: read from AWS when the cluster is created (its DNS name, Lustre
mount name, volume path), so nothing about it is hard-coded. fmcluster never creates, changes or deletes one:
it is not tagged for the cluster, so ``destroy`` (which deletes by tag) never sees it, and removing it from the
spec only forgets the record.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code
from fmcluster.engine import AttributeChange, Context, EngineFailed, Observed, Resource
from fmcluster.render.documents import Document

# An EFS file system's DNS name (EFS user guide, "Mounting with the DNS name"): <id>.efs.<region>.amazonaws.com.
EFS_DNS = "{id}.efs.{region}.amazonaws.com"


class ExistingStorage(Resource):
    teardown_rank = 95
    # Forgotten, never deleted, when it leaves the spec (the engine's "goes with its parent" path).
    owned_by_parent = True
    what = "file system"

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        self.key = key
        self.document = document
        self.known_id = known_id

    @property
    def ident(self) -> str:
        body = self.document.body if self.document is not None else {}
        for member in ("FileSystemIds", "VolumeIds"):
            if member in body:
                return body[member][0]
        return body.get("FileSystemId") or self.known_id or ""

    def _look_up(self, ctx: Context) -> Observed | None:
        raise NotImplementedError

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        return self._look_up(ctx)

    def create(self, ctx: Context, token: str) -> Observed:
        raise EngineFailed(f"{self.name}: the existing {self.what} {self.ident} is not in {ctx.region} (or this "
                           "account cannot see it); fix storage in the spec, or remove existing_id to have fmcluster "
                           "create one")

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        return []

    def delete(self, ctx: Context, observed: Observed) -> None:
        """Never: it is not the cluster's."""


def _fsx_file_system(ctx: Context, file_system_id: str) -> dict[str, Any] | None:
    try:
        found = ctx.client("fsx").describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    except ClientError as exc:
        if error_code(exc) == "FileSystemNotFound":
            return None
        raise
    return found[0] if found else None


_FSX_PHASES = {"AVAILABLE": "ready", "UPDATING": "ready", "CREATING": "pending", "FAILED": "failed",
               "MISCONFIGURED": "failed", "DELETING": "gone"}


class ExistingFsxLustre(ExistingStorage):
    kind = "existing_fsx_lustre"
    what = "FSx for Lustre file system"

    def _look_up(self, ctx: Context) -> Observed | None:
        fs = _fsx_file_system(ctx, self.ident)
        if fs is None:
            return None
        if fs["FileSystemType"] != "LUSTRE":
            raise EngineFailed(f"{self.ident} is an FSx for {fs['FileSystemType']} file system, not Lustre")
        state = fs.get("Lifecycle", "AVAILABLE")
        mount_name = (fs.get("LustreConfiguration") or {}).get("MountName", "")
        return Observed(fs["FileSystemId"], state, _FSX_PHASES.get(state, "pending"),
                        {f"{self.kind}.{self.key}.dns_name": fs.get("DNSName", ""),
                         f"{self.kind}.{self.key}.mount_name": mount_name})


class ExistingFsxVolume(ExistingStorage):
    """An FSx for OpenZFS volume: NFS clients mount <file system DNS name>:<volume path>."""

    kind = "existing_fsx_volume"
    what = "FSx for OpenZFS volume"

    def _look_up(self, ctx: Context) -> Observed | None:
        try:
            volumes = ctx.client("fsx").describe_volumes(VolumeIds=[self.ident])["Volumes"]
        except ClientError as exc:
            if error_code(exc) == "VolumeNotFound":
                return None
            raise
        if not volumes:
            return None
        volume = volumes[0]
        fs = _fsx_file_system(ctx, volume["FileSystemId"])
        if fs is None:
            return None
        state = volume.get("Lifecycle", "AVAILABLE")
        phase = {"AVAILABLE": "ready", "CREATED": "ready", "CREATING": "pending", "PENDING": "pending",
                 "FAILED": "failed", "MISCONFIGURED": "failed", "DELETING": "gone"}.get(state, "pending")
        path = (volume.get("OpenZFSConfiguration") or {}).get("VolumePath") or "/fsx"
        return Observed(volume["VolumeId"], state, phase,
                        {f"{self.kind}.{self.key}.dns_name": fs.get("DNSName", ""),
                         f"{self.kind}.{self.key}.volume_path": path})


class ExistingEfs(ExistingStorage):
    kind = "existing_efs"
    what = "EFS file system"

    def _look_up(self, ctx: Context) -> Observed | None:
        try:
            found = ctx.client("efs").describe_file_systems(FileSystemId=self.ident)["FileSystems"]
        except ClientError as exc:
            if error_code(exc) == "FileSystemNotFound":
                return None
            raise
        if not found:
            return None
        state = found[0].get("LifeCycleState", "available")
        phase = {"available": "ready", "updating": "ready", "creating": "pending", "error": "failed",
                 "deleting": "gone", "deleted": "gone"}.get(state, "pending")
        return Observed(self.ident, state, phase,
                        {f"{self.kind}.{self.key}.dns_name": EFS_DNS.format(id=self.ident, region=ctx.region)})
