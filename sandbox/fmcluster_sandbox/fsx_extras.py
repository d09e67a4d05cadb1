"""What moto 5.2.5's FSx lacks and fmcluster relies on, as AWS documents it:

* file system ids of AWS's form, ``fs-`` and 17 hex digits (moto makes 8; ParallelCluster's schema
  requires 17), and ``FileSystemNotFound`` from DescribeFileSystems for an id that does not exist (moto
  answers an empty list; FSx API reference, DescribeFileSystems errors);
* file systems report ``Lifecycle`` (moto omits it), a Lustre ``MountName`` (clients mount
  ``dns@tcp:/mountname``) and an OpenZFS ``RootVolumeId`` (ParallelCluster mounts volumes, not file
  systems);
* ``ClientRequestToken`` makes CreateFileSystem idempotent, as on AWS;
* a file system lives in a VPC through network interfaces that carry its security groups (``VpcId``,
  ``NetworkInterfaceIds``): ParallelCluster's ``ExistingFsxNetworkingValidator`` reads their rules;
* ``DescribeVolumes`` for the root volume of each OpenZFS file system (what ParallelCluster mounts);
* data repository associations (Lustre ↔ S3): Create/Describe/DeleteDataRepositoryAssociation, served
  by the sandbox itself (FSx speaks awsJson1_1 under the ``AWSSimbaAPIService_v20180301`` target);
* UpdateFileSystem for a Lustre file system's throughput per TiB and storage increase, followed through its
  ``AdministrativeActions`` (:func:`update_file_system`);
* CreateBackup as the FSx API reference has it: a Lustre file system is backed up only when persistent and not
  linked to a data repository, an unknown file system is ``FileSystemNotFound``, ``ClientRequestToken`` is
  idempotent, and a backup goes CREATING → AVAILABLE (moto's stays CREATING, accepts any file system, and
  answers ``ResourceNotFoundException``) (:func:`_install_backups`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from typing import Any


def install() -> None:
    """Patch moto's FSx models once per process."""
    from moto.fsx import models
    from moto.fsx.exceptions import FileSystemNotFound

    if getattr(models.FileSystem.to_dict, "_fmcluster", False):
        return
    original_to_dict = models.FileSystem.to_dict
    original_init = models.FileSystem.__init__
    original_create = models.FSxBackend.create_file_system
    original_delete = models.FSxBackend.delete_file_system
    original_describe = models.FSxBackend.describe_file_systems

    def __init__(self: Any, account_id: str, region_name: str, *args: Any, **kwargs: Any) -> None:
        original_init(self, account_id, region_name, *args, **kwargs)
        old_arn = self.resource_arn
        self.file_system_id = f"fs-{uuid.uuid4().hex[:17]}"
        self.dns_name = f"{self.file_system_id}.fsx.{region_name}.amazonaws.com"
        self.resource_arn = f"arn:aws:fsx:{region_name}:{account_id}:file-system/{self.file_system_id}"
        tags = self.backend.tagger.list_tags_for_resource(old_arn).get("Tags", [])
        self.backend.tagger.delete_all_tags_for_resource(old_arn)
        if tags:
            self.backend.tagger.tag_resource(self.resource_arn, tags)

    def describe_file_systems(self: Any, file_system_ids: list[str], *args: Any, **kwargs: Any) -> Any:
        for file_system_id in file_system_ids or []:
            if file_system_id not in self.file_systems:
                raise FileSystemNotFound(file_system_id)
        return original_describe(self, file_system_ids, *args, **kwargs)

    def to_dict(self: Any) -> dict[str, Any]:
        actions = _settle_updates(self)
        result = original_to_dict(self)
        result.setdefault("Lifecycle", "AVAILABLE")
        if actions:
            result["AdministrativeActions"] = actions
            if any(a["AdministrativeActionType"] == "FILE_SYSTEM_UPDATE" and a["Status"] in ("PENDING", "IN_PROGRESS")
                   and a["TargetFileSystemValues"].get("StorageCapacity") for a in actions):
                result["Lifecycle"] = "UPDATING"  # "Managing storage capacity": UPDATING while storage scales
        network = self.__dict__.get("_fmcluster_network") or {}
        if network.get("vpc_id"):
            result.setdefault("VpcId", network["vpc_id"])
        if network.get("enis"):
            result.setdefault("NetworkInterfaceIds", list(network["enis"]))
        result.setdefault("OwnerId", self.resource_arn.split(":")[4])
        digest = hashlib.sha256(self.file_system_id.encode()).hexdigest()
        if self.file_system_type == "LUSTRE":
            lustre = dict(result.get("LustreConfiguration") or {})
            lustre.setdefault("MountName", digest[:8])
            result["LustreConfiguration"] = lustre
        if self.file_system_type == "OPENZFS":
            openzfs = dict(result.get("OpenZFSConfiguration") or {})
            openzfs.setdefault("RootVolumeId", root_volume_id(self.file_system_id))
            result["OpenZFSConfiguration"] = openzfs
        return result

    def create_file_system(self: Any, client_request_token: str, *args: Any, **kwargs: Any) -> Any:
        tokens = self.__dict__.setdefault("_fmcluster_tokens", {})
        if client_request_token and client_request_token in tokens:
            existing = self.file_systems.get(tokens[client_request_token])
            if existing is not None:
                return existing
        file_system = original_create(self, client_request_token, *args, **kwargs)
        if client_request_token:
            tokens[client_request_token] = file_system.file_system_id
        _attach_network(self, file_system)
        return file_system

    def delete_file_system(self: Any, file_system_id: str, *args: Any, **kwargs: Any) -> Any:
        file_system = self.file_systems.get(file_system_id)
        answer = original_delete(self, file_system_id, *args, **kwargs)
        if file_system is not None:
            _detach_network(self, file_system)
        return answer

    to_dict._fmcluster = True  # type: ignore[attr-defined]
    models.FileSystem.to_dict = to_dict
    models.FileSystem.__init__ = __init__
    models.FSxBackend.describe_file_systems = describe_file_systems
    models.FSxBackend.create_file_system = create_file_system
    models.FSxBackend.delete_file_system = delete_file_system
    _install_backups(models)


# How long a backup is CREATING in the sandbox before it is AVAILABLE (AWS: minutes, longer for a first backup).
BACKUP_SECONDS = 0.5


def _install_backups(models: Any) -> None:
    from moto.core.exceptions import JsonRESTError
    from moto.fsx.exceptions import FileSystemNotFound

    original_create = models.FSxBackend.create_backup
    original_to_dict = models.Backup.to_dict

    def create_backup(self: Any, file_system_id: str, client_request_token: str | None, volume_id: str | None,
                      tags: list[dict[str, str]] | None) -> Any:
        file_system = self.file_systems.get(file_system_id)
        if file_system is None:
            raise FileSystemNotFound(file_system_id)
        for backup in self.backups.values():  # the same token is the same request
            if client_request_token and backup.client_request_token == client_request_token:
                if backup.file_system_id != file_system_id:
                    raise JsonRESTError("IncompatibleParameterError", "A backup with this ClientRequestToken "
                                        "exists for another file system.")
                return backup
        if file_system.file_system_type == "LUSTRE":
            lustre = file_system.lustre_configuration or {}
            deployment = lustre.get("DeploymentType", "SCRATCH_1")
            if not deployment.startswith("PERSISTENT"):
                raise JsonRESTError("BadRequest", f"Backups are not supported for {deployment} file systems.")
            linked = lustre.get("ImportPath") or any(
                a["FileSystemId"] == file_system_id for a in REGISTRY._associations.values())
            if linked:
                raise JsonRESTError("BadRequest", "Backups are not supported for file systems linked to a data "
                                    "repository.")
        backup = original_create(self, file_system_id, client_request_token, volume_id, tags)
        backup._fmcluster_created = time.monotonic()
        # Backup.FileSystem: the file system as it was backed up (it may be deleted since)
        backup._fmcluster_file_system = {"FileSystemId": file_system_id,
                                         "FileSystemType": file_system.file_system_type,
                                         "StorageCapacity": file_system.storage_capacity}
        return backup

    def to_dict(self: Any) -> dict[str, Any]:
        created = self.__dict__.get("_fmcluster_created")
        if created is not None and self.lifecycle == "CREATING" and time.monotonic() - created >= BACKUP_SECONDS:
            self.lifecycle = "AVAILABLE"
        answer = original_to_dict(self)
        answer["Type"] = "USER_INITIATED"
        if not answer.get("Tags"):  # the model's Tags has at least one tag: FSx leaves it out
            answer.pop("Tags", None)
        if self.__dict__.get("_fmcluster_file_system"):
            answer["FileSystem"] = self._fmcluster_file_system
        answer["ProgressPercent"] = 100 if self.lifecycle == "AVAILABLE" else 0
        return answer

    models.FSxBackend.create_backup = create_backup
    models.Backup.to_dict = to_dict


def _ec2(fsx_backend: Any) -> Any:
    from moto.ec2.models import ec2_backends

    return ec2_backends[fsx_backend.account_id][fsx_backend.region_name]


def _attach_network(fsx_backend: Any, file_system: Any) -> None:
    """One network interface per subnet (the preferred one for a single-AZ file system), with the file
    system's security groups, as FSx makes them."""
    ec2 = _ec2(fsx_backend)
    enis, vpc_id = [], None
    for subnet_id in (file_system.subnet_ids or [])[:2]:
        try:
            subnet = ec2.get_subnet(subnet_id)
        except Exception:  # an unknown subnet: moto accepted it; leave the file system without an interface
            continue
        vpc_id = subnet.vpc_id
        eni = ec2.create_network_interface(subnet, None, group_ids=list(file_system.security_group_ids or []),
                                           description=f"ENI for FSx file system {file_system.file_system_id}")
        enis.append(eni.id)
    file_system.__dict__["_fmcluster_network"] = {"vpc_id": vpc_id, "enis": enis}


def _detach_network(fsx_backend: Any, file_system: Any) -> None:
    ec2 = _ec2(fsx_backend)
    for eni_id in (file_system.__dict__.get("_fmcluster_network") or {}).get("enis", []):
        try:
            ec2.delete_network_interface(eni_id)
        except Exception:  # already gone
            pass


def root_volume_id(file_system_id: str) -> str:
    return f"fsvol-{hashlib.sha256(file_system_id.encode()).hexdigest()[:17]}"


def describe_volumes(body: bytes, region: str, account: str) -> tuple[int, dict, bytes]:
    """DescribeVolumes over the root volumes of OpenZFS file systems (moto has no volumes)."""
    from moto.fsx.models import fsx_backends

    try:
        request = json.loads(body or b"{}")
    except json.JSONDecodeError:
        return _error("BadRequest", "the body is not JSON")
    backend = fsx_backends[account][region]
    volumes = {}
    for file_system in backend.file_systems.values():
        if file_system.file_system_type != "OPENZFS":
            continue
        described = file_system.to_dict()
        openzfs = described.get("OpenZFSConfiguration") or {}
        root = openzfs.get("RootVolumeId") or root_volume_id(file_system.file_system_id)
        settings = openzfs.get("RootVolumeConfiguration") or {}
        volumes[root] = {
            "FileSystemId": file_system.file_system_id,
            "VolumeId": root,
            "Name": "fsx",
            "VolumeType": "OPENZFS",
            "Lifecycle": "AVAILABLE",
            "ResourceARN": f"arn:aws:fsx:{region}:{account}:volume/{file_system.file_system_id}/{root}",
            "Tags": described.get("Tags", []),
            "OpenZFSConfiguration": {
                "VolumePath": "/fsx",
                "DataCompressionType": settings.get("DataCompressionType", "NONE"),
                "RecordSizeKiB": settings.get("RecordSizeKiB", 128),
                "ReadOnly": bool(settings.get("ReadOnly", False)),
                "NfsExports": settings.get("NfsExports", []),
                "CopyTagsToSnapshots": bool(settings.get("CopyTagsToSnapshots", False)),
            },
        }
    wanted = request.get("VolumeIds") or []
    for volume_id in wanted:
        if volume_id not in volumes:
            return _error("VolumeNotFound", f"Volume '{volume_id}' does not exist.")
    selected = [v for k, v in volumes.items() if not wanted or k in wanted]
    for item in request.get("Filters") or []:
        if item.get("Name") == "file-system-id":
            selected = [v for v in selected if v["FileSystemId"] in item.get("Values", [])]
    return _ok({"Volumes": selected})


# UpdateFileSystem's rules for Lustre (FSx for Lustre guide; the FSx API reference, UpdateFileSystem):
# "Managing throughput capacity": a persistent SSD file system's throughput per unit of storage goes up or down, to
# 50, 100 or 200 MB/s/TiB (PERSISTENT_1) or 125, 250, 500 or 1000 (PERSISTENT_2).
THROUGHPUT_VALUES = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
# "Managing storage capacity" / "Increasing storage capacity": only increases, for persistent SSD and SCRATCH_2 in
# multiples of 2400 GiB (SCRATCH_1 cannot grow), and not again until 6 hours after the last increase request.
STORAGE_STEP_GIB = {"PERSISTENT_1": 2400, "PERSISTENT_2": 2400, "SCRATCH_2": 2400}
STORAGE_COOL_DOWN_S = 6 * 3600
# How long each phase of an update lasts in the sandbox (AWS: minutes to an hour; storage optimization hours to days).
UPDATE_SECONDS = 0.5
_update_lock = threading.Lock()
# A FILE_SYSTEM_UPDATE still under way (AdministrativeAction.Status, FSx API reference): a storage increase is not
# done while its storage optimization rebalances data (UPDATED_OPTIMIZING).
RUNNING = ("PENDING", "IN_PROGRESS", "UPDATED_OPTIMIZING")


def _next_phase(action: dict[str, Any], elapsed: float) -> str:
    """The phase a FILE_SYSTEM_UPDATE is in ``elapsed`` seconds after its request ("Monitoring storage capacity
    increases", FSx for Lustre guide: Pending, In progress, Updated; Optimizing, Completed): PENDING until the
    sandbox's next look at it, IN_PROGRESS for UPDATE_SECONDS, then a storage increase is UPDATED_OPTIMIZING for
    UPDATE_SECONDS more before COMPLETED; a throughput change goes straight to COMPLETED."""
    if action["Status"] == "PENDING":
        return "IN_PROGRESS" if action["_shown"] else "PENDING"
    if action["Status"] == "IN_PROGRESS" and elapsed >= UPDATE_SECONDS:
        return "UPDATED_OPTIMIZING" if action["TargetFileSystemValues"].get("StorageCapacity") else "COMPLETED"
    if action["Status"] == "UPDATED_OPTIMIZING" and elapsed >= 2 * UPDATE_SECONDS:
        return "COMPLETED"
    return action["Status"]


def _settle_updates(file_system: Any) -> list[dict[str, Any]]:
    """The file system's AdministrativeActions, each moved on to its phase by now. The new values take effect when
    the FILE_SYSTEM_UPDATE leaves IN_PROGRESS; a storage increase then starts a STORAGE_OPTIMIZATION action
    (IN_PROGRESS with ``ProgressPercent``), whose completion completes its parent (AdministrativeAction:
    "When STORAGE_OPTIMIZATION has been completed successfully, the parent FILE_SYSTEM_UPDATE action status changes
    to COMPLETED")."""
    actions = file_system.__dict__.get("_fmcluster_actions") or []
    now = time.monotonic()
    with _update_lock:
        for action in list(actions):
            if action["AdministrativeActionType"] != "FILE_SYSTEM_UPDATE" or action["Status"] not in RUNNING:
                continue
            elapsed = now - action["_started"]
            was, action["Status"] = action["Status"], _next_phase(action, elapsed)
            action["_shown"] = True
            if was == "IN_PROGRESS" and action["Status"] != "IN_PROGRESS":
                _take_effect(file_system, action["TargetFileSystemValues"])
                if action["Status"] == "UPDATED_OPTIMIZING":
                    actions.append({"AdministrativeActionType": "STORAGE_OPTIMIZATION", "Status": "IN_PROGRESS",
                                    "ProgressPercent": 0, "RequestTime": time.time(),
                                    "TargetFileSystemValues": dict(action["TargetFileSystemValues"]),
                                    "_parent": action})
            optimization = next((a for a in actions if a.get("_parent") is action), None)
            if optimization is not None:
                done = action["Status"] == "COMPLETED"
                optimization["Status"] = "COMPLETED" if done else "IN_PROGRESS"
                optimization["ProgressPercent"] = 100 if done else min(
                    99, int(100 * (elapsed - UPDATE_SECONDS) / UPDATE_SECONDS))
    return [{k: v for k, v in a.items() if not k.startswith("_")} for a in actions]


def _take_effect(file_system: Any, target: dict[str, Any]) -> None:
    if target.get("StorageCapacity"):
        file_system.storage_capacity = target["StorageCapacity"]
    throughput = (target.get("LustreConfiguration") or {}).get("PerUnitStorageThroughput")
    if throughput:
        file_system.lustre_configuration = {**(file_system.lustre_configuration or {}),
                                            "PerUnitStorageThroughput": throughput}
    metadata = (target.get("LustreConfiguration") or {}).get("MetadataConfiguration")
    if metadata:
        file_system.lustre_configuration = {**(file_system.lustre_configuration or {}),
                                            "MetadataConfiguration": dict(metadata)}


def storage_increase_too_soon(actions: list[dict[str, Any]], now: float) -> str | None:
    """FSx for Lustre guide, "Managing storage capacity", "Time between increases": another storage increase only
    6 hours after the last one was requested (whatever became of it). The refusal, or None."""
    last = max((a["_requested"] for a in actions if a["AdministrativeActionType"] == "FILE_SYSTEM_UPDATE"
                and a["TargetFileSystemValues"].get("StorageCapacity")), default=None)
    if last is None or now - last >= STORAGE_COOL_DOWN_S:
        return None
    return "The storage capacity cannot be increased again until 6 hours after the last increase request"


# FSx API reference, UpdateFileSystemLustreMetadataConfiguration.Iops: for SSD file systems 1500, 3000, 6000, 12000
# and multiples of 12000 up to 192000.
METADATA_IOPS = (1500, 3000, 6000, *range(12000, 192001, 12000))


def metadata_update_problem(metadata: dict[str, Any], lustre: dict[str, Any], deployment: str) -> str | None:
    """UpdateFileSystem's LustreConfiguration.MetadataConfiguration (FSx API reference,
    UpdateFileSystemLustreMetadataConfiguration; FSx for Lustre guide, "Managing metadata performance"): PERSISTENT_2
    only; USER_PROVISIONED with an Iops value of the list, at least the current one ("downscaling Metadata IOPS is
    not supported"); AUTOMATIC without Iops. Not emulated: FSx's refusal of AUTOMATIC when the current IOPS exceed
    the automatic default for the file system's size. The refusal, or None."""
    if deployment != "PERSISTENT_2":
        return f"A metadata configuration is only for PERSISTENT_2 file systems, not {deployment}"
    mode, iops = metadata.get("Mode"), metadata.get("Iops")
    current = (lustre.get("MetadataConfiguration") or {}).get("Iops")
    if mode == "AUTOMATIC":
        return "Iops cannot be given in AUTOMATIC mode" if iops is not None else None
    if iops is None:
        return "USER_PROVISIONED mode needs Iops"
    if iops not in METADATA_IOPS:
        return f"Metadata Iops {iops} is not valid: 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000"
    if current is not None and iops < current:
        return f"Metadata Iops {iops} is less than the current {current}: downscaling Metadata IOPS is not supported"
    return None


def update_file_system(body: bytes, region: str, account: str) -> tuple[int, dict, bytes]:
    """UpdateFileSystem for FSx for Lustre: throughput per TiB and storage increases, by the rules above; one
    update of a file system at a time (UpdateFileSystem, StorageCapacity: "You can't make a storage capacity
    increase request if there is an existing storage capacity increase request in progress"; the sandbox holds a
    throughput change to the same rule). Other file system types' updates are not served."""
    from moto.fsx.models import fsx_backends

    try:
        request = json.loads(body or b"{}")
    except json.JSONDecodeError:
        return _error("BadRequest", "the body is not JSON")
    backend = fsx_backends[account][region]
    file_system = backend.file_systems.get(request.get("FileSystemId", ""))
    if file_system is None:
        return _error("FileSystemNotFound", f"File system '{request.get('FileSystemId')}' does not exist.")
    tokens = file_system.__dict__.setdefault("_fmcluster_update_tokens", {})
    token = request.get("ClientRequestToken")
    if token and token in tokens:
        return _ok({"FileSystem": file_system.to_dict()})
    if file_system.file_system_type != "LUSTRE":
        return _error("BadRequest", f"The sandbox serves UpdateFileSystem for Lustre only, not "
                                    f"{file_system.file_system_type}")
    lustre = file_system.lustre_configuration or {}
    deployment = lustre.get("DeploymentType", "SCRATCH_1")
    actions = file_system.__dict__.setdefault("_fmcluster_actions", [])
    _settle_updates(file_system)
    if any(a["AdministrativeActionType"] == "FILE_SYSTEM_UPDATE" and a["Status"] in RUNNING for a in actions):
        return _error("BadRequest", "Unable to perform the update: another update of this file system is in "
                                    "progress")
    target: dict[str, Any] = {}
    throughput = (request.get("LustreConfiguration") or {}).get("PerUnitStorageThroughput")
    if throughput is not None:
        allowed = THROUGHPUT_VALUES.get(deployment)
        if allowed is None:
            return _error("BadRequest", f"The throughput of a {deployment} file system cannot be changed")
        if throughput not in allowed:
            return _error("BadRequest", f"PerUnitStorageThroughput {throughput} is not valid for {deployment}: "
                                        f"{', '.join(map(str, allowed))}")
        if throughput == lustre.get("PerUnitStorageThroughput"):
            return _error("BadRequest", f"The file system's throughput is already {throughput} MB/s/TiB")
        target["LustreConfiguration"] = {"PerUnitStorageThroughput": throughput}
    storage = request.get("StorageCapacity")
    if storage is not None:
        step = STORAGE_STEP_GIB.get(deployment)
        if step is None:
            return _error("BadRequest", f"The storage capacity of a {deployment} file system cannot be increased")
        if storage <= file_system.storage_capacity:
            return _error("BadRequest", f"StorageCapacity {storage} must be greater than the current "
                                        f"{file_system.storage_capacity} GiB: storage capacity only increases")
        if storage % step:
            return _error("BadRequest", f"StorageCapacity {storage} must be a multiple of {step} GiB for "
                                        f"{deployment}")
        too_soon = storage_increase_too_soon(actions, time.time())
        if too_soon:
            return _error("BadRequest", too_soon)
        target["StorageCapacity"] = storage
    metadata = (request.get("LustreConfiguration") or {}).get("MetadataConfiguration")
    if metadata is not None:
        problem = metadata_update_problem(metadata, lustre, deployment)
        if problem:
            return _error("BadRequest", problem)
        target.setdefault("LustreConfiguration", {})["MetadataConfiguration"] = dict(metadata)
    if not target:
        return _error("BadRequest", "Nothing to update: give StorageCapacity or "
                                    "LustreConfiguration.PerUnitStorageThroughput")
    now = time.time()
    actions.append({"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "Status": "PENDING",
                    "RequestTime": now, "TargetFileSystemValues": target, "_started": time.monotonic(),
                    "_requested": now, "_shown": False})
    if token:
        tokens[token] = True
    return _ok({"FileSystem": file_system.to_dict()})


class DataRepositoryAssociations:
    """Lustre ↔ S3 links; each becomes AVAILABLE ``settle_seconds`` after it is created."""

    def __init__(self, settle_seconds: float = 0.5) -> None:
        self._associations: dict[str, dict[str, Any]] = {}
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        self.settle_seconds = settle_seconds

    def reset(self) -> None:
        with self._lock:
            self._associations.clear()
            self._tokens.clear()

    def handle(self, operation: str, body: bytes, region: str, account: str) -> tuple[int, dict, bytes]:
        try:
            request = json.loads(body or b"{}")
        except json.JSONDecodeError:
            return _error("BadRequest", "the body is not JSON")
        with self._lock:
            if operation == "CreateDataRepositoryAssociation":
                return self._create(request, region, account)
            if operation == "DescribeDataRepositoryAssociations":
                return self._describe(request, region, account)
            return self._delete(request, region, account)

    def _create(self, request: dict[str, Any], region: str, account: str):
        from moto.fsx.models import fsx_backends

        token = request.get("ClientRequestToken")
        if token and token in self._tokens:
            return _ok({"Association": self._view(self._associations[self._tokens[token]])})
        fs_id = request.get("FileSystemId", "")
        if fs_id not in fsx_backends[account][region].file_systems:
            return _error("FileSystemNotFound", f"File system '{fs_id}' does not exist.")
        for field in ("FileSystemId", "DataRepositoryPath"):
            if not request.get(field):
                return _error("BadRequest", f"{field} is required")
        association_id = "dra-" + uuid.uuid4().hex[:17]
        association = {
            "AssociationId": association_id,
            "ResourceARN": f"arn:aws:fsx:{region}:{account}:association/{fs_id}/{association_id}",
            "FileSystemId": fs_id,
            "FileSystemPath": request.get("FileSystemPath", "/"),
            "DataRepositoryPath": request["DataRepositoryPath"],
            "BatchImportMetaDataOnCreate": bool(request.get("BatchImportMetaDataOnCreate", False)),
            "S3": request.get("S3", {}),
            "Tags": request.get("Tags", []),
            "CreationTime": time.time(),
            "_created": time.monotonic(),
            "_region": region, "_account": account, "_deleting": False,
        }
        self._associations[association_id] = association
        if token:
            self._tokens[token] = association_id
        return _ok({"Association": self._view(association)})

    def _describe(self, request: dict[str, Any], region: str, account: str):
        ids = request.get("AssociationIds") or []
        mine = [a for a in self._associations.values() if a["_region"] == region and a["_account"] == account]
        for wanted in ids:
            if wanted not in {a["AssociationId"] for a in mine}:
                return _error("DataRepositoryAssociationNotFound", f"Association '{wanted}' does not exist.")
        selected = [a for a in mine if not ids or a["AssociationId"] in ids]
        for item in request.get("Filters") or []:
            if item.get("Name") == "file-system-id":
                selected = [a for a in selected if a["FileSystemId"] in item.get("Values", [])]
        return _ok({"Associations": [self._view(a) for a in selected]})

    def _delete(self, request: dict[str, Any], region: str, account: str):
        association = self._associations.get(request.get("AssociationId", ""))
        if association is None or association["_region"] != region:
            return _error("DataRepositoryAssociationNotFound", f"Association '{request.get('AssociationId')}' "
                                                               "does not exist.")
        del self._associations[association["AssociationId"]]
        return _ok({"AssociationId": association["AssociationId"], "Lifecycle": "DELETING",
                    "DeleteDataInFileSystem": bool(request.get("DeleteDataInFileSystem", False))})

    def _view(self, association: dict[str, Any]) -> dict[str, Any]:
        settled = time.monotonic() - association["_created"] >= self.settle_seconds
        view = {k: v for k, v in association.items() if not k.startswith("_")}
        view["Lifecycle"] = "AVAILABLE" if settled else "CREATING"
        return view


def check_request(operation: str, body: bytes) -> tuple[int, dict, bytes] | None:
    """FSx's refusal of a request botocore's FSx model does not accept (None: it does, and moto answers it).
    FSx names no validation error of its own for these operations: ``BadRequest`` is the sandbox's choice."""
    from fmcluster_sandbox import model_check

    try:
        request = json.loads(body or b"{}")
    except json.JSONDecodeError:
        return _error("BadRequest", "the body is not JSON")
    problems = model_check.check("fsx", operation, request)
    if not problems:
        return None
    name, message = problems[0]
    return _error("BadRequest", f"{name}: {message}")


def _ok(payload: dict[str, Any]) -> tuple[int, dict, bytes]:
    return 200, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(payload).encode()


def _error(code: str, message: str) -> tuple[int, dict, bytes]:
    body = json.dumps({"__type": code, "Message": message}).encode()
    return 400, {"Content-Type": "application/x-amz-json-1.1", "x-amzn-ErrorType": code}, body


#: The sandbox's one store: the FSx API above and CloudFormation (``cfn_fsx``) share it.
REGISTRY = DataRepositoryAssociations()
