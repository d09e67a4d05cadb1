"""AWS PCS, as generic code sees it."""

from __future__ import annotations

from fmcluster.backends.profile import BackendProfile

PROFILE = BackendProfile(
    name="pcs",
    display="PCS",
    login_role="login node",
    login_where="login node (PCS compute node group 'login')",
    anchor_kind="cluster",
    stand_ins={("cluster", "id"): "pcs_abcdef1234", ("compute_node_group", "id"): "pcs_ngabcdef12"},
    # PCS's statuses in the one vocabulary of `status` (the raw one stays in backend_status).
    status={"CREATING": "CREATING", "ACTIVE": "ACTIVE", "UPDATING": "UPDATING", "DELETING": "DELETING",
            "CREATE_FAILED": "FAILED", "UPDATE_FAILED": "FAILED", "DELETE_FAILED": "FAILED",
            "SUSPENDING": "UPDATING", "SUSPENDED": "FAILED", "RESUMING": "UPDATING", "DELETED": "NOT_FOUND"},
)
