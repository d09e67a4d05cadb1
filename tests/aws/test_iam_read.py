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

    # ListRolePolicies is held 2 s after GetRole answered; the role is deleted meanwhile.
    sandbox.faults({"latency": {"call.iam.ListRolePolicies": 2.0}})
    other = sandbox.client("iam")  # made here: boto3 sessions do not make clients safely from two threads
    deleter = threading.Timer(0.5, lambda: other.delete_role(RoleName="iam-race-nodes"))
    deleter.start()
    started = time.monotonic()
    try:
        assert resource.read(ctx, None) is None
    finally:
        deleter.join()
    assert time.monotonic() - started >= 2.0, "the read did not wait on the held call: the race was not exercised"
