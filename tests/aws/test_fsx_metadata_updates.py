"""A Lustre file system's metadata IOPS (storage.lustre.metadata_iops), edited after create: diff compares it, FSx
raises it in place (UpdateFileSystem LustreConfiguration.MetadataConfiguration; FSx API reference,
UpdateFileSystemLustreMetadataConfiguration: "The value you provide must be greater than or equal to the current
number of Metadata IOPS"), and a lower value is a replacement, which the plan says. fmcluster's FsxLustre drives the
sandbox over HTTP with boto3; the sandbox refuses what FSx refuses."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from fixtures.fsx import settled

REGION = "us-east-1"
CLUSTER = "meta"


def _code(call) -> str:
    with pytest.raises(ClientError) as info:
        call()
    return info.value.response["Error"]["Code"]


def test_metadata_iops_grow_in_place_and_only_grow(sandbox):
    from fmcluster.aws.fsx import FsxLustre
    from fmcluster.engine import Context
    from fmcluster.render.common import CLUSTER_ID_TAG
    from fmcluster.render.documents import Document

    fsx, ec2 = sandbox.client("fsx", REGION), sandbox.client("ec2", REGION)
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]

    def body(iops: int) -> dict:
        return {"FileSystemType": "LUSTRE", "StorageCapacity": 1200, "SubnetIds": [subnet],
                "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250,
                                        "MetadataConfiguration": {"Mode": "USER_PROVISIONED", "Iops": iops}}}

    fs = fsx.create_file_system(**body(1500), Tags=[{"Key": "fmcluster:cluster", "Value": CLUSTER},
                                                    {"Key": "fmcluster:region", "Value": REGION},
                                                    {"Key": CLUSTER_ID_TAG, "Value": "meta-1"}])["FileSystem"]
    fs_id = fs["FileSystemId"]
    update = fsx.update_file_system
    # The sandbox's rules: a value off FSx's list, Iops with AUTOMATIC (fewer IOPS: below).
    for metadata in ({"Mode": "USER_PROVISIONED", "Iops": 2000}, {"Mode": "AUTOMATIC", "Iops": 3000}):
        assert _code(lambda m=metadata: update(FileSystemId=fs_id,
                                               LustreConfiguration={"MetadataConfiguration": m})) == "BadRequest"

    ctx = Context(CLUSTER, REGION, lambda service: sandbox.client(service, REGION), cluster_id="meta-1")
    lustre = FsxLustre("lustre", Document("fsx-lustre.yaml", "fsx_lustre", "lustre", "fsx", {}, "", body(6000)))
    observed = lustre.read(ctx, fs_id)
    changes = lustre.changes(ctx, observed)
    assert [(c.path, c.old, c.new) for c in changes] == [
        ("LustreConfiguration.MetadataConfiguration.Iops", 1500, 6000)]
    assert lustre.replacement_reason(changes) is None
    assert [step for step, _ in lustre.update_steps(changes)] == ["update_metadata"]
    lustre.update_metadata(ctx, observed, changes, "meta-token-1")
    grown = settled(fsx, fs_id)
    assert grown["LustreConfiguration"]["MetadataConfiguration"] == {"Mode": "USER_PROVISIONED", "Iops": 6000}
    assert lustre.changes(ctx, lustre.read(ctx, fs_id)) == []

    # Fewer IOPS: FSx refuses the update, so the plan replaces the file system and says its data goes.
    fewer = FsxLustre("lustre", Document("fsx-lustre.yaml", "fsx_lustre", "lustre", "fsx", {}, "", body(3000)))
    why = fewer.replacement_reason(fewer.changes(ctx, fewer.read(ctx, fs_id)))
    assert why and "only grow" in why and "data is lost" in why, why
    assert _code(lambda: update(FileSystemId=fs_id, LustreConfiguration={
        "MetadataConfiguration": {"Mode": "USER_PROVISIONED", "Iops": 3000}})) == "BadRequest"
    fsx.delete_file_system(FileSystemId=fs_id)
