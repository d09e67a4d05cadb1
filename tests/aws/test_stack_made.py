"""What a backend's own stack made (CloudFormation copies the stack's tags onto it, ``fmcluster:resource`` naming the
stack) is told apart by discovery, whichever backend scans: the stack kinds come from the backends' profiles
(``BackendProfile.stack_kind``), handed to every backend's scan in its context."""

from __future__ import annotations

from fmcluster.aws.discovery import _found
from fmcluster.backends import registry
from fmcluster.engine import Context
from fmcluster.render.common import CLUSTER_ID_TAG, CLUSTER_TAG, REGION_TAG, RESOURCE_TAG

STACK_KINDS = frozenset(p.stack_kind for p in registry.profiles() if p.stack_kind)


def _ctx() -> Context:
    return Context(cluster="c", region="us-east-1", client=lambda service: None, cluster_id="id-1")


def _tags(resource: str) -> dict[str, str]:
    return {CLUSTER_TAG: "c", REGION_TAG: "us-east-1", CLUSTER_ID_TAG: "id-1", RESOURCE_TAG: resource}


def test_a_file_system_the_parallelcluster_stack_made_is_stack_made_under_its_own_kind():
    assert STACK_KINDS == {"pcluster_cluster"}
    found = _found(_ctx(), _tags("pcluster_cluster:c"), "fs-1", "AVAILABLE", "FSx file system fs-1 (LUSTRE)",
                   "fsx_lustre:fsx_lustre", STACK_KINDS)
    assert found.stack_made and found.resource == "fsx_lustre:fsx_lustre" and found.handle is not None


def test_what_fmcluster_made_itself_is_not_stack_made():
    found = _found(_ctx(), _tags("fsx_lustre:lustre"), "fs-1", "AVAILABLE", "FSx file system fs-1 (LUSTRE)",
                   "fsx_lustre:fsx_lustre", STACK_KINDS)
    assert not found.stack_made and found.resource == "fsx_lustre:lustre"
