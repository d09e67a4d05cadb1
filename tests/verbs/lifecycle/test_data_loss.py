"""A plan that deletes or replaces stored data: the sandbox's CreateBackup as the FSx API reference has it, and
fmcluster's refusal without --allow-data-loss and its backup by default, against FSx in the sandbox over HTTP.

FSx facts (FSx API reference, CreateBackup, https://docs.aws.amazon.com/fsx/latest/APIReference/
API_CreateBackup.html): "For Amazon FSx for Lustre file systems, you can create a backup only for file systems
that have the following configuration: A Persistent deployment type; Are not linked to a data repository"; a new
backup starts CREATING; the same ClientRequestToken returns the same backup. The end-to-end refusal of an FSx shrink
is in tests/verbs/lifecycle/test_lifecycle_storage.py (it reuses that test's cluster)."""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import ClientError

from fmcluster.aws.fsx import FsxLustre
from fmcluster.engine import Context, ResourceChange
from fmcluster.plan.changes import Plan
from fmcluster.verbs.lifecycle import data_loss

REGION = "us-east-1"
CLUSTER, CLUSTER_ID = "keeps-data", "c-keeps-data"


def _code(call) -> str:
    with pytest.raises(ClientError) as info:
        call()
    return info.value.response["Error"]["Code"]


def _lustre(sandbox, deployment: str, tags: list[dict] | None = None) -> str:
    fsx, ec2 = sandbox.client("fsx", REGION), sandbox.client("ec2", REGION)
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    lustre = {"DeploymentType": deployment}
    if deployment.startswith("PERSISTENT"):
        lustre["PerUnitStorageThroughput"] = 250 if deployment == "PERSISTENT_2" else 50
    tagged = {"Tags": tags} if tags else {}  # FSx takes no empty Tags list
    return fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet],
                                  LustreConfiguration=lustre, **tagged)["FileSystem"]["FileSystemId"]


def test_the_sandbox_backs_up_what_fsx_backs_up(sandbox):
    fsx = sandbox.client("fsx", REGION)
    scratch, linked, persistent = (_lustre(sandbox, t) for t in ("SCRATCH_2", "PERSISTENT_2", "PERSISTENT_2"))
    fsx.create_data_repository_association(FileSystemId=linked, FileSystemPath="/in",
                                           DataRepositoryPath="s3://training-data/tokens")
    assert _code(lambda: fsx.create_backup(FileSystemId=scratch)) == "BadRequest"
    assert _code(lambda: fsx.create_backup(FileSystemId=linked)) == "BadRequest"
    assert _code(lambda: fsx.create_backup(FileSystemId="fs-0123456789abcdef0")) == "FileSystemNotFound"
    backup = fsx.create_backup(FileSystemId=persistent, ClientRequestToken="one")["Backup"]
    assert backup["Lifecycle"] == "CREATING"
    assert fsx.create_backup(FileSystemId=persistent, ClientRequestToken="one")["Backup"]["BackupId"] == \
        backup["BackupId"]
    deadline = time.monotonic() + 30
    while fsx.describe_backups(BackupIds=[backup["BackupId"]])["Backups"][0]["Lifecycle"] != "AVAILABLE":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # what the sandbox answers is what botocore's FSx model describes (Backup: Type, FileSystem, … required)
    from fmcluster_sandbox import model_check

    answer = fsx.describe_backups(BackupIds=[backup["BackupId"]])
    answer.pop("ResponseMetadata")
    for item in answer["Backups"]:  # back to the wire's form: boto3 parsed the timestamp
        item["CreationTime"] = item["CreationTime"].timestamp()
    assert model_check.check("fsx", "DescribeBackups", answer, output=True) == []
    # and the sandbox checks what it is sent against that model, as FSx does (botocore's own check off here)
    unchecked = sandbox.client("fsx", REGION, parameter_validation=False)
    assert _code(lambda: unchecked.create_backup(FileSystemId=persistent, ClientRequestToken="x" * 64)) == \
        "BadRequest"
    fsx.delete_backup(BackupId=backup["BackupId"])
    for fs in (scratch, linked, persistent):
        fsx.delete_file_system(FileSystemId=fs)


class _Session:
    """What data_loss reads of a session: its context and a state store with no records (resources are found
    by their known ids, as a teardown finds them)."""

    class _Store:
        def resource(self, *_):
            return None

    def __init__(self, sandbox):
        self.ctx = Context(cluster=CLUSTER, region=REGION, client=lambda s: sandbox.client(s, REGION),
                           cluster_id=CLUSTER_ID)
        self.store = self._Store()


def _plan(file_system_id: str) -> Plan:
    gone = FsxLustre("lustre", known_id=file_system_id)
    return Plan([], [gone], [ResourceChange(gone.name, "delete", reason="no longer in the spec")])


def test_a_plan_that_deletes_a_file_system_is_refused_then_backed_up_by_default(sandbox, capsys):
    tags = [{"Key": "fmcluster:cluster", "Value": CLUSTER}, {"Key": "fmcluster:region", "Value": REGION},
            {"Key": "fmcluster:cluster-id", "Value": CLUSTER_ID}]
    fsx = sandbox.client("fsx", REGION)
    session = _Session(sandbox)
    persistent, scratch = _lustre(sandbox, "PERSISTENT_2", tags), _lustre(sandbox, "SCRATCH_2", tags)

    with pytest.raises(data_loss.DataLossRefused) as refused:
        data_loss.guard(session, _plan(persistent), allow=False, backup=True)
    assert refused.value.exit_code == 2 and "--allow-data-loss" in str(refused.value)
    assert f"delete fsx_lustre:lustre ({persistent}) loses every file on the file system" in \
        " ".join(capsys.readouterr().err.split())

    found = data_loss.guard(session, _plan(persistent), allow=True, backup=True)
    (backup_id,) = data_loss.back_up(session, found, backup=True)
    (backup,) = fsx.describe_backups(BackupIds=[backup_id])["Backups"]
    assert (backup["FileSystem"]["FileSystemId"], backup["Lifecycle"]) == (persistent, "AVAILABLE")
    assert data_loss.back_up(session, found, backup=False) == []  # --no-backup

    found = data_loss.guard(session, _plan(scratch), allow=True, backup=True)
    assert "no backup is possible" in " ".join(capsys.readouterr().err.split())
    assert data_loss.back_up(session, found, backup=True) == []
    fsx.delete_backup(BackupId=backup_id)
    for fs in (persistent, scratch):
        fsx.delete_file_system(FileSystemId=fs)
