"""An EKS managed add-on as an engine resource: its version and configuration change in place (UpdateAddon)."""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.resources import ADDON_UPDATE_PAGE, PHASES, EksResource
from fmcluster.engine import AttributeChange, Context, InPlace, Observed, reads
from fmcluster.render.documents import Document


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
