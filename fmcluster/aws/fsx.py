"""FSx file systems fmcluster creates (Lustre for data, OpenZFS for /home); Lustre's links to S3 are
:mod:`fmcluster.aws.fsx_data_repository`.

A file system is found by its recorded id, else by this cluster's ``fmcluster:resource`` tag; its requests
carry the engine's idempotency token as ``ClientRequestToken``. A Lustre file system's throughput per TiB and a
storage increase change in place (UpdateFileSystem), followed to their end through the file system's
``AdministrativeActions``; what FSx cannot change in place (a smaller size, the deployment type, the subnet)
replaces it, which loses its data, and the plan says so, with the page, before anyone confirms; ``create`` then
needs ``--allow-data-loss``, and backs the file system up first (CreateBackup) where FSx can.
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime, timedelta, timezone
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code
from fmcluster.aws.fsx_data_repository import associations
from fmcluster.aws.ownership import require_ours, tag_dict
from fmcluster.engine import AttributeChange, Context, InPlace, Observed, Resource, reads
from fmcluster.errors import UsageError
from fmcluster.render.common import RESOURCE_TAG
from fmcluster.render.documents import Document

_PHASES = {"AVAILABLE": "ready", "CREATING": "pending", "DELETING": "gone", "UPDATING": "ready",
           "FAILED": "failed", "MISCONFIGURED": "failed"}
DATA_LOSS = "; the file system's data is lost with it"
THROUGHPUT_PAGE = "FSx for Lustre guide, 'Managing throughput capacity'"
STORAGE_PAGE = "FSx for Lustre guide, 'Managing storage capacity'"
METADATA_PAGE = "FSx for Lustre guide, 'Managing metadata performance'"
METADATA = "LustreConfiguration.MetadataConfiguration"
# The deployment types whose throughput per TiB changes (THROUGHPUT_PAGE: "persistent SSD-based file system").
THROUGHPUT_CHANGES = ("PERSISTENT_1", "PERSISTENT_2")
# AdministrativeAction.Status values (FSx API reference): still running, and ended badly.
ACTION_RUNNING = ("PENDING", "IN_PROGRESS")
ACTION_FAILED = ("FAILED",)
# Backup.Lifecycle (FSx API reference, Backup): AVAILABLE is usable; FAILED and DELETED will never be.
BACKUP_PHASES = {"AVAILABLE": "ready", "FAILED": "failed", "DELETED": "failed"}
BACKUP_PAGE = "FSx API reference, CreateBackup"
# STORAGE_PAGE (docs.aws.amazon.com/fsx/latest/LustreGuide/managing-storage-capacity.html), "Time between
# increases": no further storage capacity increase "until 6 hours after the last increase was requested".
STORAGE_INCREASE_WAIT = timedelta(hours=6)
# Where a Lustre file system's observed attributes keep when its last storage increase was requested (read from
# its AdministrativeActions; the spec sets no such path, so it is never compared).
LAST_INCREASE = "AdministrativeActions.LastStorageIncrease"



class FsxFileSystem(Resource):
    file_system_type = ""
    teardown_rank = 80
    is_storage = True
    stored_data = "every file on the file system"

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        self.key = key
        self.document = document
        self.known_id = known_id

    @abstractmethod
    def _outputs(self, fs: dict[str, Any]) -> dict[str, Any]:
        """The values other documents refer to (``${fsx_lustre.lustre.dns_name}``, …)."""

    def _find(self, ctx: Context, known_id: str | None) -> dict[str, Any] | None:
        fsx = ctx.client("fsx")
        listed = reads.kept(ctx, "fsx.FileSystems", known_id)  # what discovery listed in this read-only pass
        if listed is not reads.MISSING and listed is not None:
            return listed
        if known_id:
            try:
                return fsx.describe_file_systems(FileSystemIds=[known_id])["FileSystems"][0]
            except ClientError as exc:
                if error_code(exc) != "FileSystemNotFound":
                    raise
            except IndexError:
                pass
        for page in fsx.get_paginator("describe_file_systems").paginate():
            for fs in page["FileSystems"]:
                tags = tag_dict(fs.get("Tags"))
                if fs["FileSystemType"] == self.file_system_type and tags.get(RESOURCE_TAG) == self.name and \
                        tags.get("fmcluster:cluster") == ctx.cluster and fs.get("Lifecycle") != "DELETING":
                    return fs
        return None

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        fs = self._find(ctx, known_id or self.known_id)
        if fs is None:
            return None
        return self._observed(ctx, fs)

    def _observed(self, ctx: Context, fs: dict[str, Any]) -> Observed:
        require_ours(f"FSx file system {fs['FileSystemId']}", tag_dict(fs.get("Tags")), ctx)
        state = fs.get("Lifecycle", "AVAILABLE")
        return Observed(fs["FileSystemId"], state, _PHASES.get(state, "pending"), self._outputs(fs),
                        fs.get("FailureDetails", {}).get("Message", ""), attributes=self._attributes(fs))

    def _attributes(self, fs: dict[str, Any]) -> dict[str, Any]:
        return {"StorageCapacity": fs.get("StorageCapacity"), "SubnetIds": fs.get("SubnetIds")}

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        return {"StorageCapacity": body["StorageCapacity"], "SubnetIds": body["SubnetIds"]}

    def replacement_reason(self, changes: list[AttributeChange]) -> str | None:
        if super().replacement_reason(changes) is None:
            return None
        # AWS can grow some file systems in place (UpdateFileSystem); fmcluster sizes one once, and says so.
        paths = ", ".join(sorted({c.path for c in changes}))
        return f"fmcluster changes {paths} of a file system by making a new one{DATA_LOSS}"

    def create(self, ctx: Context, token: str) -> Observed:
        fs = ctx.client("fsx").create_file_system(ClientRequestToken=token[:63],
                                                  **ctx.resolve(self.document.body))["FileSystem"]
        return Observed(fs["FileSystemId"], fs.get("Lifecycle", "CREATING"), "pending")

    def _delete_options(self) -> dict[str, Any]:
        return {}

    def why_no_backup(self, ctx: Context, observed: Observed) -> str:
        if observed.status != "AVAILABLE":  # Backup.Lifecycle needs a working file system to copy from
            return f"FSx backs up an AVAILABLE file system, and this one is {observed.status}"
        return ""

    def back_up(self, ctx: Context, observed: Observed, token: str) -> str:
        """CreateBackup (FSx API reference): a user-initiated backup, kept after the file system is deleted (and
        billed until someone deletes it); tagged with what it backs up, not as the cluster's (destroy leaves it)."""
        backup = ctx.client("fsx").create_backup(
            FileSystemId=observed.id, ClientRequestToken=token[:63],
            Tags=[{"Key": "fmcluster:backup-of", "Value": f"{ctx.cluster} {self.name} {observed.id}"}])["Backup"]
        return backup["BackupId"]

    def backup_phase(self, ctx: Context, backup_id: str) -> tuple[Any, str]:
        found = ctx.client("fsx").describe_backups(BackupIds=[backup_id])["Backups"]
        backup = found[0] if found else {}
        state = backup.get("Lifecycle", "DELETED")
        detail = (backup.get("FailureDetails") or {}).get("Message", "")
        return BACKUP_PHASES.get(state, "pending"), f"{state}{': ' + detail if detail else ''}"

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("fsx").delete_file_system(FileSystemId=observed.id, **self._delete_options())
        except ClientError as exc:
            if error_code(exc) != "FileSystemNotFound":
                raise


class FsxLustre(FsxFileSystem):
    kind = "fsx_lustre"
    file_system_type = "LUSTRE"
    replace_on = ("StorageCapacity", "SubnetIds", "LustreConfiguration")
    in_place = (InPlace(("LustreConfiguration.PerUnitStorageThroughput",), "update_throughput", THROUGHPUT_PAGE),
                InPlace(("StorageCapacity",), "update_storage", STORAGE_PAGE),
                InPlace((METADATA,), "update_metadata", METADATA_PAGE))

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        super().__init__(key, document, known_id)
        # The UpdateFileSystem this walk sent and waits for: what it changes.
        self._awaiting: str | None = None

    def _observed(self, ctx: Context, fs: dict[str, Any]) -> Observed:
        """The file system, with its latest FILE_SYSTEM_UPDATE (``AdministrativeActions``): pending while FSx runs
        one, failed with FSx's message when the one this walk sent fails. ``UPDATED_OPTIMIZING`` is done: the new
        size serves while FSx rebalances data for hours (STORAGE_PAGE)."""
        observed = super()._observed(ctx, fs)
        if observed.phase not in ("ready", "pending"):
            return observed
        action = _latest_update(fs.get("AdministrativeActions") or [])
        state = (action or {}).get("Status", "")
        target = _describe_target(action)
        if state in ACTION_RUNNING:
            observed.phase, observed.status = "pending", "UPDATING"
            observed.detail = f"{target}: {state}"
        elif state in ACTION_FAILED and self._awaiting is not None:
            observed.phase, observed.status = "failed", "update FAILED"
            failure = (action.get("FailureDetails") or {}).get("Message") or "FSx gave no reason"
            observed.detail = f"{self._awaiting}: {failure}"
        elif self._awaiting is not None and observed.phase == "ready":
            self._awaiting = None
        return observed

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        """What differs; a storage increase asked for within 6 hours of the last one is refused here, so that
        ``diff`` and ``create`` stop before anything is sent, with the time FSx takes it (STORAGE_PAGE)."""
        found = super().changes(ctx, observed)
        last = observed.attributes.get(LAST_INCREASE)
        for change in found:
            if change.path == "StorageCapacity" and _numbers(change) and change.new > change.old and last:
                retry = last + STORAGE_INCREASE_WAIT
                if datetime.now(timezone.utc) < retry:
                    retry = _minute_up(retry)  # "after 21:11" must not name a time FSx still refuses
                    raise UsageError(
                        f"FSx for Lustre file system {observed.id} cannot grow to {change.new} GiB yet: its last "
                        f"storage increase was requested at {last:%Y-%m-%d %H:%M} UTC, and FSx takes the next one only "
                        f"6 hours after that ({STORAGE_PAGE}, 'Time between increases'). Nothing was changed; run "
                        f"this again after {retry:%Y-%m-%d %H:%M} UTC, or keep storage.lustre.capacity_gib at "
                        f"{change.old} until then")
        return found

    def replacement_reason(self, changes: list[AttributeChange]) -> str | None:
        """A smaller size (STORAGE_PAGE: "you can only increase"), a throughput change on a deployment type whose
        throughput is fixed (THROUGHPUT_PAGE), and the deployment type or subnets (UpdateFileSystem takes neither:
        FSx API reference, UpdateFileSystemLustreConfiguration) need a new file system."""
        reasons = []
        deployment = (self.document.body.get("LustreConfiguration") or {}).get("DeploymentType") \
            if self.document is not None else None
        for change in changes:
            if change.path == "StorageCapacity" and _numbers(change) and change.new < change.old:
                reasons.append(f"FSx for Lustre storage only grows ({STORAGE_PAGE}): {change.old} → {change.new} GiB")
            elif change.path == "LustreConfiguration.PerUnitStorageThroughput" and deployment not in THROUGHPUT_CHANGES:
                reasons.append(f"the throughput of a {deployment} file system is fixed ({THROUGHPUT_PAGE})")
            elif change.path == f"{METADATA}.Iops" and _numbers(change) and change.new < change.old:
                reasons.append(f"FSx for Lustre metadata IOPS only grow ({METADATA_PAGE}; FSx API reference, "
                               f"UpdateFileSystemLustreMetadataConfiguration): {change.old} → {change.new}")
        fixed = sorted({c.path for c in changes if not any(step.covers(c.path) for step in self.in_place)})
        if fixed:
            reasons.append(f"AWS cannot change {', '.join(fixed)} of an FSx for Lustre file system in place (FSx API "
                           "reference, UpdateFileSystem: it takes no deployment type or subnets)")
        return "; ".join(reasons) + DATA_LOSS if reasons else None

    def why_no_backup(self, ctx: Context, observed: Observed) -> str:
        """FSx backs up only a persistent Lustre file system that is not linked to a data repository
        (BACKUP_PAGE)."""
        unavailable = super().why_no_backup(ctx, observed)
        if unavailable:
            return unavailable
        deployment = observed.attributes.get("LustreConfiguration.DeploymentType") or ""
        if not deployment.startswith("PERSISTENT"):
            return f"FSx backs up only persistent Lustre file systems, and this one is {deployment} ({BACKUP_PAGE})"
        if associations(ctx.client("fsx"), observed.id):
            return f"FSx does not back up a Lustre file system linked to a data repository (S3) ({BACKUP_PAGE})"
        return ""

    def update_throughput(self, ctx: Context, observed: Observed, changes: list[AttributeChange],
                          token: str) -> Observed:
        (change,) = changes
        return self._send_update(ctx, observed, token, f"throughput {change.old} → {change.new} MB/s/TiB",
                                 LustreConfiguration={"PerUnitStorageThroughput": change.new})

    def update_storage(self, ctx: Context, observed: Observed, changes: list[AttributeChange],
                       token: str) -> Observed:
        (change,) = changes
        return self._send_update(ctx, observed, token, f"storage {change.old} → {change.new} GiB",
                                 StorageCapacity=change.new)

    def update_metadata(self, ctx: Context, observed: Observed, changes: list[AttributeChange],
                        token: str) -> Observed:
        """UpdateFileSystem's MetadataConfiguration (PERSISTENT_2): more IOPS, or a switch of mode; AUTOMATIC takes no
        Iops (FSx API reference, UpdateFileSystemLustreMetadataConfiguration)."""
        wanted = (self.document.body.get("LustreConfiguration") or {}).get("MetadataConfiguration") or {}
        request = {k: v for k, v in wanted.items() if k == "Mode" or wanted.get("Mode") == "USER_PROVISIONED"}
        what = "metadata " + ", ".join(f"{c.path.rsplit('.', 1)[-1]} {c.old} → {c.new}" for c in changes)
        return self._send_update(ctx, observed, token, what, LustreConfiguration={"MetadataConfiguration": request})

    def _send_update(self, ctx: Context, observed: Observed, token: str, what: str, **request: Any) -> Observed:
        """UpdateFileSystem: FSx takes one update of a file system at a time, so the engine sends each kind on its
        own, after the one before has ended."""
        ctx.client("fsx").update_file_system(FileSystemId=observed.id, ClientRequestToken=token[:63], **request)
        self._awaiting = what
        return Observed(observed.id, "UPDATING", "pending", observed.outputs, what)

    def _outputs(self, fs: dict[str, Any]) -> dict[str, Any]:
        lustre = fs.get("LustreConfiguration", {})
        return {f"fsx_lustre.{self.key}.id": fs["FileSystemId"],
                f"fsx_lustre.{self.key}.dns_name": fs.get("DNSName", ""),
                f"fsx_lustre.{self.key}.mount_name": lustre.get("MountName", "")}

    def _attributes(self, fs: dict[str, Any]) -> dict[str, Any]:
        lustre = fs.get("LustreConfiguration", {})
        return {**super()._attributes(fs),
                "LustreConfiguration.DeploymentType": lustre.get("DeploymentType"),
                "LustreConfiguration.PerUnitStorageThroughput": lustre.get("PerUnitStorageThroughput"),
                **{f"{METADATA}.{k}": v for k, v in (lustre.get("MetadataConfiguration") or {}).items()},
                LAST_INCREASE: _last_increase(fs.get("AdministrativeActions") or [])}

    def desired(self, ctx: Context) -> dict[str, Any]:
        lustre = self.document.body.get("LustreConfiguration", {})
        # An AUTOMATIC file system's Iops are FSx's to choose: only the mode is the spec's then.
        metadata = lustre.get("MetadataConfiguration") or {}
        return {**super().desired(ctx),
                "LustreConfiguration.DeploymentType": lustre.get("DeploymentType"),
                "LustreConfiguration.PerUnitStorageThroughput": lustre.get("PerUnitStorageThroughput"),
                **{f"{METADATA}.{k}": v for k, v in metadata.items()}}


class FsxOpenZfs(FsxFileSystem):
    """An FSx for OpenZFS file system (a cluster's /home): clients mount its root volume."""

    kind = "fsx_openzfs"
    file_system_type = "OPENZFS"
    replace_on = ("StorageCapacity", "SubnetIds", "OpenZFSConfiguration")

    def _outputs(self, fs: dict[str, Any]) -> dict[str, Any]:
        openzfs = fs.get("OpenZFSConfiguration", {})
        return {f"fsx_openzfs.{self.key}.id": fs["FileSystemId"],
                f"fsx_openzfs.{self.key}.dns_name": fs.get("DNSName", ""),
                f"fsx_openzfs.{self.key}.root_volume_id": openzfs.get("RootVolumeId", "")}

    def _attributes(self, fs: dict[str, Any]) -> dict[str, Any]:
        openzfs = fs.get("OpenZFSConfiguration", {})
        return {**super()._attributes(fs), "OpenZFSConfiguration.DeploymentType": openzfs.get("DeploymentType")}

    def desired(self, ctx: Context) -> dict[str, Any]:
        openzfs = self.document.body.get("OpenZFSConfiguration", {})
        return {**super().desired(ctx), "OpenZFSConfiguration.DeploymentType": openzfs.get("DeploymentType")}

    def _delete_options(self) -> dict[str, Any]:
        # `destroy` means the data goes (`--keep-storage` keeps the file system): no final backup left behind
        # untracked and billing; child volumes and snapshots go with the file system.
        return {"OpenZFSConfiguration": {"SkipFinalBackup": True,
                                         "Options": ["DELETE_CHILD_VOLUMES_AND_SNAPSHOTS"]}}


def _numbers(change: AttributeChange) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (change.old, change.new))


def _latest_update(actions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The most recent FILE_SYSTEM_UPDATE of a file system's AdministrativeActions (FSx API reference)."""
    updates = [a for a in actions if a.get("AdministrativeActionType") == "FILE_SYSTEM_UPDATE"]
    return max(updates, key=lambda a: str(a.get("RequestTime", "")), default=None)


def _minute_up(moment: datetime) -> datetime:
    whole = moment.replace(second=0, microsecond=0)
    return whole + timedelta(minutes=1) if whole != moment else whole


def _last_increase(actions: list[dict[str, Any]]) -> datetime | None:
    """When the latest storage increase was requested (a FILE_SYSTEM_UPDATE with a target StorageCapacity), in
    UTC; None when FSx lists none."""
    times = [a.get("RequestTime") for a in actions if a.get("AdministrativeActionType") == "FILE_SYSTEM_UPDATE"
             and (a.get("TargetFileSystemValues") or {}).get("StorageCapacity")]
    times = [t if t.tzinfo else t.replace(tzinfo=timezone.utc) for t in times if isinstance(t, datetime)]
    return max(times, default=None)


def _describe_target(action: dict[str, Any] | None) -> str:
    values = (action or {}).get("TargetFileSystemValues") or {}
    parts = []
    if values.get("StorageCapacity"):
        parts.append(f"storage to {values['StorageCapacity']} GiB")
    throughput = (values.get("LustreConfiguration") or {}).get("PerUnitStorageThroughput")
    if throughput:
        parts.append(f"throughput to {throughput} MB/s/TiB")
    return "FSx update " + (", ".join(parts) if parts else "")
