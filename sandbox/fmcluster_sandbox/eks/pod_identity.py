"""EKS Pod Identity associations: CreatePodIdentityAssociation, DescribePodIdentityAssociation,
ListPodIdentityAssociations, UpdatePodIdentityAssociation, DeletePodIdentityAssociation.

Rules (EKS API reference for those operations; EKS guide "Assign an IAM role to a Kubernetes service account" and
"Learn how EKS Pod Identity grants pods access to AWS services"): the cluster exists (and is ACTIVE to create);
the role is an IAM role of the account; one association per namespace and ServiceAccount in a cluster
(``ResourceInUseException`` for a second); the association's id is ``a-`` and 17 lowercase letters and digits, its
ARN ``arn:aws:eks:<region>:<account>:podidentityassociation/<cluster>/<id>``; ``ListPodIdentityAssociations``
filters by namespace and ServiceAccount and answers summaries (no role, no tags); a deleted cluster takes its
associations with it. Not enforced: the role's trust policy (EKS checks it when the agent asks for credentials, which
the sandbox never does) and the ServiceAccount's existence (the API does not require it: an association may come
first).
"""

from __future__ import annotations

import secrets
import string
from typing import Any

from fmcluster_sandbox.eks.errors import in_use, invalid, not_found

_ID_CHARS = string.ascii_lowercase + string.digits


class PodIdentityOperations:
    def _association(self, cluster: Any, association_id: str) -> Any:
        for res in self._all("pod_identity", cluster.account, cluster.region, cluster.name):
            if res.spec["associationId"] == association_id:
                return res
        raise not_found(f"No association found for id: {association_id}", clusterName=cluster.name)

    def _op_create_pod_identity_association(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._active_cluster(p["clusterName"], account, region)
        namespace, account_name = p["namespace"], p["serviceAccount"]
        if self._role(p["roleArn"], account) is None:
            raise invalid(f"Role with arn: {p['roleArn']}, does not exist", clusterName=cluster.name)
        if self._get("pod_identity", account, region, cluster.name, f"{namespace}/{account_name}") is not None:
            raise in_use(f"Association already exists for service account {account_name} in namespace {namespace}",
                         clusterName=cluster.name)
        self._check_tags(p.get("tags"))
        association_id = "a-" + "".join(secrets.choice(_ID_CHARS) for _ in range(17))
        arn = f"arn:aws:eks:{region}:{account}:podidentityassociation/{cluster.name}/{association_id}"
        spec = {"associationId": association_id, "namespace": namespace, "serviceAccount": account_name,
                "roleArn": p["roleArn"], "disableSessionTags": bool(p.get("disableSessionTags"))}
        association = self._new("pod_identity", f"{namespace}/{account_name}", arn, account, region, cluster.name,
                                spec, p.get("tags"), status="ACTIVE")
        return {"association": self._association_view(association)}

    def _op_describe_pod_identity_association(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        return {"association": self._association_view(self._association(cluster, p["associationId"]))}

    def _op_list_pod_identity_associations(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        found = [a for a in self._all("pod_identity", account, region, cluster.name)
                 if (not p.get("namespace") or a.spec["namespace"] == p["namespace"])
                 and (not p.get("serviceAccount") or a.spec["serviceAccount"] == p["serviceAccount"])]
        summaries = [{"clusterName": a.cluster, "namespace": a.spec["namespace"],
                      "serviceAccount": a.spec["serviceAccount"], "associationArn": a.arn,
                      "associationId": a.spec["associationId"]} for a in found]
        return self._page(summaries, p, "associations")

    def _op_update_pod_identity_association(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        association = self._association(cluster, p["associationId"])
        if p.get("roleArn"):
            if self._role(p["roleArn"], account) is None:
                raise invalid(f"Role with arn: {p['roleArn']}, does not exist", clusterName=cluster.name)
            association.spec["roleArn"] = p["roleArn"]
        association.modified_at = self.wall()
        return {"association": self._association_view(association)}

    def _op_delete_pod_identity_association(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        association = self._association(cluster, p["associationId"])
        self._resources.pop(self._key(association), None)
        return {"association": self._association_view(association)}

    @staticmethod
    def _association_view(association: Any) -> dict[str, Any]:
        spec = association.spec
        return {"clusterName": association.cluster, "namespace": spec["namespace"],
                "serviceAccount": spec["serviceAccount"], "roleArn": spec["roleArn"],
                "associationArn": association.arn, "associationId": spec["associationId"],
                "tags": dict(association.tags), "createdAt": association.created_at,
                "modifiedAt": association.modified_at, "disableSessionTags": spec["disableSessionTags"]}


__all__ = ["PodIdentityOperations"]
