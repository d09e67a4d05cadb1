"""AWS ParallelCluster 3, as generic code sees it."""

from __future__ import annotations

from fmcluster.backends.profile import BackendProfile

PROFILE = BackendProfile(
    name="parallelcluster",
    display="ParallelCluster",
    login_role="head node",
    login_where="head node",
    status={"CREATE_IN_PROGRESS": "CREATING", "CREATE_COMPLETE": "ACTIVE", "CREATE_FAILED": "FAILED",
            "UPDATE_IN_PROGRESS": "UPDATING", "UPDATE_COMPLETE": "ACTIVE", "UPDATE_FAILED": "FAILED",
            "DELETE_IN_PROGRESS": "DELETING", "DELETE_FAILED": "FAILED", "DELETE_COMPLETE": "NOT_FOUND",
            # CloudFormation's own words, where a stack is listed without ParallelCluster's clusterStatus
            "ROLLBACK_IN_PROGRESS": "FAILED", "ROLLBACK_COMPLETE": "FAILED", "ROLLBACK_FAILED": "FAILED",
            "UPDATE_ROLLBACK_IN_PROGRESS": "FAILED", "UPDATE_ROLLBACK_COMPLETE": "FAILED",
            "UPDATE_ROLLBACK_FAILED": "FAILED"},
    anchor_kind="pcluster_cluster",
    stack_kind="pcluster_cluster",
    cluster_name_tag="parallelcluster:cluster-name",
    extra="parallelcluster",
)
