"""An EKS managed node group as an engine resource: its Kubernetes and launch-template versions
(UpdateNodegroupVersion), scaling, labels and taints (UpdateNodegroupConfig) and scale-from-zero tags
(TagResource, UntagResource) change in place."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code
from fmcluster.backends.eks.nodes import instance_types
from fmcluster.backends.eks.resources import NODEGROUP_UPDATE_PAGE, PHASES, EksResource
from fmcluster.backends.eks.versions import describe_version_change
from fmcluster.engine import AttributeChange, Context, InPlace, Observed
from fmcluster.errors import UsageError
from fmcluster.render.documents import Document


class EksNodegroup(EksResource):
    kind = "eks_nodegroup"
    what = "node group"
    snapshot_kind = "eks.Nodegroup"
    teardown_rank = 30
    # UpdateNodegroupVersion changes the Kubernetes version and the launch template's version, UpdateNodegroupConfig
    # scaling, labels, taints and nodeRepairConfig; the rest of a managed node group is fixed at creation.
    replace_on = ("launchTemplate", "capacityType", "amiType", "subnets", "nodeRole", "instanceTypes")
    replace_page = "EKS API reference, UpdateNodegroupConfig and UpdateNodegroupVersion: neither takes these, " \
                   "and a node group keeps the launch template it was created with"
    # A new launch template version rolls every node onto it, its instance type included
    # (instance_types.LAUNCH_TEMPLATES_PAGE): nodes of another type move with the template's version.
    in_place = (InPlace(("version", "launchTemplate.version", instance_types.NODE_TYPES), "update_version",
                        NODEGROUP_UPDATE_PAGE),
                InPlace(("scalingConfig", "labels", "taints"), "update", "EKS API reference, UpdateNodegroupConfig"))

    def __init__(self, key: str, document: Document | None = None, cluster: str | None = None,
                 types: tuple[str, ...] = ()):
        super().__init__(key, document, cluster)
        # The instance types the spec gives the group's nodes, wherever the documents carry them.
        self.types = types

    def _update_target(self) -> dict[str, str]:
        return {"name": self.cluster, "nodegroupName": self.key}

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        """What the document sets, with the group's own instance types as EKS holds them (none when the launch
        template carries the type), and the types its nodes run when one is not the spec's."""
        if self.document is None:
            return super().changes(ctx, observed)
        live = dict(observed.attributes)
        in_template = instance_types.template_type(ctx, {"id": live.get("launchTemplate.id"),
                                                         "version": live.get("launchTemplate.version")})
        live[instance_types.GROUP_TYPES] = instance_types.group_types(live, in_template)
        found = super().changes(ctx, replace(observed, attributes=live))
        running = instance_types.node_types(ctx, self.cluster, self.key)
        if self.types and instance_types.foreign_nodes(running, list(self.types)):
            found.append(AttributeChange(instance_types.NODE_TYPES, running, sorted(self.types),
                                         "EKS recycles every node onto the launch template's new version "
                                         f"({instance_types.LAUNCH_TEMPLATES_PAGE})"))
        return found

    def replacement_reason(self, changes: list[AttributeChange]) -> str | None:
        """Nodes of another type under a template version that already names the spec's type: no update EKS
        takes moves them (UpdateNodegroupConfig has no instanceTypes; the template's version is unchanged), so only
        a new node group does."""
        paths = {c.path for c in changes}
        if instance_types.NODE_TYPES in paths and "launchTemplate.version" not in paths:
            nodes = next(c for c in changes if c.path == instance_types.NODE_TYPES)
            return (f"its nodes run {', '.join(nodes.old)}, not the spec's {', '.join(nodes.new)}, and its launch "
                    "template version is the spec's: EKS API reference, UpdateNodegroupConfig takes no "
                    "instanceTypes")
        return super().replacement_reason(changes)

    def _describe(self, ctx: Context) -> dict[str, Any]:
        return ctx.client("eks").describe_nodegroup(clusterName=self.cluster, nodegroupName=self.key)["nodegroup"]

    def _outputs(self, item: dict[str, Any]) -> dict[str, Any]:
        scaling = item.get("scalingConfig") or {}
        prefix = f"eks_nodegroup.{self.key}"
        return {f"{prefix}.arn": item.get("nodegroupArn"),  # the budget guard's role names it (eks/guard.py)
                f"{prefix}.min": scaling.get("minSize"), f"{prefix}.max": scaling.get("maxSize"),
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
        types = self.document.body.get(instance_types.GROUP_TYPES)
        desired[instance_types.GROUP_TYPES] = sorted(types) if types else None
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

    def update_version(self, ctx: Context, observed: Observed, changes: list[AttributeChange],
                       token: str) -> Observed:
        """UpdateNodegroupVersion (NODEGROUP_UPDATE_PAGE): the nodes roll onto the cluster's Kubernetes version
        (the newest EKS-optimized image release of the node group's amiType for it) and the launch template's new
        version, in one rolling update of the same node group. A launch template that names its own image takes no
        ``version`` (the image carries it)."""
        body = ctx.resolve(self.document.body)
        paths = {c.path for c in changes}
        request: dict[str, Any] = {}
        if "launchTemplate.version" in paths:
            request["launchTemplate"] = {"id": body["launchTemplate"]["id"],
                                         "version": str(body["launchTemplate"]["version"])}
        if "version" in paths and body.get("amiType", "CUSTOM") != "CUSTOM":
            request["version"] = body["version"]
        try:
            answer = ctx.client("eks").update_nodegroup_version(clusterName=self.cluster, nodegroupName=self.key,
                                                                clientRequestToken=token, **request)
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":  # see update
                raise
            answer = {}
        self._started(answer, describe_version_change(changes))
        return Observed(observed.id, "UPDATING", "pending", observed.outputs)

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
        if any(p.startswith("nodeRepairConfig.") for p in paths):
            # UpdateNodegroupConfig takes the whole nodeRepairConfig (botocore's EKS model).
            request["nodeRepairConfig"] = body.get("nodeRepairConfig") or {"enabled": False}
        if any(p.startswith(TAGS_PATH) for p in paths):
            self._retag(ctx, observed, body.get("tags") or {})
            if not request:
                return self.read(ctx, observed.id) or observed
        if not request:
            raise UsageError(f"EKS cannot change {', '.join(sorted(paths))} of node group {self.key} in place")
        try:
            answer = ctx.client("eks").update_nodegroup_config(clusterName=self.cluster, nodegroupName=self.key,
                                                               clientRequestToken=token, **request)
        except ClientError as exc:
            # A re-run after a kill: the update with this token was sent; EKS may still be applying it.
            if error_code(exc) != "ResourceInUseException":
                raise
            answer = {}
        self._started(answer, "scaling, labels or taints")
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


# The Cluster Autoscaler's scale-from-zero tags (fmcluster.backends.eks.nodes.scale_from_zero): the only node group tags
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
