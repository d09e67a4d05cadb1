"""The EKS cluster, its managed add-ons and its managed node groups, as engine resources.

EKS answers every ``Describe…`` with the resource's tags, so ownership is read in the same call. What EKS can
change in place (each resource's ``in_place``): a cluster's Kubernetes version (UpdateClusterVersion, one minor
version at a time) and endpoint access (UpdateClusterConfig); a node group's Kubernetes version and launch-template
version (UpdateNodegroupVersion), its scaling, labels and taints (UpdateNodegroupConfig) and its scale-from-zero
tags (TagResource, UntagResource); an add-on's version and
configuration (UpdateAddon). Each update EKS starts is followed to its end with DescribeUpdate: one that ends
``Failed`` or ``Cancelled`` fails the step with EKS's errors. Everything else a document sets is fixed at creation
and changes only by replacing the resource, which the plan says with the page that says so.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code
from fmcluster.aws.ownership import require_ours
from fmcluster.engine import Context, Observed, Resource, flatten, reads
from fmcluster.render.documents import Document

PHASES = {
    "CREATING": "pending", "UPDATING": "pending", "DELETING": "pending", "PENDING": "pending",
    "ACTIVE": "ready", "DEGRADED": "ready", "FAILED": "failed", "CREATE_FAILED": "failed",
    "DELETE_FAILED": "failed", "UPDATE_FAILED": "failed",
}
# EKS User Guide pages that say what changes in place, and how.
CLUSTER_VERSION_PAGE = "EKS User Guide, 'Update existing cluster to new Kubernetes version'"
NODEGROUP_UPDATE_PAGE = "EKS User Guide, 'Update a managed node group for your cluster'"
ADDON_UPDATE_PAGE = "EKS User Guide, 'Update an Amazon EKS add-on'"
# DescribeUpdate's status values (EKS API, Update.status).
UPDATE_ENDED_BADLY = ("Failed", "Cancelled")
# Members that say which resource a request is about, or how to send it, not what it should be.
_NOT_ATTRIBUTES = {"name", "clusterName", "nodegroupName", "addonName", "tags", "clientRequestToken",
                   "resolveConflicts"}


def health_issues(item: dict[str, Any]) -> str:
    """What EKS reports wrong with a node group or add-on whose status may still look fine."""
    issues = (item.get("health") or {}).get("issues") or []
    return "; ".join(f"{i.get('code', '')}: {i.get('message', '')}" for i in issues)


class EksResource(Resource):
    """What the three EKS resources share: read by name, owned by tags, compared on what the document sets."""

    what: ClassVar[str]
    # What a read-only pass keeps its Describe answer as (fmcluster.engine.reads), shared with the backend's describe.
    snapshot_kind: ClassVar[str]

    def __init__(self, key: str, document: Document | None = None, cluster: str | None = None):
        self.key = key
        self.document = document
        self.cluster = cluster or key
        # The EKS update this walk started and waits for (DescribeUpdate), with what it changes.
        self._update: tuple[str, str] | None = None

    def _update_target(self) -> dict[str, str]:
        """DescribeUpdate's members naming this resource."""
        return {"name": self.cluster}

    def _started(self, answer: dict[str, Any], what: str) -> None:
        update = answer.get("update") or {}
        if update.get("id"):
            self._update = (update["id"], what)

    def _follow_update(self, ctx: Context, observed: Observed) -> Observed:
        """The resource as the update this walk started leaves it: pending while EKS runs it, failed with EKS's
        errors when it ends Failed or Cancelled (the resource itself stays ACTIVE on the old version)."""
        if self._update is None or observed.phase == "gone":
            return observed
        update_id, what = self._update
        update = ctx.client("eks").describe_update(updateId=update_id, **self._update_target())["update"]
        state = update.get("status", "")
        if state == "Successful":
            self._update = None
            return observed
        if state in UPDATE_ENDED_BADLY:
            errors = "; ".join(f"{e.get('errorCode', '')}: {e.get('errorMessage', '')}"
                               for e in update.get("errors") or [])
            observed.phase, observed.status = "failed", f"update {state}"
            observed.detail = f"{what} ({update.get('type', '')} {update_id}): {errors or 'EKS gave no reason'}"
            return observed
        observed.phase, observed.status = "pending", observed.status if observed.status != "ACTIVE" else "UPDATING"
        observed.detail = f"{what}: {state}"
        return observed

    @abstractmethod
    def _describe(self, ctx: Context) -> dict[str, Any]:
        """The resource as EKS describes it."""

    def _outputs(self, item: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _live(self, item: dict[str, Any]) -> dict[str, Any]:
        """The live values at the paths :meth:`desired` sets."""
        return flatten({k: v for k, v in item.items() if k not in _NOT_ATTRIBUTES})

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        try:
            # In a read-only pass, what describe and discovery already read of it (one Describe per resource).
            item = reads.once(ctx, self.snapshot_kind, self.key, lambda: self._describe(ctx))
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        if item is None:  # the backend's describe found it absent in this pass
            return None
        require_ours(f"EKS {self.what} {self.key}", item.get("tags") or {}, ctx)
        status = item.get("status", "")
        detail = health_issues(item)
        observed = Observed(item.get("arn") or item.get("nodegroupArn") or item.get("addonArn"), status,
                            PHASES.get(status, "pending"), self._outputs(item), detail, attributes=self._live(item))
        return self._follow_update(ctx, observed)

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        return flatten({k: v for k, v in body.items() if k not in _NOT_ATTRIBUTES})

    @abstractmethod
    def _send_delete(self, ctx: Context) -> None:
        """The ``Delete…`` request."""

    def delete(self, ctx: Context, observed: Observed) -> None:
        """Safe to repeat: a delete that finds the resource gone, or already deleting, has done its job."""
        try:
            self._send_delete(ctx)
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return
            if error_code(exc) == "ResourceInUseException" and observed.status == "DELETING":
                return
            raise
