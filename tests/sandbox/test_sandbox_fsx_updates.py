"""FSx UpdateFileSystem for Lustre in the sandbox, over HTTP, by the FSx for Lustre guide's rules ("Managing
throughput capacity", "Managing storage capacity"; FSx API reference, UpdateFileSystem), and how fmcluster plans
the changes FSx cannot make in place."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from fixtures.fsx import settled

REGION = "us-east-1"


def _code(call) -> str:
    with pytest.raises(ClientError) as info:
        call()
    return info.value.response["Error"]["Code"]


def test_lustre_throughput_and_storage_updates(sandbox):
    fsx, ec2 = sandbox.client("fsx", REGION), sandbox.client("ec2", REGION)
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    fs = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet],
                                LustreConfiguration={"DeploymentType": "PERSISTENT_2",
                                                     "PerUnitStorageThroughput": 250})["FileSystem"]
    fs_id = fs["FileSystemId"]
    update = fsx.update_file_system

    # "Managing throughput capacity": PERSISTENT_2 takes 125, 250, 500 or 1000 MB/s/TiB
    assert _code(lambda: update(FileSystemId=fs_id, LustreConfiguration={"PerUnitStorageThroughput": 300})) == \
        "BadRequest"
    answer = update(FileSystemId=fs_id, LustreConfiguration={"PerUnitStorageThroughput": 500})["FileSystem"]
    (action,) = answer["AdministrativeActions"]
    assert (action["AdministrativeActionType"], action["Status"]) == ("FILE_SYSTEM_UPDATE", "PENDING")
    # one update at a time (UpdateFileSystem, StorageCapacity)
    assert _code(lambda: update(FileSystemId=fs_id, StorageCapacity=2400)) == "BadRequest"
    done = settled(fsx, fs_id)
    assert done["LustreConfiguration"]["PerUnitStorageThroughput"] == 500

    # "Managing storage capacity": only increases, in multiples of 2400 GiB for persistent SSD, and not again
    # within 6 hours of the last increase
    assert _code(lambda: update(FileSystemId=fs_id, StorageCapacity=1000)) == "BadRequest"
    assert _code(lambda: update(FileSystemId=fs_id, StorageCapacity=3600)) == "BadRequest"
    grown = update(FileSystemId=fs_id, StorageCapacity=2400)["FileSystem"]
    assert grown["Lifecycle"] == "UPDATING"  # while storage scales
    assert settled(fsx, fs_id)["StorageCapacity"] == 2400
    assert _code(lambda: update(FileSystemId=fs_id, StorageCapacity=4800)) == "BadRequest"
    # a file system that does not exist
    assert _code(lambda: update(FileSystemId="fs-0123456789abcdef0", StorageCapacity=2400)) == "FileSystemNotFound"
    fsx.delete_file_system(FileSystemId=fs_id)


def test_what_fsx_cannot_change_in_place_is_a_replacement_that_names_its_page():
    """fmcluster's plan: growth and throughput are updates; a smaller size and another deployment type replace the
    file system, naming the page that says why (and that the data goes)."""
    from fmcluster.aws.fsx import FsxLustre
    from fmcluster.engine import AttributeChange
    from fmcluster.render.documents import Document

    body = {"LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 500}}
    lustre = FsxLustre("lustre", Document("fsx-lustre.yaml", "fsx_lustre", "lustre", "fsx", {}, "", body))
    grow = AttributeChange("StorageCapacity", 1200, 2400)
    faster = AttributeChange("LustreConfiguration.PerUnitStorageThroughput", 250, 500)
    assert lustre.replacement_reason([grow, faster]) is None
    assert [step for step, _ in lustre.update_steps([grow, faster])] == ["update_throughput", "update_storage"]
    shrink = lustre.replacement_reason([AttributeChange("StorageCapacity", 2400, 1200)])
    assert "'Managing storage capacity'" in shrink and "data is lost" in shrink
    kind = lustre.replacement_reason([AttributeChange("LustreConfiguration.DeploymentType", "PERSISTENT_1",
                                                      "PERSISTENT_2")])
    assert "UpdateFileSystem" in kind and "data is lost" in kind
