"""PCS compute node groups: Create, Get, List, Update and Delete.

References are checked as PCS checks them (subnets and security groups in the cluster's VPC, the launch
template and its version, an instance profile whose role is named ``AWSPCS…`` or has path ``/aws-pcs/``),
then the rules of :mod:`.node_group_rules`. Limits: 10 node groups per cluster, and the cluster's size caps
the sum of their maxInstanceCount (SMALL 32, MEDIUM 512, LARGE 2048; "Cluster size in AWS PCS"). An update
that changes what PCS launches marks the group's instances for replacement ("Updating an AWS PCS compute
node group": "AWS PCS replaces existing instances in the node group after a node group update operation").
"""

from __future__ import annotations

import copy
from typing import Any

from fmcluster_sandbox.pcs import node_group_rules as rules
from fmcluster_sandbox.pcs import settings
from fmcluster_sandbox.pcs.errors import PcsError, conflict, field_error, quota, validation

SIZE_LIMITS = {"SMALL": 32, "MEDIUM": 512, "LARGE": 2048}
MAX_NODE_GROUPS = 10
NODE_GROUP_FIELDS = ("amiId", "securityGroupIds", "sshKeyName", "subnetIds", "purchaseOption", "launchTemplateMode",
                     "customLaunchTemplate", "iamInstanceProfileArn", "scalingConfiguration", "instanceConfigs",
                     "spotOptions", "slurmConfiguration", "nodeLifecycleActions", "instanceHealthChecks")
# Fields whose change alters the nodes themselves; subnets, Spot allocation and scaling do not
# ("Updates that don't impact the configuration of specific nodes don't affect running nodes").
REPLACING_FIELDS = ("amiId", "securityGroupIds", "sshKeyName", "launchTemplateMode", "customLaunchTemplate",
                    "iamInstanceProfileArn", "purchaseOption", "slurmConfiguration", "nodeLifecycleActions",
                    "instanceHealthChecks")


def check_new_member(cluster: Any, siblings: list[Any], name: str, kind: str, label: str, plural: str, limit: int,
                     quota_code: str) -> None:
    """A cluster's node groups and queues: names are unique within it, and PCS caps how many it holds."""
    for other in siblings:
        if other.name == name:
            raise conflict(kind, other.id, f"{label} {name} already exists")
    if len(siblings) >= limit:
        raise quota(f"Cluster {cluster.name} already has {limit} {plural}", "cluster", cluster.id, quota_code)


class NodeGroupOperations:
    def _active_cluster(self, ident: str, account: str, region: str, action: str) -> Any:
        cluster = self._cluster(ident, account, region)
        if cluster.status != "ACTIVE":
            raise conflict("cluster", cluster.id, f"Cannot {action} while cluster {cluster.name} is {cluster.status}")
        return cluster

    def _check_scaling(self, cluster: Any, scaling: dict, exclude: str | None) -> None:
        low, high = scaling["minInstanceCount"], scaling["maxInstanceCount"]
        if low > high:
            raise validation("minInstanceCount must not exceed maxInstanceCount",
                             [("scalingConfiguration.minInstanceCount", f"{low} > maxInstanceCount {high}")])
        limit = SIZE_LIMITS[cluster.spec["size"]]
        used = sum(r.spec["scalingConfiguration"]["maxInstanceCount"]
                   for r in self._all("compute_node_group", cluster.account, cluster.region, cluster.id)
                   if r.id != exclude)
        if used + high > limit:
            raise quota(f"Cluster {cluster.name} is {cluster.spec['size']} (at most {limit} instances); node groups "
                        f"already allow {used}, {high} more exceeds it", "cluster", cluster.id, "L-CLUSTER-SIZE")

    def _check_launch_template(self, template: dict, account: str, region: str) -> dict[str, Any]:
        ec2 = self._ec2(account, region)
        try:
            found = ec2.get_launch_template(template["id"])
        except Exception as exc:
            raise field_error("customLaunchTemplate.id", f"launch template {template['id']} not found") from exc
        try:
            return found.get_version(template["version"]).data
        except Exception as exc:
            raise field_error("customLaunchTemplate.version",
                              f"launch template {template['id']} has no version {template['version']}") from exc

    def _check_instance_profile(self, arn: str, account: str) -> None:
        if arn.split(":")[4] != account:
            raise PcsError("AccessDeniedException", f"Instance profile {arn} belongs to another account")
        try:
            profile = self._iam(account).get_instance_profile_by_arn(arn)
        except Exception as exc:
            raise field_error("iamInstanceProfileArn", f"instance profile {arn} not found") from exc
        roles = list(getattr(profile, "roles", []) or [])
        if not roles:
            raise field_error("iamInstanceProfileArn", f"instance profile {arn} has no role")
        if not (profile.path == "/aws-pcs/" or any(r.name.startswith("AWSPCS") or r.path == "/aws-pcs/"
                                                   for r in roles)):
            raise field_error("iamInstanceProfileArn", "the role's name must start with AWSPCS or its path be "
                                                       "/aws-pcs/")

    def _check_node_group(self, spec: dict, cluster: Any, account: str, region: str) -> None:
        vpc = cluster.spec.get("_vpc")
        self._check_subnets(spec["subnetIds"], "subnetIds", account, region, vpc)
        self._check_security_groups(spec.get("securityGroupIds") or [], "securityGroupIds", account, region,
                                    vpc or "")
        template = spec.get("customLaunchTemplate")
        data: dict[str, Any] = {}
        if spec.get("launchTemplateMode") == "MANAGED":
            if template:
                raise field_error("customLaunchTemplate", "customLaunchTemplate can't be set when "
                                                          "launchTemplateMode is MANAGED")
            missing = [f for f in ("amiId", "securityGroupIds") if not spec.get(f)]
            if missing:
                raise validation("MANAGED launch templates need amiId and securityGroupIds",
                                 [(f, "is required when launchTemplateMode is MANAGED") for f in missing])
        elif not template:
            raise field_error("customLaunchTemplate", "customLaunchTemplate is required unless "
                                                      "launchTemplateMode is MANAGED")
        else:
            data = self._check_launch_template(template, account, region)
        self._check_instance_profile(spec["iamInstanceProfileArn"], account)
        if spec.get("spotOptions") and spec.get("purchaseOption") != "SPOT":
            raise field_error("spotOptions", "spotOptions needs purchaseOption SPOT")
        facts = rules.check_instance_types(spec)
        rules.check_interfaces_and_groups(spec, data)
        rules.check_user_data(data)
        rules.check_spot_role(spec, self._iam(account))
        version = cluster.spec["scheduler"]["version"]
        rules.check_health_checks(spec, version, facts)
        settings.check_node_group(spec.get("slurmConfiguration"), version)
        rules.check_capacity(spec, data, account, region)

    def _op_create_compute_node_group(self, p: dict, region: str, account: str) -> dict:
        self._check_tags(p.get("tags"))
        cluster = self._active_cluster(p["clusterIdentifier"], account, region, "create a compute node group")
        name = p["computeNodeGroupName"]
        check_new_member(cluster, self._all("compute_node_group", account, region, cluster.id), name,
                         "compute_node_group", "Compute node group", "compute node groups", MAX_NODE_GROUPS,
                         "L-NODE-GROUPS-PER-CLUSTER")
        spec = {k: copy.deepcopy(p[k]) for k in NODE_GROUP_FIELDS if p.get(k) is not None}
        spec.setdefault("purchaseOption", "ONDEMAND")
        spec.setdefault("launchTemplateMode", "CUSTOM")
        self._check_scaling(cluster, spec["scalingConfiguration"], None)
        self._check_node_group(spec, cluster, account, region)
        res = self._new("compute_node_group", name, account, region, cluster.id, spec, p.get("tags"))
        return {"computeNodeGroup": self._view(res)}

    def _op_get_compute_node_group(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        res = self._find("compute_node_group", p["computeNodeGroupIdentifier"], account, region, cluster.id)
        return {"computeNodeGroup": self._view(res)}

    def _op_list_compute_node_groups(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        return self._page(self._all("compute_node_group", account, region, cluster.id), p, "computeNodeGroups")

    def _op_update_compute_node_group(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        res = self._find("compute_node_group", p["computeNodeGroupIdentifier"], account, region, cluster.id)
        self._require_active(res, "update")
        spec = copy.deepcopy(res.spec)
        for key in NODE_GROUP_FIELDS:
            if key in p and p[key] is not None:
                spec[key] = copy.deepcopy(p[key])
        for key in ("amiId", "sshKeyName"):
            if spec.get(key) == "":
                spec.pop(key)
        if spec.get("securityGroupIds") == []:
            spec.pop("securityGroupIds")
        if p.get("customLaunchTemplate") and "launchTemplateMode" not in p:
            spec["launchTemplateMode"] = "CUSTOM"
        if spec.get("launchTemplateMode") == "MANAGED":
            spec.pop("customLaunchTemplate", None)
        self._check_scaling(cluster, spec["scalingConfiguration"], res.id)
        self._check_node_group(spec, cluster, account, region)
        res.replace_instances = any(spec.get(k) != res.spec.get(k) for k in REPLACING_FIELDS)
        res.spec = spec
        self._start(res, "UPDATING")
        return {"computeNodeGroup": self._view(res)}

    def _op_delete_compute_node_group(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        res = self._find("compute_node_group", p["computeNodeGroupIdentifier"], account, region, cluster.id)
        self._require_deletable(res)
        users = [q for q in self._all("queue", account, region, cluster.id)
                 if any(c.get("computeNodeGroupId") == res.id for c in q.spec["computeNodeGroupConfigurations"])]
        if users:
            raise conflict("compute_node_group", res.id,
                           f"Compute node group {res.name} is used by queue(s) {', '.join(q.name for q in users)}")
        self._start(res, "DELETING")
        return {}
