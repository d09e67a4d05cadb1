"""An EKS Pod Identity association (one ServiceAccount of the cluster ↔ one IAM role), as an engine resource.

EKS names an association by an id it issues, and allows one per namespace and ServiceAccount, so it is found by
``ListPodIdentityAssociations`` filtered on those two (EKS API reference), then described for its role and tags.
UpdatePodIdentityAssociation changes the role in place; the namespace and ServiceAccount are fixed.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code
from fmcluster.aws.ownership import require_ours
from fmcluster.engine import AttributeChange, Context, Observed, Resource
from fmcluster.render.documents import Document


class PodIdentityAssociation(Resource):
    kind = "eks_pod_identity_association"
    # After the in-cluster objects (10) whose pods use it, before the cluster (40) and the role it names (60).
    teardown_rank = 25
    replace_on = ("namespace", "serviceAccount")

    def __init__(self, key: str, document: Document | None = None, cluster: str | None = None,
                 namespace: str | None = None, service_account: str | None = None):
        self.key = key
        self.document = document
        self.cluster = cluster or ""
        body = document.body if document is not None else {}
        self.namespace = body.get("namespace", namespace)
        self.service_account = body.get("serviceAccount", service_account)

    @property
    def label(self) -> str:
        return (f"EKS Pod Identity association of ServiceAccount {self.namespace}/{self.service_account} "
                f"(EKS cluster {self.cluster})")

    def _find(self, ctx: Context) -> list[dict[str, Any]]:
        """The associations of this ServiceAccount (one, or none), described."""
        eks = ctx.client("eks")
        try:
            summaries = [a for page in eks.get_paginator("list_pod_identity_associations").paginate(
                clusterName=self.cluster, namespace=self.namespace, serviceAccount=self.service_account)
                for a in page["associations"]]
            return [eks.describe_pod_identity_association(clusterName=self.cluster,
                                                          associationId=a["associationId"])["association"]
                    for a in summaries]
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":  # the cluster (or the association) is gone
                return []
            raise

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        found = self._find(ctx)
        if not found:
            return None
        association = found[0]
        require_ours(self.label, association.get("tags") or {}, ctx)
        return Observed(association["associationArn"], "ACTIVE", "ready",
                        {f"{self.kind}.{self.key}.id": association["associationId"]},
                        attributes={k: association.get(k) for k in ("namespace", "serviceAccount", "roleArn")})

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        return {k: body.get(k) for k in ("namespace", "serviceAccount", "roleArn")}

    def create(self, ctx: Context, token: str) -> Observed:
        association = ctx.client("eks").create_pod_identity_association(
            clientRequestToken=token, **ctx.resolve(self.document.body))["association"]
        return Observed(association["associationArn"], "ACTIVE", "ready",
                        {f"{self.kind}.{self.key}.id": association["associationId"]})

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        body = ctx.resolve(self.document.body)
        association_id = observed.outputs[f"{self.kind}.{self.key}.id"]
        ctx.client("eks").update_pod_identity_association(clusterName=self.cluster, associationId=association_id,
                                                          roleArn=body["roleArn"], clientRequestToken=token)
        return self.read(ctx, observed.id) or observed

    def delete(self, ctx: Context, observed: Observed) -> None:
        """Safe to repeat: an association already gone (or gone with its cluster) has been deleted."""
        eks = ctx.client("eks")
        for association in self._find(ctx):
            try:
                eks.delete_pod_identity_association(clusterName=self.cluster,
                                                    associationId=association["associationId"])
            except ClientError as exc:
                if error_code(exc) != "ResourceNotFoundException":
                    raise
