"""EKS clusters: CreateCluster, DescribeCluster, ListClusters, DeleteCluster, UpdateClusterConfig.

Rules (EKS API reference and User Guide, "Create an Amazon EKS cluster", "View Amazon EKS networking
requirements for VPC and subnets"): the name is unique per account and Region; ``version`` is one EKS offers;
the cluster role exists in IAM; the subnets exist, share one VPC and lie in at least two Availability Zones;
security groups exist in that VPC. EKS creates a cluster security group (``eks-cluster-sg-<name>-<n>``,
tagged ``aws:eks:cluster-name`` and ``kubernetes.io/cluster/<name>: owned``) and deletes it with the
cluster. DeleteCluster is refused while managed node groups remain; add-ons and access entries go with the
cluster. Each cluster has its own endpoint on the sandbox (``<sandbox URL>/k8s/<name>``) and, as its
``certificateAuthority``, the sandbox's own TLS certificate (base64 PEM), so a client that trusts it can
verify the endpoint.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import random
import uuid
from typing import Any

from fmcluster_sandbox import local_zones
from fmcluster_sandbox.eks import catalog
from fmcluster_sandbox.eks.errors import EksError, in_use, invalid


class ClusterOperations:
    def _op_create_cluster(self, p: dict, region: str, account: str, caller: str) -> dict:
        name = p["name"]
        if self._get("cluster", account, region, None, name) is not None:
            raise in_use(f"Cluster already exists with name: {name}", clusterName=name)
        version = p.get("version") or catalog.DEFAULT_KUBERNETES_VERSION
        if catalog.support_on(version) is None:
            raise invalid(f"unsupported Kubernetes version {version}: EKS creates clusters at "
                          f"{', '.join(catalog.creatable())}", clusterName=name)
        if self._role(p["roleArn"], account) is None:
            raise invalid(f"Role with arn: {p['roleArn']}, does not exist", clusterName=name)
        self._check_tags(p.get("tags"))
        vpc = self._check_cluster_network(p["resourcesVpcConfig"], account, region, name)
        access = dict(p.get("accessConfig") or {})
        access.setdefault("authenticationMode", "CONFIG_MAP")
        access.setdefault("bootstrapClusterCreatorAdminPermissions", True)
        net = p["resourcesVpcConfig"]
        ident = uuid.uuid4()
        spec: dict[str, Any] = {
            "version": version,
            "roleArn": p["roleArn"],
            "resourcesVpcConfig": {
                "subnetIds": list(net.get("subnetIds") or []),
                "securityGroupIds": list(net.get("securityGroupIds") or []),
                "vpcId": vpc,
                "endpointPublicAccess": net.get("endpointPublicAccess", True),
                "endpointPrivateAccess": net.get("endpointPrivateAccess", False),
                "publicAccessCidrs": list(net.get("publicAccessCidrs") or ["0.0.0.0/0"]),
            },
            "kubernetesNetworkConfig": {
                "serviceIpv4Cidr": (p.get("kubernetesNetworkConfig") or {}).get("serviceIpv4Cidr", "10.100.0.0/16"),
                "ipFamily": (p.get("kubernetesNetworkConfig") or {}).get("ipFamily", "ipv4"),
            },
            "accessConfig": access,
            "id": str(ident),
            "oidc": f"https://oidc.eks.{region}.amazonaws.com/id/{ident.hex.upper()}",
        }
        if p.get("logging"):
            spec["logging"] = p["logging"]
        arn = f"arn:aws:eks:{region}:{account}:cluster/{name}"
        cluster = self._new("cluster", name, arn, account, region, None, spec, p.get("tags"))
        spec["resourcesVpcConfig"]["clusterSecurityGroupId"] = self._cluster_security_group(cluster, vpc)
        if access["bootstrapClusterCreatorAdminPermissions"]:
            self._bootstrap_creator(cluster, caller)
        return {"cluster": self._cluster_view(cluster)}

    def _check_cluster_network(self, net: dict, account: str, region: str, name: str) -> str:
        ec2 = self._ec2(account, region)
        subnets = []
        for subnet_id in net.get("subnetIds") or []:
            try:
                subnets.append(ec2.get_subnet(subnet_id))
            except Exception:  # noqa: BLE001 - moto's InvalidSubnetID.NotFound
                raise invalid(f"The subnet ID '{subnet_id}' does not exist", clusterName=name) from None
        vpcs = {s.vpc_id for s in subnets}
        if len(vpcs) > 1:
            raise invalid("Subnets specified must be in the same VPC", clusterName=name)
        for subnet in subnets:
            # "Launch low-latency EKS clusters with AWS Local Zones": EKS cannot place the control plane's network
            # interfaces in a Local Zone subnet, "you must not specify Local Zone subnets when you create your
            # cluster".
            if local_zones.local_zone(region, name=subnet.availability_zone) is not None:
                raise invalid(f"Subnet {subnet.id} is in the Local Zone {subnet.availability_zone}: a cluster's "
                              "subnets must be in Availability Zones of the Region", clusterName=name)
        zones = {s.availability_zone for s in subnets}
        if len(zones) < 2:
            raise invalid("Subnets specified must be in at least two different AZs", clusterName=name)
        vpc = vpcs.pop()
        for group_id in net.get("securityGroupIds") or []:
            group = ec2.get_security_group_from_id(group_id)
            if group is None:
                raise invalid(f"Security group {group_id} does not exist", clusterName=name)
            if group.vpc_id != vpc:
                raise invalid(f"Security group {group_id} is not in the VPC of the subnets ({vpc})", clusterName=name)
        return vpc

    def _cluster_security_group(self, cluster: Any, vpc: str) -> str:
        ec2 = self._ec2(cluster.account, cluster.region)
        suffix = random.randint(10 ** 9, 10 ** 10 - 1)
        group = ec2.create_security_group(
            f"eks-cluster-sg-{cluster.name}-{suffix}",
            "EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as "
            "well as any managed workloads.", vpc,
            tags={"aws:eks:cluster-name": cluster.name, f"kubernetes.io/cluster/{cluster.name}": "owned",
                  "Name": f"eks-cluster-sg-{cluster.name}-{suffix}"})
        # "View Amazon EKS security group requirements for clusters": the cluster security group allows all
        # traffic from itself (and all outbound traffic, moto's default egress rule).
        ec2.authorize_security_group_ingress(group.id, "-1", None, None, [],
                                             source_groups=[{"GroupId": group.id}], vpc_id=vpc)
        return group.id

    def _drop_cluster_resources(self, cluster: Any) -> None:
        self.on_cluster_deleted(cluster.name, cluster.region)
        for kind in ("addon", "access_entry", "pod_identity"):  # a cluster's associations go with it
            for res in self._all(kind, cluster.account, cluster.region, cluster.name):
                self._resources.pop(self._key(res), None)
        group_id = cluster.spec["resourcesVpcConfig"].get("clusterSecurityGroupId")
        if group_id:
            try:
                self._ec2(cluster.account, cluster.region).delete_security_group(group_id=group_id)
            except Exception:  # noqa: BLE001 - the user deleted it already, or something still uses it
                pass

    def _op_describe_cluster_versions(self, p: dict, region: str, account: str, caller: str) -> dict:
        """DescribeClusterVersions: the Kubernetes versions EKS still creates clusters at on the sandbox's date,
        each on standard or extended support by the release calendar, with its support end dates where the
        calendar gives them."""
        wanted = set(p.get("clusterVersions") or [])
        if p.get("clusterType") not in (None, "eks"):
            return {"clusterVersions": []}
        status = p.get("versionStatus") or {"standard-support": "STANDARD_SUPPORT",
                                            "extended-support": "EXTENDED_SUPPORT"}.get(p.get("status") or "")
        rows = []
        for version in catalog.creatable():
            default = version == catalog.DEFAULT_KUBERNETES_VERSION
            support = catalog.support_on(version)
            if (wanted and version not in wanted) or (p.get("defaultOnly") and not default) or \
                    (status and status != support):
                continue
            row = {"clusterVersion": version, "clusterType": "eks",
                   "defaultPlatformVersion": catalog.PLATFORM_VERSION, "defaultVersion": default,
                   "status": support.lower().replace("_", "-"), "versionStatus": support}
            end_standard, end_extended = catalog.RELEASE_CALENDAR[version]
            if end_standard:
                row["endOfStandardSupportDate"] = _epoch(end_standard)
            if end_extended:
                row["endOfExtendedSupportDate"] = _epoch(end_extended)
            rows.append(row)
        return self._page(list(reversed(rows)), p, "clusterVersions")

    def _op_describe_cluster(self, p: dict, region: str, account: str, caller: str) -> dict:
        return {"cluster": self._cluster_view(self._cluster(p["name"], account, region))}

    def _op_list_clusters(self, p: dict, region: str, account: str, caller: str) -> dict:
        return self._page([c.name for c in self._all("cluster", account, region)], p, "clusters")

    def _op_delete_cluster(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["name"], account, region)
        if cluster.status in ("CREATING", "UPDATING", "DELETING", "PENDING"):
            raise in_use(f"Cluster {cluster.name} is {cluster.status}; it cannot be deleted now.",
                         clusterName=cluster.name)
        groups = self._all("nodegroup", account, region, cluster.name)
        if groups:
            raise in_use(f"Cluster has nodegroups attached: {', '.join(g.name for g in groups)}",
                         clusterName=cluster.name)
        self._start(cluster, "DELETING")
        return {"cluster": self._cluster_view(cluster)}

    def _op_update_cluster_config(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["name"], account, region)
        if cluster.status != "ACTIVE":
            raise in_use(f"Cluster {cluster.name} is {cluster.status}; an update is already in progress or it "
                         "is not ACTIVE.", clusterName=cluster.name)
        changes = [k for k in p if k not in ("name", "clientRequestToken")]
        if not changes:
            raise invalid("No changes needed", clusterName=cluster.name)
        params: list[dict[str, str]] = []
        if "accessConfig" in p:
            mode = p["accessConfig"].get("authenticationMode")
            current = cluster.spec["accessConfig"]["authenticationMode"]
            # "Change authentication mode to use access entries": CONFIG_MAP -> API_AND_CONFIG_MAP -> API only.
            order = ["CONFIG_MAP", "API_AND_CONFIG_MAP", "API"]
            if mode and order.index(mode) < order.index(current):
                raise invalid(f"Unsupported authentication mode update from {current} to {mode}",
                              clusterName=cluster.name)
            if mode:
                cluster.spec["accessConfig"]["authenticationMode"] = mode
                params.append({"type": "AuthenticationMode", "value": mode})
        if "resourcesVpcConfig" in p:
            net = p["resourcesVpcConfig"]
            for key, kind in (("endpointPublicAccess", "EndpointPublicAccess"),
                              ("endpointPrivateAccess", "EndpointPrivateAccess")):
                if key in net:
                    cluster.spec["resourcesVpcConfig"][key] = net[key]
                    params.append({"type": kind, "value": str(net[key]).lower()})
        if "logging" in p:
            cluster.spec["logging"] = p["logging"]
            params.append({"type": "ClusterLogging", "value": str(p["logging"])})
        kind = "AccessConfigUpdate" if "accessConfig" in p else (
            "EndpointAccessUpdate" if "resourcesVpcConfig" in p else "LoggingUpdate")
        update = self._new_update(cluster, kind, params)
        self._start(cluster, "UPDATING")
        return {"update": dict(update)}

    def _op_update_cluster_version(self, p: dict, region: str, account: str, caller: str) -> dict:
        """UpdateClusterVersion (EKS API; EKS guide "Update existing cluster to new Kubernetes version"): one
        minor version up at a time, to a version EKS offers, from ACTIVE, with every managed node group at the
        cluster's version; the new version shows once the update (UPDATING, latency ``eks.cluster``) ends."""
        cluster = self._cluster(p["name"], account, region)
        where = {"clusterName": cluster.name}
        if cluster.status != "ACTIVE":
            raise in_use(f"Cluster {cluster.name} is {cluster.status}; an update cannot start now.", **where)
        current, wanted = cluster.spec["version"], p["version"]
        if wanted not in catalog.KUBERNETES_VERSIONS:
            raise invalid(f"unsupported Kubernetes version {wanted}", **where)
        if _minor(wanted) != _minor(current) + 1:
            raise invalid(f"Unsupported Kubernetes minor version update from {current} to {wanted}: a cluster "
                          "moves one minor version at a time", **where)
        behind = [g.name for g in self._all("nodegroup", account, region, cluster.name)
                  if g.spec["version"] != current]
        if behind:
            raise EksError("InvalidRequestException", f"Nodegroups {', '.join(behind)} are not at the cluster's "
                           f"version {current}: update them before the cluster", **where)
        cluster.spec["_pending_version"] = wanted
        update = self._new_update(cluster, "VersionUpdate", [{"type": "Version", "value": wanted},
                                                             {"type": "PlatformVersion",
                                                              "value": catalog.PLATFORM_VERSION}])
        self._start(cluster, "UPDATING")
        return {"update": dict(update)}

    @staticmethod
    def _cluster_updated(cluster: Any) -> None:
        """The end of a cluster update: a version update takes effect."""
        pending = cluster.spec.pop("_pending_version", None)
        if pending:
            cluster.spec["version"] = pending

    def _cluster_view(self, cluster: Any) -> dict[str, Any]:
        spec = cluster.spec
        out: dict[str, Any] = {
            "name": cluster.name, "arn": cluster.arn, "createdAt": cluster.created_at, "version": spec["version"],
            "roleArn": spec["roleArn"], "resourcesVpcConfig": copy.deepcopy(spec["resourcesVpcConfig"]),
            "kubernetesNetworkConfig": dict(spec["kubernetesNetworkConfig"]), "status": cluster.status,
            "platformVersion": catalog.PLATFORM_VERSION, "tags": dict(cluster.tags), "id": spec["id"],
            "accessConfig": dict(spec["accessConfig"]),
            "identity": {"oidc": {"issuer": spec["oidc"]}},
            "upgradePolicy": {"supportType": "EXTENDED"},
            "health": {"issues": [{**i, "resourceIds": []} for i in spec.get("issues") or []]},
        }
        if spec.get("logging"):
            out["logging"] = copy.deepcopy(spec["logging"])
        # EKS shows the endpoint and certificate authority once the control plane exists.
        if cluster.status != "CREATING":
            base = self.endpoint_url()
            if base:
                out["endpoint"] = f"{base.rstrip('/')}/k8s/{cluster.name}"
            pem = self.ca_pem()
            out["certificateAuthority"] = {"data": base64.b64encode(pem).decode()} if pem else {}
        return out

    def _bootstrap_creator(self, cluster: Any, caller: str) -> None:
        """``bootstrapClusterCreatorAdminPermissions`` (default true): the creator becomes cluster admin:
        an access entry with AmazonEKSClusterAdminPolicy when the mode allows access entries, otherwise
        the implicit system:masters mapping of CONFIG_MAP clusters ("Grant IAM users access to Kubernetes
        with EKS access entries")."""
        from fmcluster_sandbox.eks.access import normalise_principal

        principal = normalise_principal(caller)
        if cluster.spec["accessConfig"]["authenticationMode"] == "CONFIG_MAP":
            cluster.spec["_config_map_admin"] = principal
            return
        entry = self._new_entry(cluster, principal, "STANDARD", [], None, None)
        entry.policies[catalog.CLUSTER_ADMIN_POLICY] = {
            "policyArn": catalog.CLUSTER_ADMIN_POLICY, "accessScope": {"type": "cluster", "namespaces": []},
            "associatedAt": self.wall(), "modifiedAt": self.wall()}


def _epoch(day: dt.date) -> float:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp()


def _minor(version: str) -> int:
    return int(version.split(".")[1])


__all__ = ["ClusterOperations", "EksError"]
