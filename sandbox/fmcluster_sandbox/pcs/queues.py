"""PCS queues (Create, Get, List, Update, Delete; 10 per cluster; queue-level custom Slurm settings from
PCS's allow-list) and RegisterComputeNodeGroupInstance, the call PCS's agent makes from each node."""

from __future__ import annotations

import copy
import secrets

from fmcluster_sandbox.pcs import settings
from fmcluster_sandbox.pcs.errors import PcsError, conflict, validation
from fmcluster_sandbox.pcs.node_groups import check_new_member

MAX_QUEUES = 10


class QueueOperations:
    def _queue_configs(self, configs: list[dict], cluster, account: str, region: str) -> list[dict]:
        out = []
        for index, config in enumerate(configs):
            ident = config.get("computeNodeGroupId")
            if not ident:
                raise validation("computeNodeGroupId is required",
                                 [(f"computeNodeGroupConfigurations[{index}].computeNodeGroupId", "is required")])
            group = self._find("compute_node_group", ident, account, region, cluster.id)
            if group.status == "DELETING":
                raise conflict("compute_node_group", group.id, f"Compute node group {group.name} is being deleted")
            out.append({"computeNodeGroupId": group.id})
        return out

    def _op_create_queue(self, p: dict, region: str, account: str) -> dict:
        self._check_tags(p.get("tags"))
        cluster = self._active_cluster(p["clusterIdentifier"], account, region, "create a queue")
        name = p["queueName"]
        check_new_member(cluster, self._all("queue", account, region, cluster.id), name, "queue", "Queue", "queues",
                         MAX_QUEUES, "L-QUEUES-PER-CLUSTER")
        settings.check_queue(p.get("slurmConfiguration"), cluster.spec["scheduler"]["version"])
        spec = {"computeNodeGroupConfigurations": self._queue_configs(
            p.get("computeNodeGroupConfigurations") or [], cluster, account, region)}
        if p.get("slurmConfiguration"):
            spec["slurmConfiguration"] = copy.deepcopy(p["slurmConfiguration"])
        res = self._new("queue", name, account, region, cluster.id, spec, p.get("tags"))
        return {"queue": self._view(res)}

    def _op_get_queue(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        return {"queue": self._view(self._find("queue", p["queueIdentifier"], account, region, cluster.id))}

    def _op_list_queues(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        return self._page(self._all("queue", account, region, cluster.id), p, "queues")

    def _op_update_queue(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        res = self._find("queue", p["queueIdentifier"], account, region, cluster.id)
        self._require_active(res, "update")
        settings.check_queue(p.get("slurmConfiguration"), cluster.spec["scheduler"]["version"])
        if p.get("computeNodeGroupConfigurations") is not None:
            res.spec["computeNodeGroupConfigurations"] = self._queue_configs(
                p["computeNodeGroupConfigurations"], cluster, account, region)
        if p.get("slurmConfiguration") is not None:
            res.spec["slurmConfiguration"] = copy.deepcopy(p["slurmConfiguration"])
        self._start(res, "UPDATING")
        return {"queue": self._view(res)}

    def _op_delete_queue(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        res = self._find("queue", p["queueIdentifier"], account, region, cluster.id)
        self._require_deletable(res)
        self._start(res, "DELETING")
        return {}

    def _op_register_compute_node_group_instance(self, p: dict, region: str, account: str) -> dict:
        """Answers the node agent: ``bootstrapId`` is the EC2 instance id of one of the group's nodes."""
        try:
            cluster = self._cluster(p["clusterIdentifier"], account, region)
        except PcsError as exc:
            raise PcsError("AccessDeniedException", "The cluster ID doesn't exist.") from exc
        for group in self._all("compute_node_group", account, region, cluster.id):
            if p["bootstrapId"] in group.instances:
                index = group.instances.index(p["bootstrapId"]) + 1
                answer = {
                    "nodeID": f"{group.name}-{index}",
                    "sharedSecret": secrets.token_urlsafe(32),
                    "endpoints": copy.deepcopy(cluster.spec.get("endpoints", [])),
                    "clusterName": cluster.name,
                    "computeNodeGroupId": group.id,
                    "computeNodeGroupName": group.name,
                    "schedulerVersion": cluster.spec["scheduler"]["version"],
                }
                if group.spec.get("nodeLifecycleActions"):
                    answer["nodeLifecycleActions"] = copy.deepcopy(group.spec["nodeLifecycleActions"])
                return answer
        raise PcsError("AccessDeniedException", "The EC2 instance isn't present.")
