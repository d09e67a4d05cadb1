"""The EKS emulator's core: one REST-JSON request in, EKS's answer out.

Every request is routed by botocore's EKS model (:mod:`.routing`) and checked against it
(:mod:`fmcluster_sandbox.model_check`) before an operation runs; a request the model refuses is answered
with ``InvalidParameterException`` naming every field. Resources follow EKS's state machines with lazy,
clock-driven transitions: a resource stays CREATING/UPDATING/DELETING for the fault latency of its kind
(``eks.cluster``, ``eks.nodegroup``, ``eks.addon``) and moves on at the first request after that.
The operations live in :mod:`.clusters`, :mod:`.nodegroups`, :mod:`.addons`, :mod:`.access` and
:mod:`.pod_identity`; node instances in :mod:`.nodes`.

Three functions serve the sandbox's Kubernetes API (the ``kube`` hook of the server): :meth:`EksEmulator.nodes`,
:meth:`EksEmulator.principal_allowed` and :meth:`EksEmulator.cluster_version`.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fmcluster_sandbox import model_check, moto_backends, paging
from fmcluster_sandbox.eks import routing
from fmcluster_sandbox.eks.access import AccessOperations, normalise_principal
from fmcluster_sandbox.eks.addons import AddonOperations
from fmcluster_sandbox.eks.clusters import ClusterOperations
from fmcluster_sandbox.eks.errors import EksError, invalid
from fmcluster_sandbox.eks.nodegroups import NodegroupOperations
from fmcluster_sandbox.eks.pod_identity import PodIdentityOperations
from fmcluster_sandbox.faults import Faults

log = logging.getLogger(__name__)

TRANSITIONAL = ("CREATING", "UPDATING", "DELETING")
TOKEN_TTL = 8 * 3600.0
LATENCY_KEY = {"cluster": "eks.cluster", "nodegroup": "eks.nodegroup", "addon": "eks.addon"}
# ListClusters/ListNodegroups/ListAddons/ListAccessEntries maxResults: 1..100 (model); EKS's default page is 100.
DEFAULT_PAGE_SIZE = 100


@dataclass
class Resource:
    kind: str  # cluster | nodegroup | addon | access_entry | pod_identity
    name: str  # cluster name, node group name, add-on name or principal ARN
    arn: str
    account: str
    region: str
    cluster: str | None  # the owning cluster's name
    spec: dict[str, Any]
    status: str
    since: float  # emulator clock at the start of the current transition
    created_at: float
    modified_at: float
    tags: dict[str, str] = field(default_factory=dict)
    instances: list[str] = field(default_factory=list)
    issues: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)  # access entries: policy ARN -> association


class EksEmulator(ClusterOperations, NodegroupOperations, AddonOperations, AccessOperations, PodIdentityOperations):
    """EKS for the sandbox. ``endpoint_url`` and ``ca_pem`` give the sandbox's own URL and TLS certificate
    (read when a cluster is described: the server knows them only once it listens)."""

    def __init__(self, faults: Faults, endpoint_url: Callable[[], str | None] = lambda: None,
                 ca_pem: Callable[[], bytes | None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 on_cluster_deleted: Callable[[str, str], None] = lambda name, region: None):
        self.faults = faults
        # Told when a cluster is gone, so the Kubernetes API forgets its objects (a new cluster of the same name
        # starts empty, as on EKS).
        self.on_cluster_deleted = on_cluster_deleted
        self.endpoint_url = endpoint_url
        self.ca_pem = ca_pem
        self.clock = clock
        self.wall = wall
        self._lock = threading.RLock()
        self._resources: dict[tuple[str, str, str, str | None, str], Resource] = {}
        self._tokens: dict[tuple[str, str, str, str], tuple[float, str, Any]] = {}
        from fmcluster_sandbox import ec2_accounts, ec2_launch, iam_extras, instance_catalog
        from fmcluster_sandbox.eks import amis

        amis.install()
        ec2_accounts.install()
        instance_catalog.install()
        ec2_launch.install()
        iam_extras.install()

    # -- entry point -----------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, query: str, body: bytes, region: str, account: str,
               caller_arn: str) -> tuple[int, dict[str, str], bytes]:
        try:
            found = routing.match(method, raw_path)
            if found is None:
                raise EksError("NotFoundException", f"No EKS operation answers {method} {raw_path}")
            operation, labels = found
            try:
                params = routing.document(operation, labels, query, body)
            except ValueError as exc:
                raise EksError("BadRequestException", f"Cannot parse the request: {exc}") from exc
            problems = model_check.check("eks", operation, params)
            if problems:
                text = "; ".join(f"{name}: {msg}" for name, msg in problems)
                raise invalid(f"{len(problems)} validation error(s) detected: {text}")
            handler = getattr(self, "_op_" + _snake(operation), None)
            if handler is None:
                raise EksError("InvalidRequestException", f"The sandbox does not emulate EKS {operation}")
            with self._lock:
                self._advance()
                result = self._idempotent(operation, params, region, account, caller_arn, handler)
            _prune(model_check.operation("eks", operation).output_shape, result)
            bad = model_check.check("eks", operation, result, output=True)
            if bad:
                log.error("EKS emulator produced a malformed %s response: %s", operation, bad)
                raise EksError("ServerException", f"emulator output does not match the model: {bad}")
        except EksError as err:
            return err.response()
        except Exception as exc:  # noqa: BLE001 - a server must answer
            log.exception("EKS emulator failure")
            return EksError("ServerException", f"{type(exc).__name__}: {exc}").response()
        headers = {"Content-Type": "application/json", "x-amzn-RequestId": str(uuid.uuid4())}
        return 200, headers, json.dumps(result).encode()

    def _idempotent(self, operation: str, params: dict, region: str, account: str, caller: str,
                    handler: Callable) -> dict:
        """``clientRequestToken`` ("a unique, case-sensitive identifier that you provide to ensure the
        idempotency of the request", EKS API): a token replayed with the same request answers the original
        result and does nothing else; with another request it is refused. Tokens live 8 hours."""
        token = params.get("clientRequestToken")
        if not token:
            return handler(params, region, account, caller)
        now = self.clock()
        self._tokens = {k: v for k, v in self._tokens.items() if now - v[0] < TOKEN_TTL}
        key = (account, region, operation, token)
        fingerprint = json.dumps({k: v for k, v in params.items() if k != "clientRequestToken"}, sort_keys=True)
        if key in self._tokens:
            _, seen, original = self._tokens[key]
            if seen != fingerprint:
                raise invalid(f"clientRequestToken {token} was already used with different parameters")
            return copy.deepcopy(original)
        result = handler(params, region, account, caller)
        self._tokens[key] = (now, fingerprint, copy.deepcopy(result))
        return result

    # -- for the sandbox's Kubernetes API ----------------------------------------------------------
    def tag_keys(self, account: str) -> set[str]:
        """Every tag key on the account's EKS resources (what Cost Explorer lists as cost allocation tags)."""
        return {key for res in list(self._resources.values()) if res.account == account for key in res.tags}

    def nodes(self, cluster_name: str, region: str, account: str | None = None) -> list[dict[str, Any]]:
        """One dict per running instance of the cluster's node groups: ``name`` (private DNS name),
        ``instance_type``, ``instance_id``, ``nodegroup``, ``zone``, ``labels``, ``taints``."""
        account = account or _default_account()
        with self._lock:
            self._advance()
            out = []
            for ng in self._all("nodegroup", account, region, cluster_name):
                out.extend(self._node_views(ng))
            return out

    def cluster_region(self, cluster_name: str, region: str, account: str | None = None) -> str | None:
        """The Region of the cluster a request to ``/k8s/<cluster_name>`` reaches: ``region`` (the token's STS
        Region) when a cluster of that name is there, else the one Region that holds a cluster of that name; None
        when there is none or several. On EKS the endpoint names the cluster and any STS Region's token is
        verified there (aws-iam-authenticator accepts the global and every regional STS endpoint)."""
        account = account or _default_account()
        with self._lock:
            if self._get("cluster", account, region, None, cluster_name) is not None:
                return region
            regions = {r.region for r in self._resources.values()
                       if r.kind == "cluster" and r.account == account and r.name == cluster_name}
            return regions.pop() if len(regions) == 1 else None

    def cluster_version(self, cluster_name: str, region: str, account: str | None = None) -> str | None:
        """The cluster's Kubernetes version (``1.35``), or None when there is no such cluster."""
        with self._lock:
            cluster = self._get("cluster", account or _default_account(), region, None, cluster_name)
            return cluster.spec["version"] if cluster is not None else None

    def principal_allowed(self, cluster_name: str, region: str, principal_arn: str,
                          account: str | None = None) -> bool:
        """True when EKS authenticates the principal on the cluster: it has an access entry (an STS assumed-role ARN
        counts as its IAM role, as EKS maps it), or it created a CONFIG_MAP cluster. What it may then do is
        :meth:`access_policies`' business: an entry without an associated policy is authenticated and authorized
        for nothing (403, not 401; EKS guide "Grant IAM users access to Kubernetes with EKS access entries")."""
        account = account or _default_account()
        wanted = normalise_principal(principal_arn)
        with self._lock:
            self._advance()
            cluster = self._get("cluster", account, region, None, cluster_name)
            if cluster is None or cluster.status not in ("ACTIVE", "UPDATING"):
                return False
            for entry in self._all("access_entry", account, region, cluster_name):
                if normalise_principal(entry.name) == wanted:
                    return True
            # a CONFIG_MAP cluster's creator is mapped to system:masters outside any access entry
            mode = cluster.spec["accessConfig"]["authenticationMode"]
            return mode != "API" and cluster.spec.get("_config_map_admin") == wanted

    def access_policies(self, cluster_name: str, region: str, principal_arn: str,
                        account: str | None = None) -> list[dict[str, Any]]:
        """The access policies associated with the principal's access entry (ListAssociatedAccessPolicies form:
        policyArn, accessScope); for a CONFIG_MAP cluster's creator (``system:masters``), cluster admin; [] else."""
        account = account or _default_account()
        wanted = normalise_principal(principal_arn)
        with self._lock:
            self._advance()
            for entry in self._all("access_entry", account, region, cluster_name):
                if normalise_principal(entry.name) == wanted:
                    return [{"policyArn": p["policyArn"], "accessScope": dict(p["accessScope"])}
                            for p in entry.policies.values()]
            cluster = self._get("cluster", account, region, None, cluster_name)
            if cluster is not None and cluster.spec["accessConfig"]["authenticationMode"] != "API" and \
                    cluster.spec.get("_config_map_admin") == wanted:
                return [{"policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
                         "accessScope": {"type": "cluster"}}]
            return []

    # -- state machine -----------------------------------------------------------------------------
    def _advance(self) -> None:
        """Move every resource whose transition is due. A resource whose step raises ends that step failed,
        with an ``InternalFailure`` issue (an EKS issue code): the error stays with it and with this request,
        and never makes every later request, for every cluster, fail again on the same step."""
        now = self.clock()
        for res in sorted(self._resources.values(), key=lambda r: r.since):
            try:
                if res.status in TRANSITIONAL and now - res.since >= self.faults.transition_latency(
                        LATENCY_KEY.get(res.kind, "eks.cluster")):
                    self._finish(res)
                elif res.kind == "nodegroup":
                    self._keep_desired_size(res)
            except Exception as exc:  # noqa: BLE001 - one resource's failure is not the emulator's
                log.exception("EKS emulator: %s %s failed to advance", res.kind, res.name)
                self._step_failed(res, f"{type(exc).__name__}: {exc}")

    def _step_failed(self, res: Resource, message: str) -> None:
        failed = {"CREATING": "CREATE_FAILED", "DELETING": "DELETE_FAILED"}.get(res.status, "DEGRADED")
        issue = {"code": "InternalFailure", "message": f"sandbox: {res.kind} {res.name} failed: {message}"}
        if res.kind == "nodegroup":
            res.status = failed
            res.issues = [{**issue, "resourceIds": [res.spec["asg"]]}]
        elif res.kind in ("cluster", "addon"):
            res.status = {"cluster": "FAILED", "addon": failed}[res.kind] if res.status in TRANSITIONAL \
                else res.status
            res.spec["issues"] = [issue]
        res.modified_at = self.wall()

    def _finish(self, res: Resource) -> None:
        res.modified_at = self.wall()
        if self._forced_failure(res):
            return
        if res.status == "DELETING":
            self._on_deleted(res)
            self._resources.pop(self._key(res), None)
            return
        if res.kind == "nodegroup":
            self._nodegroup_updated(res)
            code = self._reconcile(res)
            if code is None or self._waits_for_its_block(res, code):
                res.status = "ACTIVE"
            else:
                res.status = "CREATE_FAILED" if res.status == "CREATING" else "DEGRADED"
        else:
            if res.kind == "cluster":
                self._cluster_updated(res)
            elif res.kind == "addon":
                self._addon_updated(res)
            res.status = "ACTIVE"
        for update in res.updates:
            if update["status"] == "InProgress":
                update["status"] = "Failed" if res.status in ("CREATE_FAILED", "DEGRADED") else "Successful"
                if update["status"] == "Failed":
                    update["errors"] = [{"errorCode": "Unknown", "errorMessage": i["message"]} for i in res.issues]

    def _forced_failure(self, res: Resource) -> bool:
        """A ``fail_status`` fault (``eks_cluster:<name>``, ``eks_nodegroup:<name>``, ``eks_addon:<name>``)
        ending this transition failed, with an ``InternalFailure`` health issue (an EKS issue code)."""
        forced = self.faults.forced_status(f"eks_{res.kind}", res.name)
        step = {"CREATING": "CREATE_FAILED", "DELETING": "DELETE_FAILED"}.get(res.status)
        if not forced or forced != step:
            return False
        issue = {"code": "InternalFailure", "message": f"sandbox fault: {res.kind} {res.name} forced to {forced}"}
        res.status = "FAILED" if res.kind == "cluster" else forced
        if res.kind == "nodegroup":
            res.issues = [{**issue, "resourceIds": [res.spec["asg"]]}]
        elif res.kind == "addon":
            res.spec["issues"] = [issue]
        elif res.kind == "cluster":
            res.spec["issues"] = [issue]
        return True

    def _on_deleted(self, res: Resource) -> None:
        if res.kind == "nodegroup":
            self._terminate(res, list(res.instances))
        elif res.kind == "cluster":
            self._drop_cluster_resources(res)

    def _start(self, res: Resource, status: str) -> None:
        res.status = status
        res.since = self.clock()
        res.modified_at = self.wall()

    # -- resources ---------------------------------------------------------------------------------
    @staticmethod
    def _key(res: Resource) -> tuple[str, str, str, str | None, str]:
        return res.kind, res.account, res.region, res.cluster, res.name

    def _new(self, kind: str, name: str, arn: str, account: str, region: str, cluster: str | None,
             spec: dict[str, Any], tags: dict[str, str] | None, status: str = "CREATING") -> Resource:
        now = self.wall()
        res = Resource(kind=kind, name=name, arn=arn, account=account, region=region, cluster=cluster,
                       spec=spec, status=status, since=self.clock(), created_at=now, modified_at=now,
                       tags=dict(tags or {}))
        self._resources[self._key(res)] = res
        return res

    def _get(self, kind: str, account: str, region: str, cluster: str | None, name: str) -> Resource | None:
        return self._resources.get((kind, account, region, cluster, name))

    def _all(self, kind: str, account: str, region: str, cluster: str | None = None) -> list[Resource]:
        return sorted((r for r in self._resources.values() if r.kind == kind and r.account == account
                       and r.region == region and (kind == "cluster" or r.cluster == cluster)),
                      key=lambda r: (r.created_at, r.name))

    def _cluster(self, name: str, account: str, region: str) -> Resource:
        res = self._get("cluster", account, region, None, name)
        if res is None:
            raise EksError("ResourceNotFoundException", f"No cluster found for name: {name}.", clusterName=name)
        return res

    def _active_cluster(self, name: str, account: str, region: str) -> Resource:
        """The cluster, which must be ACTIVE for node groups, add-ons and access entries to change."""
        cluster = self._cluster(name, account, region)
        if cluster.status == "DELETING":
            raise EksError("ResourceInUseException", f"Cluster {name} is being deleted.", clusterName=name)
        if cluster.status not in ("ACTIVE", "UPDATING"):
            raise EksError("InvalidRequestException", f"Cluster '{name}' is not in ACTIVE status (it is "
                           f"{cluster.status}).", clusterName=name)
        return cluster

    def _new_update(self, res: Resource, kind: str, params: list[dict[str, str]]) -> dict[str, Any]:
        update = {"id": str(uuid.uuid4()), "status": "InProgress", "type": kind, "params": params,
                  "createdAt": self.wall(), "errors": []}
        res.updates.append(update)
        return update

    @staticmethod
    def _page(items: list[Any], params: dict[str, Any], key: str) -> dict[str, Any]:
        try:
            start = paging.offset(params.get("nextToken"))
        except ValueError as exc:
            raise invalid("The nextToken is not one this API returned.") from exc
        size = params.get("maxResults") or DEFAULT_PAGE_SIZE
        out: dict[str, Any] = {key: items[start:start + size]}
        if start + size < len(items):
            out["nextToken"] = paging.token(start + size)
        return out

    # -- moto lookups ------------------------------------------------------------------------------
    _ec2 = staticmethod(moto_backends.ec2)
    _iam = staticmethod(moto_backends.iam)

    def _role(self, arn: str, account: str) -> Any | None:
        for role in self._iam(account).roles.values():
            if role.arn == arn:
                return role
        return None

    # -- tags --------------------------------------------------------------------------------------
    def _by_arn(self, arn: str, account: str, region: str) -> Resource:
        for res in self._resources.values():
            if res.arn == arn and res.account == account and res.region == region:
                return res
        raise EksError("NotFoundException", f"Resource {arn} not found")

    @staticmethod
    def _check_tags(tags: dict[str, str] | None) -> None:
        for key in tags or {}:
            if key.lower().startswith("aws:"):
                raise EksError("BadRequestException", f"Tag key {key} uses the reserved prefix aws:")

    def _op_tag_resource(self, p: dict, region: str, account: str, caller: str) -> dict:
        res = self._by_arn(p["resourceArn"], account, region)
        self._check_tags(p["tags"])
        res.tags.update(p["tags"])
        return {}

    def _op_untag_resource(self, p: dict, region: str, account: str, caller: str) -> dict:
        res = self._by_arn(p["resourceArn"], account, region)
        for key in p["tagKeys"]:
            res.tags.pop(key, None)
        return {}

    def _op_list_tags_for_resource(self, p: dict, region: str, account: str, caller: str) -> dict:
        return {"tags": dict(self._by_arn(p["resourceArn"], account, region).tags)}

    def _op_describe_update(self, p: dict, region: str, account: str, caller: str) -> dict:
        cluster = self._cluster(p["name"], account, region)
        target = cluster
        if p.get("nodegroupName"):
            target = self._nodegroup(cluster, p["nodegroupName"])
        elif p.get("addonName"):
            target = self._addon(cluster, p["addonName"])
        for update in target.updates:
            if update["id"] == p["updateId"]:
                return {"update": dict(update)}
        raise EksError("ResourceNotFoundException", f"No update found for ID: {p['updateId']}",
                       clusterName=cluster.name)


def _prune(shape: Any, value: Any) -> None:
    """Drop empty maps and lists the output shape allows only with at least one entry (EKS omits them: an
    untagged cluster has no ``tags``), and None members."""
    if shape is None or not isinstance(value, dict) or shape.type_name != "structure":
        if shape is not None and shape.type_name == "list" and isinstance(value, list):
            for item in value:
                _prune(shape.member, item)
        return
    for name in list(value):
        member = shape.members.get(name)
        item = value[name]
        if item is None:
            del value[name]
        elif member is not None and isinstance(item, (dict, list)) and not item and \
                member.metadata.get("min", 0) >= 1:
            del value[name]
        elif member is not None:
            _prune(member, item)


def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _default_account() -> str:
    from moto.core import DEFAULT_ACCOUNT_ID

    return DEFAULT_ACCOUNT_ID
