"""EKS managed add-ons: CreateAddon, DescribeAddon, ListAddons, DeleteAddon, DescribeAddonVersions.

The add-ons and versions are those of :mod:`.catalog` (EKS User Guide tables). Rules (EKS API reference,
"Create an Amazon EKS add-on"): the cluster is ACTIVE; one add-on of a name per cluster; the version, when
given, is one offered for the cluster's Kubernetes version (otherwise the newest offered is used); an IAM
role for the add-on's service account exists. States CREATING -> ACTIVE, DELETING -> gone (latency
``eks.addon``). What the add-on would run in the cluster (its pods) is the Kubernetes API's business.
"""

from __future__ import annotations

from typing import Any

from fmcluster_sandbox.eks import catalog
from fmcluster_sandbox.eks.errors import EksError, in_use, invalid, not_found


class AddonOperations:
    def _addon(self, cluster: Any, name: str) -> Any:
        addon = self._get("addon", cluster.account, cluster.region, cluster.name, name)
        if addon is None:
            raise not_found(f"No addon: {name} found in cluster: {cluster.name}", clusterName=cluster.name,
                            addonName=name)
        return addon

    def _op_create_addon(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._active_cluster(p["clusterName"], account, region)
        name = p["addonName"]
        kube = cluster.spec["version"]
        offered = catalog.addon_versions(name, kube)
        if not offered:
            raise invalid(f"Addon {name} specified is not supported in {kube} kubernetes version",
                          clusterName=cluster.name, addonName=name)
        if self._get("addon", account, region, cluster.name, name) is not None:
            raise in_use(f"Addon already exists: {name}", clusterName=cluster.name, addonName=name)
        version = p.get("addonVersion") or offered[0]
        if version not in offered:
            raise invalid(f"Addon version specified is not supported: {name} {version} on Kubernetes {kube}",
                          clusterName=cluster.name, addonName=name)
        role = p.get("serviceAccountRoleArn")
        if role and self._role(role, account) is None:
            raise invalid(f"Role with arn: {role}, does not exist", clusterName=cluster.name, addonName=name)
        self._check_tags(p.get("tags"))
        arn = f"arn:aws:eks:{region}:{account}:addon/{cluster.name}/{name}/{_uid()}"
        spec = {"addonVersion": version, "serviceAccountRoleArn": role,
                "configurationValues": p.get("configurationValues"),
                "podIdentityAssociations": [], "resolveConflicts": p.get("resolveConflicts")}
        addon = self._new("addon", name, arn, account, region, cluster.name, spec, p.get("tags"))
        return {"addon": self._addon_view(addon)}

    def _op_describe_addon(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        return {"addon": self._addon_view(self._addon(cluster, p["addonName"]))}

    def _op_list_addons(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        return self._page([a.name for a in self._all("addon", account, region, cluster.name)], p, "addons")

    def _op_delete_addon(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        addon = self._addon(cluster, p["addonName"])
        if addon.status in ("CREATING", "UPDATING", "DELETING"):
            raise in_use(f"Addon {addon.name} is {addon.status}", clusterName=cluster.name, addonName=addon.name)
        self._start(addon, "DELETING")
        return {"addon": self._addon_view(addon)}

    def _op_update_addon(self, p: dict, region: str, account: str, caller: str) -> dict:
        """UpdateAddon (EKS API; EKS User Guide "Update an Amazon EKS add-on"): the cluster ACTIVE, the add-on
        ACTIVE or DEGRADED; a version offered for the cluster's Kubernetes version; a service-account role that
        exists. The add-on is UPDATING for the latency ``eks.addon``; the new values show once it ends.
        ``configurationValues`` are stored unchecked (the add-ons' schemas are not in the sandbox)."""
        cluster = self._active_cluster(p["clusterName"], account, region)
        addon = self._addon(cluster, p["addonName"])
        where = {"clusterName": cluster.name, "addonName": addon.name}
        if addon.status not in ("ACTIVE", "DEGRADED"):
            raise in_use(f"Addon {addon.name} is {addon.status}; an update cannot start now.", **where)
        kube = cluster.spec["version"]
        params: list[dict[str, str]] = []
        pending: dict[str, Any] = {}
        if p.get("addonVersion"):
            if p["addonVersion"] not in catalog.addon_versions(addon.name, kube):
                raise invalid(f"Addon version specified is not supported: {addon.name} {p['addonVersion']} on "
                              f"Kubernetes {kube}", **where)
            pending["addonVersion"] = p["addonVersion"]
            params.append({"type": "AddonVersion", "value": p["addonVersion"]})
        if "serviceAccountRoleArn" in p:
            role = p["serviceAccountRoleArn"]
            if role and self._role(role, account) is None:
                raise invalid(f"Role with arn: {role}, does not exist", **where)
            pending["serviceAccountRoleArn"] = role or None
            params.append({"type": "ServiceAccountRoleArn", "value": role})
        if "configurationValues" in p:
            pending["configurationValues"] = p["configurationValues"] or None
            params.append({"type": "ConfigurationValues", "value": p["configurationValues"]})
        if p.get("resolveConflicts"):
            params.append({"type": "ResolveConflicts", "value": p["resolveConflicts"]})
        addon.spec["_pending"] = pending
        update = self._new_update(addon, "AddonUpdate", params)
        self._start(addon, "UPDATING")
        return {"update": dict(update)}

    @staticmethod
    def _addon_updated(addon: Any) -> None:
        addon.spec.update(addon.spec.pop("_pending", None) or {})

    def _op_describe_addon_versions(self, p: dict, region: str, account: str, caller: str) -> dict:
        kube = p.get("kubernetesVersion")
        names = [p["addonName"]] if p.get("addonName") else sorted(catalog.ADDON_VERSIONS)
        types = set(p.get("types") or [])
        publishers = set(p.get("publishers") or [])
        owners = set(p.get("owners") or [])
        infos = []
        for name in names:
            if (types and catalog.ADDON_TYPE.get(name) not in types) or (publishers and "eks" not in publishers) \
                    or (owners and "aws" not in owners):
                continue
            versions = []
            for version, kubes in catalog.ADDON_VERSIONS.get(name, []):
                listed = [k for k in kubes if kube is None or k == kube]
                if not listed:
                    continue
                compat = [{"clusterVersion": k, "platformVersions": ["*"],
                           "defaultVersion": catalog.addon_versions(name, k)[0] == version} for k in listed]
                versions.append({"addonVersion": version, "architecture": ["amd64", "arm64"],
                                 "computeTypes": ["ec2"], "compatibilities": compat, "requiresConfiguration": False,
                                 "requiresIamPermissions": name in ("vpc-cni", "aws-fsx-csi-driver")})
            if versions:
                infos.append({"addonName": name, "type": catalog.ADDON_TYPE[name], "addonVersions": versions,
                              "publisher": "eks", "owner": "aws"})
        return self._page(infos, p, "addons")

    @staticmethod
    def _addon_view(addon: Any) -> dict[str, Any]:
        spec = addon.spec
        out = {"addonName": addon.name, "clusterName": addon.cluster, "status": addon.status,
               "addonVersion": spec["addonVersion"], "health": {"issues": list(spec.get("issues") or [])},
               "addonArn": addon.arn,
               "createdAt": addon.created_at, "modifiedAt": addon.modified_at, "tags": dict(addon.tags),
               "publisher": "eks", "owner": "aws", "podIdentityAssociations": []}
        if spec.get("serviceAccountRoleArn"):
            out["serviceAccountRoleArn"] = spec["serviceAccountRoleArn"]
        if spec.get("configurationValues"):
            out["configurationValues"] = spec["configurationValues"]
        return out


def _uid() -> str:
    import uuid

    return str(uuid.uuid4())


__all__ = ["AddonOperations", "EksError"]
