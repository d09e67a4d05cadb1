"""EKS managed node groups: CreateNodegroup, DescribeNodegroup, ListNodegroups, DeleteNodegroup,
UpdateNodegroupConfig, UpdateNodegroupVersion.

Rules (EKS API reference CreateNodegroup/UpdateNodegroupConfig; EKS User Guide "Create a managed node
group", "Customize managed nodes with launch templates", "Create a managed node group with Capacity
Blocks"): the cluster is ACTIVE; the name (at most 63 characters, a letter or digit first) is unique in the
cluster; the node role exists in IAM and is no cluster's role; subnets exist in the cluster's VPC (a Local Zone's
too: "Launch low-latency EKS clusters with AWS Local Zones" lists managed node groups among what EKS supports
there); ``minSize <= desiredSize <= maxSize`` (the model gives ``maxSize >= 1``); a
launch template is named by id or name (not both) and exists; instance types go in the template or the
node group, not both; ``diskSize`` and ``remoteAccess`` cannot be used with a launch template;
``CAPACITY_BLOCK`` needs a template with ``InstanceMarketOptions.MarketType: capacity-block`` and a
``CapacityReservationTarget``, and such a template needs ``CAPACITY_BLOCK``; an instance type sold only inside
UltraServers (p6e-gb200.36xlarge) needs a template whose target is an UltraServer Capacity Block of that type
("Use P6e-GB200 UltraServers with Amazon EKS"). Instances launch in
:mod:`.nodes`; node auto repair (``nodeRepairConfig``) is checked in :mod:`.node_repair`.

Service quotas at the call (:func:`quota_problem`): CreateNodegroup beyond "Managed node groups per cluster"
(``L-6D54EA21``) and a ``maxSize`` beyond "Nodes per managed node group" (``L-BD136A63``, on create and on
UpdateNodegroupConfig) are refused with ``ResourceLimitExceededException`` ("You have encountered a service limit
on the specified resource", EKS API CreateNodegroup errors; "Amazon EKS service quotas"), read from the Service
Quotas values the sandbox serves (lowered through ``POST /_fmcluster/quotas``). UpdateNodegroupVersion never goes
backwards: "You cannot roll back a node group to an earlier Kubernetes version or AMI version" (EKS API
UpdateNodegroupVersion).
"""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any

from fmcluster_sandbox import capacity_blocks, capacity_reservations, service_quotas
from fmcluster_sandbox.eks import amis, catalog, launch_user_data, node_repair
from fmcluster_sandbox.eks.errors import EksError, in_use, invalid, not_found
from fmcluster_sandbox.eks.nodes import NodeOperations

# "Create a managed node group": "can't be longer than 63 characters. It must start with letter or digit, but can
# also include hyphens and underscores for the remaining characters."
NODEGROUP_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,62}")
DEFAULT_INSTANCE_TYPE = "t3.medium"  # CreateNodegroup instanceTypes: "the default is t3.medium"
DEFAULT_SCALING = {"minSize": 1, "maxSize": 2, "desiredSize": 2}  # the API's defaults for scalingConfig
GROUPS_PER_CLUSTER = "L-6D54EA21"  # Managed node groups per cluster
NODES_PER_GROUP = "L-BD136A63"  # Nodes per managed node group


def quota_problem(groups_in_cluster: int | None, max_size: int, account: str, region: str) -> str | None:
    """Which EKS quota the call would exceed (None when it fits): one more node group in a cluster that holds
    ``groups_in_cluster`` (None: not a create), or a group of ``max_size`` nodes."""
    if groups_in_cluster is not None:
        allowed = service_quotas.quota_value("eks", GROUPS_PER_CLUSTER, account, region)
        if groups_in_cluster + 1 > allowed:
            return (f"The cluster already has {groups_in_cluster} managed node groups: the quota Managed node groups "
                    f"per cluster ({GROUPS_PER_CLUSTER}) is {allowed:g}")
    allowed = service_quotas.quota_value("eks", NODES_PER_GROUP, account, region)
    if max_size > allowed:
        return (f"maxSize {max_size} exceeds the quota Nodes per managed node group ({NODES_PER_GROUP}), "
                f"{allowed:g}")
    return None


def version_backwards(current: str, wanted: str) -> bool:
    """Whether moving a node group from ``current`` to ``wanted`` would roll it back to an earlier minor."""
    return _minor(wanted) < _minor(current)


class NodegroupOperations(NodeOperations):
    def _nodegroup(self, cluster: Any, name: str) -> Any:
        ng = self._get("nodegroup", cluster.account, cluster.region, cluster.name, name)
        if ng is None:
            raise not_found(f"No node group found for name: {name}.", clusterName=cluster.name, nodegroupName=name)
        return ng

    @staticmethod
    def _check_scaling(scaling: dict[str, int], cluster: str, name: str) -> None:
        low, high, want = scaling["minSize"], scaling["maxSize"], scaling["desiredSize"]
        if low > high:
            raise invalid("Minimum capacity cannot be greater than maximum capacity", clusterName=cluster,
                          nodegroupName=name)
        if not low <= want <= high:
            raise invalid(f"Desired capacity {want} must be between minimum capacity {low} and maximum capacity "
                          f"{high}", clusterName=cluster, nodegroupName=name)

    def _template_data(self, spec: dict | None, account: str, region: str, cluster: str, name: str) -> dict | None:
        if not spec:
            return None
        if bool(spec.get("id")) == bool(spec.get("name")):
            raise invalid("Either launch template ID or name must be specified, but not both", clusterName=cluster,
                          nodegroupName=name)
        ec2 = self._ec2(account, region)
        arg = {"LaunchTemplateId": spec["id"]} if spec.get("id") else {"LaunchTemplateName": spec["name"]}
        if spec.get("version"):
            arg["Version"] = spec["version"]
        try:
            version = ec2._get_template_from_args(arg)
        except Exception:  # noqa: BLE001 - moto's not-found errors
            raise invalid(f"Launch template {spec.get('id') or spec.get('name')} version "
                          f"{spec.get('version') or '$Default'} does not exist", clusterName=cluster,
                          nodegroupName=name) from None
        return {"id": version.template.id, "name": version.template.name, "version": str(version.number),
                "data": copy.deepcopy(version.data)}

    def _op_create_nodegroup(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._active_cluster(p["clusterName"], account, region)
        name = p["nodegroupName"]
        where = {"clusterName": cluster.name, "nodegroupName": name}
        if self._get("nodegroup", account, region, cluster.name, name) is not None:
            raise in_use(f"NodeGroup already exists with name {name} and cluster name {cluster.name}", **where)
        if not NODEGROUP_NAME.fullmatch(name):
            raise invalid("The node group name can't be longer than 63 characters and must start with a letter or "
                          "digit, followed by letters, digits, hyphens and underscores", **where)
        if self._role(p["nodeRole"], account) is None:
            raise invalid(f"Role with arn: {p['nodeRole']}, does not exist", **where)
        if any(c.spec["roleArn"] == p["nodeRole"] for c in self._all("cluster", account, region)):
            raise invalid("The node role cannot be the role of a cluster", **where)
        ec2 = self._ec2(account, region)
        vpc = cluster.spec["resourcesVpcConfig"]["vpcId"]
        for subnet_id in p["subnets"]:
            try:
                subnet = ec2.get_subnet(subnet_id)
            except Exception:  # noqa: BLE001
                raise invalid(f"The subnet ID '{subnet_id}' does not exist", **where) from None
            if subnet.vpc_id != vpc:
                raise invalid(f"Subnet {subnet_id} is not in the cluster's VPC {vpc}", **where)
        if not p["subnets"]:
            raise invalid("Subnets are required", **where)
        scaling = {**DEFAULT_SCALING, **(p.get("scalingConfig") or {})}
        if "scalingConfig" in p and "desiredSize" not in p["scalingConfig"]:
            scaling["desiredSize"] = scaling["minSize"]
        self._check_scaling(scaling, cluster.name, name)
        limit = quota_problem(len(self._all("nodegroup", account, region, cluster.name)), scaling["maxSize"],
                              account, region)
        if limit:
            raise EksError("ResourceLimitExceededException", limit, **where)
        template = self._template_data(p.get("launchTemplate"), account, region, cluster.name, name)
        data = (template or {}).get("data") or {}
        if template and (p.get("diskSize") is not None or p.get("remoteAccess")):
            raise invalid("Disk size and remote access configuration cannot be specified with a launch template",
                          **where)
        if data.get("InstanceType") and p.get("instanceTypes"):
            raise invalid("Instance types cannot be specified both in the launch template and in the node group",
                          **where)
        user_data_problem = launch_user_data.problem(data)
        if user_data_problem:
            raise invalid(user_data_problem, **where)
        if data.get("IamInstanceProfile"):
            raise invalid("Launch template should not specify an instance profile: EKS uses the node role", **where)
        capacity = p.get("capacityType") or "ON_DEMAND"
        self._check_capacity(capacity, data, where)
        self._check_ultraserver(data, p.get("instanceTypes") or [], account, region, where)
        instance_types = ([data["InstanceType"]] if data.get("InstanceType")
                          else list(p.get("instanceTypes") or [DEFAULT_INSTANCE_TYPE]))
        if data.get("ImageId") and p.get("amiType"):
            raise invalid("amiType cannot be specified with a launch template that names a custom AMI", **where)
        ami_type = "CUSTOM" if data.get("ImageId") else (p.get("amiType") or _default_ami_type(instance_types[0]))
        self._check_tags(p.get("tags"))
        arn = f"arn:aws:eks:{region}:{account}:nodegroup/{cluster.name}/{name}/{uuid.uuid4()}"
        spec: dict[str, Any] = {
            "version": p.get("version") or cluster.spec["version"], "capacityType": capacity,
            "scalingConfig": scaling, "instanceTypes": instance_types, "subnets": list(p["subnets"]),
            "amiType": ami_type,
            "nodeRole": p["nodeRole"], "labels": dict(p.get("labels") or {}),
            "taints": [dict(t) for t in p.get("taints") or []],
            "updateConfig": dict(p.get("updateConfig") or {"maxUnavailable": 1}),
            "asg": f"eks-{name}-{arn.rsplit('/', 1)[-1]}",
        }
        repair = node_repair.checked(p.get("nodeRepairConfig"), where)
        if repair is not None:
            spec["nodeRepairConfig"] = repair
        if not template:
            spec["diskSize"] = p.get("diskSize") or 20
        else:
            spec["launchTemplate"] = {k: template[k] for k in ("id", "name", "version")}
        if spec["version"] != cluster.spec["version"]:
            raise invalid(f"Node group version {spec['version']} must match the cluster version "
                          f"{cluster.spec['version']}", **where)
        ng = self._new("nodegroup", name, arn, account, region, cluster.name, spec, p.get("tags"))
        self._node_role_entry(cluster, p["nodeRole"])
        return {"nodegroup": self._nodegroup_view(ng)}

    def _node_role_entry(self, cluster: Any, role: str) -> None:
        """With access entries enabled, EKS creates an ``EC2_LINUX`` access entry for a managed node group's
        role (group ``system:nodes``, user ``system:node:{{EC2PrivateDNSName}}``) unless one exists; it stays
        after the node group goes (it leaves with the cluster)."""
        if cluster.spec["accessConfig"]["authenticationMode"] == "CONFIG_MAP":
            return
        if self._get("access_entry", cluster.account, cluster.region, cluster.name, role) is None:
            entry = self._new_entry(cluster, role, "EC2_LINUX", ["system:nodes"],
                                    "system:node:{{EC2PrivateDNSName}}", None)
            entry.spec["kubernetesGroups"] = ["system:nodes"]

    @staticmethod
    def _check_capacity(capacity: str, data: dict, where: dict[str, str]) -> None:
        market = (data.get("InstanceMarketOptions") or {}).get("MarketType")
        target = (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
        if capacity == "CAPACITY_BLOCK":
            if not data.get("InstanceType"):
                raise invalid("capacityType CAPACITY_BLOCK needs a launch template that names its InstanceType",
                              **where)
            if market != "capacity-block":
                raise invalid("capacityType CAPACITY_BLOCK needs a launch template with InstanceMarketOptions "
                              "MarketType capacity-block", **where)
            if not (target.get("CapacityReservationId") or target.get("CapacityReservationResourceGroupArn")):
                raise invalid("capacityType CAPACITY_BLOCK needs a launch template with a "
                              "CapacityReservationTarget", **where)
        elif market == "capacity-block":
            raise invalid(f"A launch template with MarketType capacity-block needs capacityType CAPACITY_BLOCK, "
                          f"not {capacity}", **where)
        if capacity == "SPOT" and market == "spot":
            raise invalid("Launch template InstanceMarketOptions cannot be set for a SPOT node group: EKS sets "
                          "them", **where)

    @staticmethod
    def _check_ultraserver(data: dict, instance_types: list[str], account: str, region: str,
                           where: dict[str, str]) -> None:
        """P6e-GB200 instances exist only inside UltraServers, sold as Capacity Blocks ("Use P6e-GB200 UltraServers
        with Amazon EKS"): their node group runs on such a block, of its type, or not at all."""
        wanted = [t for t in ([data["InstanceType"]] if data.get("InstanceType") else instance_types)
                  if t in capacity_blocks.ULTRASERVER_ONLY]
        if not wanted:
            return
        target = (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
        block = capacity_reservations.REGISTRY.get(target.get("CapacityReservationId") or "", account, region)
        if block is None or block.ultraserver is None or block.instance_type != wanted[0] or len(wanted) > 1:
            raise invalid(f"{wanted[0]} is sold only inside EC2 UltraServers: its node group needs a launch template "
                          "that names it and targets an UltraServer Capacity Block of it (CapacityReservationTarget "
                          "CapacityReservationId)", **where)

    def _op_describe_nodegroup(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        return {"nodegroup": self._nodegroup_view(self._nodegroup(cluster, p["nodegroupName"]))}

    def _op_list_nodegroups(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        return self._page([n.name for n in self._all("nodegroup", account, region, cluster.name)], p, "nodegroups")

    def _op_delete_nodegroup(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        ng = self._nodegroup(cluster, p["nodegroupName"])
        if ng.status in ("CREATING", "UPDATING", "DELETING"):
            raise in_use(f"Nodegroup {ng.name} is {ng.status}; it cannot be deleted now.", clusterName=cluster.name,
                         nodegroupName=ng.name)
        self._start(ng, "DELETING")
        return {"nodegroup": self._nodegroup_view(ng)}

    def _op_update_nodegroup_config(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["clusterName"], account, region)
        ng = self._nodegroup(cluster, p["nodegroupName"])
        where = {"clusterName": cluster.name, "nodegroupName": ng.name}
        if ng.status not in ("ACTIVE", "DEGRADED"):
            raise in_use(f"Nodegroup {ng.name} is {ng.status}; an update cannot start now.", **where)
        params: list[dict[str, str]] = []
        scaling = dict(ng.spec["scalingConfig"])
        for key, kind in (("minSize", "MinSize"), ("maxSize", "MaxSize"), ("desiredSize", "DesiredSize")):
            if key in (p.get("scalingConfig") or {}):
                scaling[key] = p["scalingConfig"][key]
                params.append({"type": kind, "value": str(scaling[key])})
        self._check_scaling(scaling, cluster.name, ng.name)
        limit = quota_problem(None, scaling["maxSize"], account, region)
        if limit:
            raise EksError("ResourceLimitExceededException", limit, **where)
        labels = dict(ng.spec["labels"])
        change = p.get("labels") or {}
        labels.update(change.get("addOrUpdateLabels") or {})
        for key in change.get("removeLabels") or []:
            labels.pop(key, None)
        if change.get("addOrUpdateLabels"):
            params.append({"type": "LabelsToAdd", "value": str(change["addOrUpdateLabels"])})
        if change.get("removeLabels"):
            params.append({"type": "LabelsToRemove", "value": str(change["removeLabels"])})
        taints = [dict(t) for t in ng.spec["taints"]]
        change = p.get("taints") or {}
        for taint in change.get("removeTaints") or []:
            taints = [t for t in taints if (t.get("key"), t.get("effect")) != (taint.get("key"), taint.get("effect"))]
        for taint in change.get("addOrUpdateTaints") or []:
            taints = [t for t in taints if (t.get("key"), t.get("effect")) != (taint.get("key"), taint.get("effect"))]
            taints.append(dict(taint))
        if change.get("addOrUpdateTaints"):
            params.append({"type": "TaintsToAdd", "value": str(change["addOrUpdateTaints"])})
        if change.get("removeTaints"):
            params.append({"type": "TaintsToRemove", "value": str(change["removeTaints"])})
        if p.get("updateConfig"):
            ng.spec["updateConfig"] = dict(p["updateConfig"])
            params.append({"type": "MaxUnavailable", "value": str(p["updateConfig"])})
        repair = node_repair.checked(p.get("nodeRepairConfig"), where)
        if repair is not None:
            ng.spec["nodeRepairConfig"] = repair
            params.append({"type": "NodeRepairConfig", "value": str(repair)})
        if not params:
            raise invalid("No changes needed", **where)
        ng.spec.update(scalingConfig=scaling, labels=labels, taints=taints)
        update = self._new_update(ng, "ConfigUpdate", params)
        self._start(ng, "UPDATING")
        return {"update": dict(update)}

    def _op_update_nodegroup_version(self, p: dict, region: str, account: str, caller: str) -> dict:
        """UpdateNodegroupVersion (EKS API; EKS User Guide "Update a managed node group for your cluster"): from
        ACTIVE or DEGRADED; the Kubernetes version at most the cluster's (the default is the cluster's); a
        launch template only for a group created with one, the same template by id or name, at a version that
        exists; no ``version`` or ``releaseVersion`` with a template that names its own AMI. The group is UPDATING
        for the latency ``eks.nodegroup``, then its nodes are replaced by nodes of the new image and template
        (a rolling update: the same node group, its ARN unchanged)."""
        cluster = self._cluster(p["clusterName"], account, region)
        ng = self._nodegroup(cluster, p["nodegroupName"])
        where = {"clusterName": cluster.name, "nodegroupName": ng.name}
        if ng.status not in ("ACTIVE", "DEGRADED"):
            raise in_use(f"Nodegroup {ng.name} is {ng.status}; an update cannot start now.", **where)
        params: list[dict[str, str]] = []
        template = None
        if p.get("launchTemplate"):
            current = ng.spec.get("launchTemplate")
            if not current:
                raise invalid("A launch template can only be given for a node group created with one", **where)
            wanted = p["launchTemplate"]
            if (wanted.get("id") and wanted["id"] != current["id"]) or \
                    (wanted.get("name") and wanted["name"] != current["name"]):
                raise invalid(f"The launch template must be the one the node group was created with "
                              f"({current['id']})", **where)
            template = self._template_data(wanted, account, region, cluster.name, ng.name)
            params.append({"type": "LaunchTemplateName", "value": template["name"]})
            params.append({"type": "LaunchTemplateVersion", "value": template["version"]})
        data = (template or {}).get("data") or {}
        custom = bool(data.get("ImageId")) or ng.spec["amiType"] == "CUSTOM"
        if custom and (p.get("version") or p.get("releaseVersion")):
            raise invalid("version and releaseVersion cannot be given for a node group whose launch template names "
                          "a custom AMI", **where)
        version = p.get("version") or (ng.spec["version"] if custom else cluster.spec["version"])
        if _minor(version) > _minor(cluster.spec["version"]):
            raise invalid(f"Nodegroup version {version} cannot be newer than the cluster's {cluster.spec['version']}",
                          **where)
        if version_backwards(ng.spec["version"], version):
            raise invalid(f"Nodegroup version {version} is earlier than its current {ng.spec['version']}: a node "
                          "group cannot be rolled back to an earlier Kubernetes version", **where)
        if not custom and amis.for_ami_type(region, version, ng.spec["amiType"]) is None:
            raise invalid(f"Requested Nodegroup release version for {version} is invalid. Allowed release version "
                          f"are for {', '.join(catalog.KUBERNETES_VERSIONS)}", **where)
        params.insert(0, {"type": "Version", "value": version})
        if p.get("releaseVersion"):
            params.append({"type": "ReleaseVersion", "value": p["releaseVersion"]})
        # The group's nodes follow the type of the template version it moves to (nodes.py).
        ng.spec["_pending"] = {"version": version, "instanceTypes": [data["InstanceType"]] if data.get("InstanceType")
                               else None,
                               "launchTemplate": {k: template[k] for k in ("id", "name", "version")} if template
                               else None}
        update = self._new_update(ng, "VersionUpdate", params)
        self._start(ng, "UPDATING")
        return {"update": dict(update)}

    def _nodegroup_updated(self, ng: Any) -> None:
        """The end of a version update: the new version and template take effect, and every node is replaced by
        one launched from them (EKS drains and replaces the nodes of a managed node group)."""
        pending = ng.spec.pop("_pending", None)
        if not pending:
            return
        ng.spec["version"] = pending["version"]
        if pending["launchTemplate"]:
            ng.spec["launchTemplate"] = pending["launchTemplate"]
        if pending.get("instanceTypes"):
            ng.spec["instanceTypes"] = pending["instanceTypes"]
        self._terminate(ng, list(ng.instances))

    def _nodegroup_view(self, ng: Any) -> dict[str, Any]:
        spec = ng.spec
        out: dict[str, Any] = {
            "nodegroupName": ng.name, "nodegroupArn": ng.arn, "clusterName": ng.cluster, "version": spec["version"],
            "createdAt": ng.created_at, "modifiedAt": ng.modified_at, "status": ng.status,
            "capacityType": spec["capacityType"], "scalingConfig": dict(spec["scalingConfig"]),
            "instanceTypes": list(spec["instanceTypes"]), "subnets": list(spec["subnets"]), "amiType": spec["amiType"],
            "nodeRole": spec["nodeRole"], "labels": dict(spec["labels"]), "taints": [dict(t) for t in spec["taints"]],
            "resources": {"autoScalingGroups": [{"name": spec["asg"]}]},
            "health": {"issues": copy.deepcopy(ng.issues)}, "updateConfig": dict(spec["updateConfig"]),
            "tags": dict(ng.tags),
        }
        if "diskSize" in spec:
            out["diskSize"] = spec["diskSize"]
        if "launchTemplate" in spec:
            out["launchTemplate"] = dict(spec["launchTemplate"])
        if "nodeRepairConfig" in spec:
            out["nodeRepairConfig"] = copy.deepcopy(spec["nodeRepairConfig"])
        return out


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def _default_ami_type(instance_type: str) -> str:
    """The AL2023 standard image of the instance type's architecture (CreateNodegroup ``amiType``: EKS picks
    an Amazon Linux 2023 image when none is given for Kubernetes 1.30 and later)."""
    from fmcluster_sandbox import instance_catalog

    facts = instance_catalog.instance_type(instance_type) or {}
    return "AL2023_ARM_64_STANDARD" if "arm64" in instance_catalog.architectures(facts) else "AL2023_x86_64_STANDARD"


__all__ = ["EksError", "NodegroupOperations"]
