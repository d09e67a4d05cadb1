"""Existing storage the spec names (``storage.lustre.existing_id``, ``storage.home.existing_id``): it must exist
in the Region, be of the kind the spec says and be available, or ``create`` would stop half-way when the plan
reads it."""

from __future__ import annotations

from typing import Any

from fmcluster.checks import CheckResult
from fmcluster.preflight.common import Context, aws_code, fix, guarded

_NOT_FOUND = ("FileSystemNotFound", "VolumeNotFound")


def check_existing_storage(ctx: Context) -> list[CheckResult]:
    results: list[CheckResult] = []
    lustre, home = ctx.spec.storage.lustre, ctx.spec.storage.home
    if lustre is not None and lustre.existing_id:
        results += _fsx(ctx, "storage.lustre.existing_id", lustre.existing_id, "LUSTRE")
    if home is not None and home.existing_id:
        if home.type == "openzfs":
            results += _volume(ctx, home.existing_id)
        else:
            results += _efs(ctx, home.existing_id)
    return results


def _missing(field: str, ident: str, what: str, region: str) -> CheckResult:
    return CheckResult(f"existing {what}", "failed", f"{ident} ({field}) is not an {what} in {region}",
                       [fix(f"check the id and the Region, or remove {field} to have fmcluster create one")])


def _fsx(ctx: Context, field: str, ident: str, kind: str) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    what = "FSx for Lustre file system"

    @guarded(f"existing {what}", ident)
    def run(ctx: Context) -> list[CheckResult]:
        try:
            fs: dict[str, Any] = ctx.aws("fsx").describe_file_systems(FileSystemIds=[ident])["FileSystems"][0]
        except ClientError as exc:
            if aws_code(exc) in _NOT_FOUND:
                return [_missing(field, ident, what, ctx.region)]
            raise
        if fs["FileSystemType"] != kind:
            return [CheckResult(f"existing {what}", "failed", f"{ident} is FSx for {fs['FileSystemType']}, not {kind}",
                                [fix(f"name a Lustre file system in {field}")])]
        state = fs.get("Lifecycle", "AVAILABLE")
        if state not in ("AVAILABLE", "UPDATING"):
            return [CheckResult(f"existing {what}", "failed", f"{ident} is {state}",
                                [fix("wait until it is AVAILABLE, or name another")])]
        return [CheckResult(f"existing {what}", "passed", f"{ident} {state} ({fs.get('DNSName', '')})")]

    return run(ctx)


def _volume(ctx: Context, ident: str) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    what = "FSx for OpenZFS volume"

    @guarded(f"existing {what}", ident)
    def run(ctx: Context) -> list[CheckResult]:
        try:
            volume = ctx.aws("fsx").describe_volumes(VolumeIds=[ident])["Volumes"][0]
        except ClientError as exc:
            if aws_code(exc) in _NOT_FOUND:
                return [_missing("storage.home.existing_id", ident, what, ctx.region)]
            raise
        if volume.get("VolumeType", "OPENZFS") != "OPENZFS":
            return [CheckResult(f"existing {what}", "failed", f"{ident} is an {volume['VolumeType']} volume",
                                [fix("name an FSx for OpenZFS volume in storage.home.existing_id")])]
        path = (volume.get("OpenZFSConfiguration") or {}).get("VolumePath", "")
        return [CheckResult(f"existing {what}", "passed", f"{ident} of {volume['FileSystemId']} ({path})")]

    return run(ctx)


def _efs(ctx: Context, ident: str) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    what = "EFS file system"

    @guarded(f"existing {what}", ident)
    def run(ctx: Context) -> list[CheckResult]:
        try:
            fs = ctx.aws("efs").describe_file_systems(FileSystemId=ident)["FileSystems"][0]
        except ClientError as exc:
            if aws_code(exc) in _NOT_FOUND:
                return [_missing("storage.home.existing_id", ident, what, ctx.region)]
            raise
        targets = ctx.aws("efs").describe_mount_targets(FileSystemId=ident).get("MountTargets", [])
        if not targets:
            return [CheckResult(f"existing {what}", "failed", f"{ident} has no mount target, so no node can mount it",
                                [fix("add a mount target in the compute subnet's Availability Zone")])]
        return [CheckResult(f"existing {what}", "passed", f"{ident} {fs.get('LifeCycleState')} with "
                                                         f"{len(targets)} mount target(s)")]

    return run(ctx)
