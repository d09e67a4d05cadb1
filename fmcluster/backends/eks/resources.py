"""The EKS cluster, its managed add-ons and its managed node groups, as engine resources.

EKS answers every ``Describe…`` with the resource's tags, so ownership is read in the same call. What EKS can
change in place: a node group's scaling and labels (UpdateNodegroupConfig) and its scale-from-zero tags
(TagResource, UntagResource), a cluster's Kubernetes version
(UpdateClusterVersion, one minor version at a time). Everything else a document sets is fixed at creation and
changes only by replacing the resource, which the plan says.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from fmcluster import reads
from fmcluster.backends.ec2 import error_code
from fmcluster.backends.ownership import require_ours
from fmcluster.engine import AttributeChange, Context, Observed, Resource, flatten
from fmcluster.errors import UsageError
from fmcluster.render.documents import Document

PHASES = {
    "CREATING": "pending", "UPDATING": "pending", "DELETING": "pending", "PENDING": "pending",
    "ACTIVE": "ready", "DEGRADED": "ready", "FAILED": "failed", "CREATE_FAILED": "failed",
    "DELETE_FAILED": "failed", "UPDATE_FAILED": "failed",
}
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
    # What a read-only pass keeps its Describe answer as (fmcluster.reads), shared with the backend's describe.
    snapshot_kind: ClassVar[str]

    def __init__(self, key: str, document: Document | None = None, cluster: str | None = None):
        self.key = key
        self.document = document
        self.cluster = cluster or key

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
        return Observed(item.get("arn") or item.get("nodegroupArn") or item.get("addonArn"), status,
                        PHASES.get(status, "pending"), self._outputs(item), detail, attributes=self._live(item))

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


class EksCluster(EksResource):
    kind = "eks_cluster"
    what = "cluster"
    snapshot_kind = "eks.Cluster"
    teardown_rank = 40
    # What UpdateClusterConfig cannot change for fmcluster: the role, the subnets, and the access mode it was made
    # with (EKS moves that one way only).
    replace_on = ("roleArn", "resourcesVpcConfig", "accessConfig")

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

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        eks = ctx.client("eks")
        body = ctx.resolve(self.document.body)
        paths = {c.path for c in changes}
        if "version" in paths:
            eks.update_cluster_version(name=self.key, version=body["version"], clientRequestToken=token)
        endpoint = {k: body["resourcesVpcConfig"][k] for k in ("endpointPublicAccess", "endpointPrivateAccess")}
        if paths & {f"resourcesVpcConfig.{k}" for k in endpoint}:
            eks.update_cluster_config(name=self.key, resourcesVpcConfig=endpoint,
                                      clientRequestToken=f"{token}-endpoint"[:64])
        return Observed(observed.id, "UPDATING", "pending")

    def _send_delete(self, ctx: Context) -> None:
        ctx.client("eks").delete_cluster(name=self.key)


class EksNodegroup(EksResource):
    kind = "eks_nodegroup"
    what = "node group"
    snapshot_kind = "eks.Nodegroup"
    teardown_rank = 30
    # UpdateNodegroupConfig changes scaling and labels; the rest of a managed node group is fixed at creation.
    replace_on = ("launchTemplate", "capacityType", "amiType", "subnets", "nodeRole", "instanceTypes")

    def _describe(self, ctx: Context) -> dict[str, Any]:
        return ctx.client("eks").describe_nodegroup(clusterName=self.cluster, nodegroupName=self.key)["nodegroup"]

    def _outputs(self, item: dict[str, Any]) -> dict[str, Any]:
        scaling = item.get("scalingConfig") or {}
        prefix = f"eks_nodegroup.{self.key}"
        return {f"{prefix}.min": scaling.get("minSize"), f"{prefix}.max": scaling.get("maxSize"),
                f"{prefix}.desired": scaling.get("desiredSize")}

    def _live(self, item: dict[str, Any]) -> dict[str, Any]:
        live = super()._live(item)
        # EKS adds labels of its own to what it reports; only the ones the document sets are compared.
        labels = item.get("labels") or {}
        live = {k: v for k, v in live.items() if not k.startswith("labels.")}
        live.update({f"labels.{k}": v for k, v in labels.items()})
        live.update(_template_tags(item.get("tags") or {}))
        return live

    def desired(self, ctx: Context) -> dict[str, Any]:
        desired = {k: v for k, v in super().desired(ctx).items() if k != "updateConfig"}
        desired.update(_template_tags(self.document.body.get("tags") or {}))
        if _elastic(desired):
            # The Cluster Autoscaler sets an elastic group's desired size: it is neither drift nor fmcluster's.
            desired.pop("scalingConfig.desiredSize", None)
        return desired

    def create(self, ctx: Context, token: str) -> Observed:
        group = ctx.client("eks").create_nodegroup(clientRequestToken=token,
                                                   **ctx.resolve(self.document.body))["nodegroup"]
        return Observed(group.get("nodegroupArn"), group["status"], PHASES.get(group["status"], "pending"),
                        self._outputs(group))

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        body = ctx.resolve(self.document.body)
        paths = {c.path for c in changes}
        request: dict[str, Any] = {}
        if any(p.startswith("scalingConfig.") for p in paths):
            request["scalingConfig"] = _scaling(body["scalingConfig"], observed.attributes or {})
        label_changes = [p.removeprefix("labels.") for p in paths if p.startswith("labels.")]
        if label_changes:
            wanted = body.get("labels") or {}
            request["labels"] = {k: v for k, v in {
                "addOrUpdateLabels": {k: wanted[k] for k in label_changes if k in wanted},
                "removeLabels": [k for k in label_changes if k not in wanted]}.items() if v}
        if "taints" in paths:
            wanted_taints = body.get("taints") or []
            live_taints = (observed.attributes or {}).get("taints") or []
            kept = {(t["key"], t["effect"]) for t in wanted_taints}
            request["taints"] = {k: v for k, v in {
                "addOrUpdateTaints": wanted_taints,
                "removeTaints": [t for t in live_taints if (t.get("key"), t.get("effect")) not in kept]}.items() if v}
        if any(p.startswith(TAGS_PATH) for p in paths):
            self._retag(ctx, observed, body.get("tags") or {})
            if not request:
                return self.read(ctx, observed.id) or observed
        if not request:
            raise UsageError(f"EKS cannot change {', '.join(sorted(paths))} of node group {self.key} in place")
        try:
            ctx.client("eks").update_nodegroup_config(clusterName=self.cluster, nodegroupName=self.key,
                                                      clientRequestToken=token, **request)
        except ClientError as exc:
            # A re-run after a kill: the update with this token was sent; EKS may still be applying it.
            if error_code(exc) != "ResourceInUseException":
                raise
        return Observed(observed.id, "UPDATING", "pending")

    def _send_delete(self, ctx: Context) -> None:
        ctx.client("eks").delete_nodegroup(clusterName=self.cluster, nodegroupName=self.key)

    def _retag(self, ctx: Context, observed: Observed, tags: dict[str, str]) -> None:
        """TagResource and UntagResource: the node group's scale-from-zero tags as the document has them."""
        eks = ctx.client("eks")
        wanted = {k: v for k, v in tags.items() if k.startswith(TEMPLATE_TAG_PREFIX)}
        live = {path.removeprefix(TAGS_PATH): v for path, v in (observed.attributes or {}).items()
                if path.startswith(TAGS_PATH)}
        if any(live.get(k) != v for k, v in wanted.items()):
            eks.tag_resource(resourceArn=observed.id, tags=wanted)
        gone = sorted(set(live) - set(wanted))
        if gone:
            eks.untag_resource(resourceArn=observed.id, tagKeys=gone)


# The Cluster Autoscaler's scale-from-zero tags (fmcluster.backends.eks.scale_from_zero): the only node group tags
# fmcluster compares, since the autoscaler reads them (through DescribeNodegroup) while the group has no node.
TEMPLATE_TAG_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
TAGS_PATH = "tags."


def _template_tags(tags: dict[str, Any]) -> dict[str, Any]:
    return {f"{TAGS_PATH}{k}": v for k, v in tags.items() if k.startswith(TEMPLATE_TAG_PREFIX)}


def _elastic(flat: dict[str, Any]) -> bool:
    low, high = flat.get("scalingConfig.minSize"), flat.get("scalingConfig.maxSize")
    return isinstance(low, int) and isinstance(high, int) and low < high


def _scaling(wanted: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """The UpdateNodegroupConfig scaling of a change: a fixed group's whole; an elastic group's min and max, with
    the desired size the autoscaler chose kept, moved only into the new range (EKS refuses a desired size outside
    min..max)."""
    if wanted["minSize"] >= wanted["maxSize"]:
        return dict(wanted)
    current = live.get("scalingConfig.desiredSize")
    current = wanted["minSize"] if not isinstance(current, int) else current
    return {"minSize": wanted["minSize"], "maxSize": wanted["maxSize"],
            "desiredSize": min(max(current, wanted["minSize"]), wanted["maxSize"])}


class EksAddon(EksResource):
    kind = "eks_addon"
    what = "add-on"
    snapshot_kind = "eks.Addon"
    teardown_rank = 35
    replace_on = ("addonVersion", "serviceAccountRoleArn")

    def _describe(self, ctx: Context) -> dict[str, Any]:
        return ctx.client("eks").describe_addon(clusterName=self.cluster, addonName=self.key)["addon"]

    def create(self, ctx: Context, token: str) -> Observed:
        addon = ctx.client("eks").create_addon(clientRequestToken=token, **ctx.resolve(self.document.body))["addon"]
        return Observed(addon.get("addonArn"), addon["status"], PHASES.get(addon["status"], "pending"))

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        """UpdateAddon changes an add-on's configurationValues in place (where its pods run); an empty string
        takes them back to the add-on's defaults."""
        paths = {c.path for c in changes}
        if paths != {"configurationValues"}:
            raise UsageError(f"EKS cannot change {', '.join(sorted(paths))} of add-on {self.key} in place")
        body = ctx.resolve(self.document.body)
        ctx.client("eks").update_addon(clusterName=self.cluster, addonName=self.key, clientRequestToken=token,
                                       configurationValues=body.get("configurationValues") or "",
                                       resolveConflicts="OVERWRITE")
        return Observed(observed.id, "UPDATING", "pending")

    def _send_delete(self, ctx: Context) -> None:
        ctx.client("eks").delete_addon(clusterName=self.cluster, addonName=self.key)
