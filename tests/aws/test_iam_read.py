"""Reading the nodes' IAM role while something else deletes it (a killed destroy's DeleteRole still lands on
AWS after the kill): the read says the role is gone rather than failing on its next call."""
import json
import threading
import time

from fmcluster.aws.iam import InstanceProfile
from fmcluster.aws.ownership import CLUSTER_ID_TAG, CLUSTER_TAG, REGION_TAG
from fmcluster.engine import Context

TRUST = {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def test_a_role_deleted_between_two_reads_is_read_as_gone(sandbox):
    iam = sandbox.client("iam")
    ctx = Context(cluster="iam-race", region="us-east-1", client=sandbox.client, cluster_id="c-1")
    tags = [{"Key": CLUSTER_TAG, "Value": "iam-race"}, {"Key": REGION_TAG, "Value": "us-east-1"},
            {"Key": CLUSTER_ID_TAG, "Value": "c-1"}]
    iam.create_role(RoleName="iam-race-nodes", AssumeRolePolicyDocument=json.dumps(TRUST), Tags=tags)
    resource = InstanceProfile("nodes", role_name="iam-race-nodes", profile_name="iam-race-nodes")
    assert resource.read(ctx, None).missing == ["instance profile"]

    # ListRolePolicies is held 2 s after GetRole answered; the role is deleted while it is held (the sandbox counts
    # the calls a delay holds), not after a guessed time: under load GetRole alone can take longer than a guess.
    key = "call.iam.ListRolePolicies"

    def held(stage: str) -> int:
        return sandbox.control("GET", "/_fmcluster/faults")["held"].get(key, {}).get(stage, 0)

    before = held("started")
    sandbox.faults({"latency": {key: 2.0}})
    other = sandbox.client("iam")  # made here: boto3 sessions do not make clients safely from two threads
    deleted_while_held: list[bool] = []

    def delete_once_held() -> None:
        deadline = time.monotonic() + 60
        while held("started") == before and time.monotonic() < deadline:
            time.sleep(0.05)
        other.delete_role(RoleName="iam-race-nodes")
        deleted_while_held.append(held("started") > before and held("answered") < held("started"))

    deleter = threading.Thread(target=delete_once_held)
    deleter.start()
    try:
        assert resource.read(ctx, None) is None
    finally:
        deleter.join()
    assert deleted_while_held == [True], "the role was not deleted while the read waited: the race was not exercised"
