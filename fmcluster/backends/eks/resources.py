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
from dataclasses import replace
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code
from fmcluster.aws.ownership import require_ours
from fmcluster.backends.eks.nodes import instance_types
from fmcluster.engine import AttributeChange, Context, InPlace, Observed, Resource, flatten, reads
from fmcluster.errors import UsageError
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
        self._started(answer, _describe_version_change(changes))
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


class EksAddon(EksResource):
    kind = "eks_addon"
    what = "add-on"
    snapshot_kind = "eks.Addon"
    teardown_rank = 35
    # UpdateAddon changes the version, configuration and service-account role of an add-on: nothing of one needs
    # a new add-on.
    in_place = (InPlace(("addonVersion", "configurationValues", "serviceAccountRoleArn"), "update",
                        ADDON_UPDATE_PAGE),)

    def __init__(self, key: str, document: Document | None = None, cluster: str | None = None,
                 kubernetes_version: str | None = None):
        super().__init__(key, document, cluster)
        # The Kubernetes version the spec asks for: the add-on's version must be one EKS offers for it.
        self.kubernetes_version = kubernetes_version

    def _update_target(self) -> dict[str, str]:
        return {"name": self.cluster, "addonName": self.key}

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        """What the document sets, and the add-on's version when EKS does not list it as compatible with the
        spec's Kubernetes version (DescribeAddonVersions): it moves to EKS's default version for that Kubernetes
        version, as ADDON_UPDATE_PAGE does after a cluster update. A version still offered stays (no churn)."""
        found = super().changes(ctx, observed)
        live = observed.attributes.get("addonVersion")
        if self.document is None or not self.kubernetes_version or not live:
            return found
        offered, default = addon_versions(ctx, self.key, self.kubernetes_version)
        if offered and live not in offered and default:
            found.append(AttributeChange("addonVersion", live, default,
                                         f"EKS offers {live} no longer for Kubernetes {self.kubernetes_version}"))
        return found

    def _describe(self, ctx: Context) -> dict[str, Any]:
        return ctx.client("eks").describe_addon(clusterName=self.cluster, addonName=self.key)["addon"]

    def create(self, ctx: Context, token: str) -> Observed:
        addon = ctx.client("eks").create_addon(clientRequestToken=token, **ctx.resolve(self.document.body))["addon"]
        return Observed(addon.get("addonArn"), addon["status"], PHASES.get(addon["status"], "pending"))

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        """UpdateAddon (ADDON_UPDATE_PAGE) changes an add-on's version and configurationValues in place (where its
        pods run); an empty string takes the configuration back to the add-on's defaults."""
        wanted = {c.path: c.new for c in changes}
        body = ctx.resolve(self.document.body)
        request: dict[str, Any] = {}
        if "addonVersion" in wanted:
            request["addonVersion"] = wanted["addonVersion"]
        if "configurationValues" in wanted:
            request["configurationValues"] = body.get("configurationValues") or ""
        if "serviceAccountRoleArn" in wanted:
            request["serviceAccountRoleArn"] = body.get("serviceAccountRoleArn") or ""
        answer = ctx.client("eks").update_addon(clusterName=self.cluster, addonName=self.key,
                                                clientRequestToken=token, resolveConflicts="OVERWRITE", **request)
        self._started(answer, ", ".join(f"{c.path} → {c.new}" for c in changes if c.path != "configurationValues")
                      or "configuration")
        return Observed(observed.id, "UPDATING", "pending")

    def _send_delete(self, ctx: Context) -> None:
        ctx.client("eks").delete_addon(clusterName=self.cluster, addonName=self.key)


def minor(version: str) -> int:
    """The minor number of a Kubernetes version ("1.35" → 35)."""
    return int(str(version).split(".")[1])


def versions_between(current: str, wanted: str) -> list[str]:
    """Each minor version from the one after ``current`` up to ``wanted``: the way EKS takes a cluster."""
    major = str(wanted).split(".")[0]
    return [f"{major}.{m}" for m in range(minor(current) + 1, minor(wanted) + 1)]


def upgrade_note(old: Any, new: Any) -> str:
    """What a Kubernetes version change does, for the plan (CLUSTER_VERSION_PAGE)."""
    if not isinstance(old, str) or not isinstance(new, str) or "." not in old or "." not in new:
        return ""
    if minor(new) < minor(old):
        return f"EKS cannot downgrade a cluster ({CLUSTER_VERSION_PAGE})"
    steps = versions_between(old, new)
    return ("one minor version at a time: " + " → ".join([old, *steps]) + "; control plane, then node groups, "
            "then add-ons, at each") if len(steps) > 1 else ""


def _describe_version_change(changes: list[AttributeChange]) -> str:
    return ", ".join(f"{'Kubernetes' if c.path == 'version' else 'launch template version'} {c.old} → {c.new}"
                     for c in changes)


def addon_versions(ctx: Context, addon: str, kubernetes_version: str) -> tuple[list[str], str | None]:
    """The add-on versions EKS offers for a Kubernetes version, and its default one (DescribeAddonVersions); a
    read-only pass reads them once."""
    def fetch() -> tuple[list[str], str | None]:
        offered: list[str] = []
        default = None
        for page in ctx.client("eks").get_paginator("describe_addon_versions").paginate(
                addonName=addon, kubernetesVersion=kubernetes_version):
            for info in page.get("addons") or []:
                for version in info.get("addonVersions") or []:
                    offered.append(version["addonVersion"])
                    if any(c.get("defaultVersion") and c.get("clusterVersion") == kubernetes_version
                           for c in version.get("compatibilities") or []):
                        default = version["addonVersion"]
        return offered, default or (offered[0] if offered else None)

    return reads.once(ctx, "eks.AddonVersions", f"{addon}:{kubernetes_version}", fetch)
