"""PCS clusters: CreateCluster, GetCluster, ListClusters, UpdateCluster, DeleteCluster.

Rules, each from AWS: the Slurm versions botocore's model lists, minus those past AWS's end of life
("Slurm versions in AWS PCS"); exactly one subnet, and security groups in its VPC; 1 cluster CREATING per
Region and the Clusters quota (default 5, Service Quotas ``pcs``/``L-0ADE95E3``; "Endpoints and service
quotas for AWS PCS"); custom Slurm, slurmdbd and cgroup settings from PCS's allow-lists (:mod:`.settings`);
UpdateCluster only from ACTIVE, UPDATE_FAILED or SUSPENDED with every queue and node group ACTIVE, and a
scheduler version update only to a newer supported version (UpdateCluster, botocore model;
"Updating the scheduler version of a cluster in AWS PCS").
"""

from __future__ import annotations

import copy
import datetime as dt
import ipaddress
import random
import secrets
import uuid

from fmcluster_sandbox import model_check
from fmcluster_sandbox.pcs import settings
from fmcluster_sandbox.pcs.errors import conflict, field_error, quota, validation

# AWS's published end of life ("Slurm versions in AWS PCS"): after it, no new clusters on the version.
END_OF_LIFE = {"23.11": dt.date(2025, 5, 31), "24.05": dt.date(2025, 11, 30), "24.11": dt.date(2026, 5, 31),
               "25.05": dt.date(2026, 11, 30)}
CLUSTERS_QUOTA_CODE = "L-0ADE95E3"
UPDATABLE_CLUSTER_STATES = ("ACTIVE", "UPDATE_FAILED", "SUSPENDED")


def supported_versions(today: dt.date) -> list[str]:
    """Slurm versions a new cluster may use on ``today``: botocore's list, minus those past end of life."""
    listed = model_check.documented_values("pcs", "SchedulerRequest", "version")
    return [v for v in listed if v not in END_OF_LIFE or today <= END_OF_LIFE[v]]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


class ClusterOperations:
    def _today(self) -> dt.date:
        return dt.datetime.fromtimestamp(self.wall(), dt.timezone.utc).date()

    def _check_version(self, version: str, field: str = "scheduler.version") -> None:
        listed = model_check.documented_values("pcs", "SchedulerRequest", "version")
        allowed = supported_versions(self._today())
        if version in END_OF_LIFE and version in listed and version not in allowed:
            raise field_error(field, f"Slurm {version} reached end of life on {END_OF_LIFE[version]:%Y-%m-%d}; "
                                     f"new clusters cannot use it (supported: {', '.join(allowed)})")
        if version not in allowed:
            raise field_error(field, f"Slurm version {version} is not supported (supported: {', '.join(allowed)})")

    def _check_subnets(self, subnet_ids: list[str], field_name: str, account: str, region: str,
                       vpc_id: str | None = None) -> str:
        ec2 = self._ec2(account, region)
        vpcs = set()
        for index, subnet_id in enumerate(subnet_ids):
            try:
                subnet = ec2.get_subnet(subnet_id)
            except Exception as exc:  # moto raises InvalidSubnetIdNotFoundError
                raise validation(f"Subnet {subnet_id} does not exist",
                                 [(f"{field_name}[{index}]", f"subnet {subnet_id} not found")]) from exc
            if vpc_id and subnet.vpc_id != vpc_id:
                raise validation(f"Subnet {subnet_id} is not in the cluster's VPC {vpc_id}",
                                 [(f"{field_name}[{index}]", f"subnet is in {subnet.vpc_id}, not {vpc_id}")])
            vpcs.add(subnet.vpc_id)
        if len(vpcs) > 1:
            raise validation("All subnets must be in the same VPC", [(field_name, "subnets span VPCs")])
        return next(iter(vpcs)) if vpcs else (vpc_id or "")

    def _check_security_groups(self, group_ids: list[str], field_name: str, account: str, region: str,
                               vpc_id: str) -> None:
        ec2 = self._ec2(account, region)
        for index, group_id in enumerate(group_ids):
            group = ec2.get_security_group_from_id(group_id)
            if group is None:
                raise validation(f"Security group {group_id} does not exist",
                                 [(f"{field_name}[{index}]", f"security group {group_id} not found")])
            if vpc_id and group.vpc_id != vpc_id:
                raise validation(f"Security group {group_id} is not in VPC {vpc_id}",
                                 [(f"{field_name}[{index}]", f"security group is in {group.vpc_id}")])

    def _clusters_quota(self, account: str, region: str) -> int:
        from fmcluster_sandbox.service_quotas import quota_value

        return int(quota_value("pcs", CLUSTERS_QUOTA_CODE, account, region))

    def _op_create_cluster(self, p: dict, region: str, account: str) -> dict:
        name = p["clusterName"]
        self._check_tags(p.get("tags"))
        clusters = self._all("cluster", account, region)
        for other in clusters:
            if other.name == name:
                raise conflict("cluster", other.id, f"A cluster named {name} already exists ({other.id})")
        self._check_version(p["scheduler"]["version"])
        networking = p["networking"]
        subnets = networking.get("subnetIds") or []
        if len(subnets) != 1:
            raise field_error("networking.subnetIds", "A PCS cluster takes exactly 1 subnet")
        vpc_id = self._check_subnets(subnets, "networking.subnetIds", account, region)
        self._check_security_groups(networking.get("securityGroupIds") or [], "networking.securityGroupIds",
                                    account, region, vpc_id)
        slurm = copy.deepcopy(p.get("slurmConfiguration") or {})
        settings.check_cluster(slurm, p["scheduler"]["version"])
        creating = [c for c in clusters if c.status == "CREATING"]
        if creating:
            raise quota(f"Only 1 cluster can be CREATING per Region; {creating[0].name} is", "cluster",
                        creating[0].id, "L-CREATING-CLUSTERS")
        limit = self._clusters_quota(account, region)
        if len(clusters) >= limit:
            raise quota(f"This account already has {len(clusters)} clusters in {region}; the Clusters quota "
                        f"({CLUSTERS_QUOTA_CODE}) is {limit}", "cluster", name, CLUSTERS_QUOTA_CODE)
        if "accounting" in slurm:
            slurm["accounting"].setdefault("defaultPurgeTimeInDays", -1)
        spec = {
            "scheduler": {"type": p["scheduler"]["type"], "version": p["scheduler"]["version"]},
            "size": p["size"],
            "networking": {"subnetIds": list(subnets),
                           "securityGroupIds": list(networking.get("securityGroupIds") or []),
                           "networkType": networking.get("networkType", "IPV4")},
            "slurmConfiguration": slurm,
            "endpoints": self._endpoints(subnets[0], account, region, slurm),
            "_vpc": vpc_id,  # internal: node group subnets must be in the cluster's VPC
        }
        res = self._new("cluster", name, account, region, None, spec, p.get("tags"))
        slurm["authKey"] = {
            "secretArn": f"arn:aws:secretsmanager:{region}:{account}:secret:"
                         f"pcs!slurm-secret-{res.id}-{secrets.token_hex(3)}",
            "secretVersion": str(uuid.uuid4()),
        }
        return {"cluster": self._view(res)}

    def _endpoints(self, subnet_id: str, account: str, region: str, slurm: dict) -> list[dict[str, str]]:
        try:
            cidr = self._ec2(account, region).get_subnet(subnet_id).cidr_block
            net = ipaddress.ip_network(cidr, strict=False)
            address = str(net.network_address + min(10 + random.randint(0, 200), net.num_addresses - 2))
        except Exception:  # noqa: BLE001
            address = "10.0.0.10"
        out = [{"type": "SLURMCTLD", "privateIpAddress": address, "port": "6817"}]
        if (slurm.get("accounting") or {}).get("mode") == "STANDARD":
            out.append({"type": "SLURMDBD", "privateIpAddress": address, "port": "6819"})
        if (slurm.get("slurmRest") or {}).get("mode") == "STANDARD":
            out.append({"type": "SLURMRESTD", "privateIpAddress": address, "port": "6820"})
        return out

    def _op_get_cluster(self, p: dict, region: str, account: str) -> dict:
        return {"cluster": self._view(self._cluster(p["clusterIdentifier"], account, region))}

    def _op_list_clusters(self, p: dict, region: str, account: str) -> dict:
        return self._page(self._all("cluster", account, region), p, "clusters")

    def _op_update_cluster(self, p: dict, region: str, account: str) -> dict:
        res = self._cluster(p["clusterIdentifier"], account, region)
        if res.status not in UPDATABLE_CLUSTER_STATES:
            raise conflict("cluster", res.id, f"Cluster {res.name} is {res.status}; it can be updated only when "
                                              f"{', '.join(UPDATABLE_CLUSTER_STATES)}")
        busy = [r for r in self._resources.values() if r.cluster_id == res.id and r.status != "ACTIVE"]
        if busy:
            raise conflict("cluster", res.id, f"Cluster {res.name} has {busy[0].kind} {busy[0].name} in "
                                              f"{busy[0].status}; every queue and compute node group must be ACTIVE")
        spec = res.spec
        current = spec["scheduler"]["version"]
        if p.get("scheduler"):
            version = p["scheduler"]["version"]
            if version == current:
                raise field_error("scheduler.version", f"The cluster already runs Slurm {current}")
            self._check_version(version)
            if _version_key(version) < _version_key(current):
                raise field_error("scheduler.version", f"Cannot downgrade Slurm from {current} to {version}")
        update = copy.deepcopy(p.get("slurmConfiguration") or {})
        settings.check_cluster(update, (p.get("scheduler") or {}).get("version", current))
        if p.get("scheduler"):
            spec["scheduler"]["version"] = p["scheduler"]["version"]
        slurm = spec["slurmConfiguration"]
        for key, value in update.items():
            if key in ("accounting", "slurmRest") and isinstance(value, dict):
                merged = dict(slurm.get(key) or {})
                merged.update(value)
                merged.setdefault("mode", "NONE")
                if key == "accounting":
                    merged.setdefault("defaultPurgeTimeInDays", -1)
                slurm[key] = merged
            else:
                slurm[key] = value
        spec["endpoints"] = self._endpoints(spec["networking"]["subnetIds"][0], account, region, slurm)
        self._start(res, "UPDATING")
        return {"cluster": self._view(res)}

    def _op_delete_cluster(self, p: dict, region: str, account: str) -> dict:
        res = self._cluster(p["clusterIdentifier"], account, region)
        self._require_deletable(res)
        children = [r for r in self._resources.values() if r.cluster_id == res.id]
        if children:
            kinds = sorted({c.kind for c in children})
            raise conflict("cluster", res.id, f"Cluster {res.name} still has {len(children)} resource(s) "
                                              f"({', '.join(kinds)}); delete its queues and compute node groups first")
        self._start(res, "DELETING")
        return {}
