"""The EKS cluster as an engine resource: its Kubernetes version (UpdateClusterVersion, one minor version at a
time) and endpoint access (UpdateClusterConfig) change in place."""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.resources import CLUSTER_VERSION_PAGE, PHASES, EksResource
from fmcluster.backends.eks.versions import minor, upgrade_note, versions_between
from fmcluster.engine import AttributeChange, Context, InPlace, Observed
from fmcluster.errors import UsageError


class EksCluster(EksResource):
    kind = "eks_cluster"
    what = "cluster"
    snapshot_kind = "eks.Cluster"
    teardown_rank = 40
    # What UpdateClusterConfig cannot change for fmcluster: the role, the subnets, and the access mode it was made
    # with (EKS moves that one way only).
    replace_on = ("roleArn", "resourcesVpcConfig", "accessConfig")
    replace_page = "EKS API reference, UpdateClusterConfig: it takes no roleArn or subnetIds, and moves " \
                   "authenticationMode one way only"
    in_place = (InPlace(("version",), "update_version", CLUSTER_VERSION_PAGE),
                InPlace(("resourcesVpcConfig.endpointPublicAccess", "resourcesVpcConfig.endpointPrivateAccess"),
                        "update_endpoint", "EKS User Guide, 'Cluster API server endpoint'"))

    def _describe(self, ctx: Context) -> dict[str, Any]:
        return ctx.client("eks").describe_cluster(name=self.key)["cluster"]

    def _outputs(self, item: dict[str, Any]) -> dict[str, Any]:
        prefix = f"eks_cluster.{self.key}"
        vpc = item.get("resourcesVpcConfig") or {}
        return {f"{prefix}.name": item["name"], f"{prefix}.arn": item.get("arn"),
                f"{prefix}.endpoint": item.get("endpoint"),
                f"{prefix}.certificate_authority": (item.get("certificateAuthority") or {}).get("data"),
                f"{prefix}.security_group": vpc.get("clusterSecurityGroupId"),
                f"{prefix}.version": item.get("version")}

    def _live(self, item: dict[str, Any]) -> dict[str, Any]:
        vpc = item.get("resourcesVpcConfig") or {}
        access = item.get("accessConfig") or {}
        return {"version": item.get("version"), "roleArn": item.get("roleArn"),
                "resourcesVpcConfig.subnetIds": sorted(vpc.get("subnetIds") or []),
                "resourcesVpcConfig.endpointPublicAccess": vpc.get("endpointPublicAccess"),
                "resourcesVpcConfig.endpointPrivateAccess": vpc.get("endpointPrivateAccess"),
                "accessConfig.authenticationMode": access.get("authenticationMode")}

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        vpc = body["resourcesVpcConfig"]
        subnets = vpc["subnetIds"]
        return {"version": body["version"], "roleArn": body["roleArn"],
                "resourcesVpcConfig.subnetIds": sorted(subnets, key=str) if all(isinstance(s, str) for s in subnets)
                else subnets,
                "resourcesVpcConfig.endpointPublicAccess": vpc["endpointPublicAccess"],
                "resourcesVpcConfig.endpointPrivateAccess": vpc["endpointPrivateAccess"],
                "accessConfig.authenticationMode": body["accessConfig"]["authenticationMode"]}

    def create(self, ctx: Context, token: str) -> Observed:
        cluster = ctx.client("eks").create_cluster(clientRequestToken=token,
                                                   **ctx.resolve(self.document.body))["cluster"]
        return Observed(cluster.get("arn"), cluster["status"], PHASES.get(cluster["status"], "pending"),
                        self._outputs(cluster))

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        found = super().changes(ctx, observed)
        return [AttributeChange(c.path, c.old, c.new, upgrade_note(c.old, c.new)) if c.path == "version" else c
                for c in found]

    def update_version(self, ctx: Context, observed: Observed, changes: list[AttributeChange],
                       token: str) -> Observed:
        """UpdateClusterVersion moves the control plane one minor version up; its node groups must be at its
        version first (CLUSTER_VERSION_PAGE). A longer way is walked one minor version at a time by the
        lifecycle (:func:`fmcluster.backends.eks.upgrades.steps`)."""
        wanted = ctx.resolve(self.document.body)["version"]
        current = str(observed.attributes.get("version") or "")
        if current and minor(wanted) != minor(current) + 1:
            raise UsageError(f"EKS cluster {self.key} is at Kubernetes {current}: EKS moves a cluster one minor "
                             f"version at a time ({CLUSTER_VERSION_PAGE}), so {wanted} is reached through "
                             f"{', '.join(versions_between(current, wanted))}; `fmcluster create SPEC` walks them")
        answer = ctx.client("eks").update_cluster_version(name=self.key, version=wanted, clientRequestToken=token)
        self._started(answer, f"Kubernetes {current} → {wanted}")
        return Observed(observed.id, "UPDATING", "pending", observed.outputs)

    def update_endpoint(self, ctx: Context, observed: Observed, changes: list[AttributeChange],
                        token: str) -> Observed:
        vpc = ctx.resolve(self.document.body)["resourcesVpcConfig"]
        endpoint = {k: vpc[k] for k in ("endpointPublicAccess", "endpointPrivateAccess")}
        answer = ctx.client("eks").update_cluster_config(name=self.key, resourcesVpcConfig=endpoint,
                                                         clientRequestToken=token)
        self._started(answer, "endpoint access")
        return Observed(observed.id, "UPDATING", "pending", observed.outputs)

    def _send_delete(self, ctx: Context) -> None:
        ctx.client("eks").delete_cluster(name=self.key)
