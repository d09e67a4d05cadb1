"""The PCS emulator's core: one request in, PCS's answer out.

Every request is checked against botocore's PCS model (:mod:`fmcluster_sandbox.model_check`) before an
operation runs; resources follow PCS's state machine with lazy, clock-driven transitions. The operations
live in :mod:`.clusters`, :mod:`.node_groups` and :mod:`.queues`; static nodes in :mod:`.nodes`.

Idempotency ("clientToken", every PCS create/update/delete): a token replayed with the same request
returns the result of the original request and has no other effect; replayed with a different request
it is refused with ``ConflictException``. Tokens live 8 hours. The emulator never throttles: the server
throttles every service, PCS included.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import re
import string
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fmcluster_sandbox import model_check, moto_backends, paging
from fmcluster_sandbox.faults import Faults
from fmcluster_sandbox.pcs.clusters import ClusterOperations
from fmcluster_sandbox.pcs.errors import RESOURCE_TYPE, PcsError, conflict, not_found, validation
from fmcluster_sandbox.pcs.node_groups import NodeGroupOperations
from fmcluster_sandbox.pcs.nodes import NodeOperations
from fmcluster_sandbox.pcs.queues import QueueOperations

log = logging.getLogger(__name__)

TOKEN_TTL = 8 * 3600.0
TRANSITIONAL = {"CREATING": "CREATE", "UPDATING": "UPDATE", "DELETING": "DELETE"}
FAILED = ("CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED")
ARN_KIND = {"cluster": "cluster", "compute_node_group": "computenodegroup", "queue": "queue"}
# ListClusters/ListComputeNodeGroups/ListQueues maxResults: "The default is 10 results, and the maximum
# allowed page size is 100 results. A value of 0 uses the default." (botocore PCS model)
DEFAULT_PAGE_SIZE = 10


@dataclass
class Resource:
    kind: str
    id: str
    name: str
    arn: str
    account: str
    region: str
    cluster_id: str | None
    spec: dict[str, Any]
    status: str
    since: float  # emulator clock at the start of the current transition
    created_at: float
    modified_at: float
    seq: int
    error_info: list[dict[str, str]] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)
    replace_instances: bool = False  # an update changed what PCS launches: replace the running nodes
    waiting_for_block: bool = False  # a CAPACITY_BLOCK group made before its block began (see NodeOperations)


def _new_id() -> str:
    return "pcs_" + "".join(random.choices(string.ascii_lowercase + string.digits, k=10))


class PcsEmulator(ClusterOperations, NodeGroupOperations, QueueOperations, NodeOperations):
    def __init__(self, faults: Faults, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time):
        self.faults = faults
        self.clock = clock
        self.wall = wall
        self._lock = threading.RLock()
        self._resources: dict[str, Resource] = {}
        self._tags: dict[str, dict[str, str]] = {}
        self._tokens: dict[tuple[str, str, str, str], tuple[float, str, Any]] = {}
        self._seq = 0
        from fmcluster_sandbox import ec2_accounts, ec2_launch, iam_extras, instance_catalog

        ec2_accounts.install()
        instance_catalog.install()
        ec2_launch.install()
        iam_extras.install()

    # -- entry point -----------------------------------------------------------------------------
    def handle(self, operation: str, body: bytes, region: str, account_id: str) -> tuple[int, dict[str, str], bytes]:
        delay = self.faults.call_delay("pcs", operation)
        if delay <= 0:
            return self._answer(operation, body, region, account_id)
        held = f"call.pcs.{operation}"
        self.faults.note_held(held, "started")
        time.sleep(delay)
        try:
            return self._answer(operation, body, region, account_id)
        finally:
            self.faults.note_held(held, "answered")

    def _answer(self, operation: str, body: bytes, region: str, account_id: str) -> tuple[int, dict[str, str], bytes]:
        try:
            if model_check.operation("pcs", operation) is None:
                raise validation(f"Unknown operation {operation}", reason="unknownOperation")
            try:
                params = json.loads(body or b"{}")
            except ValueError as exc:
                raise validation(f"Cannot parse request body: {exc}", reason="cannotParse") from exc
            errors = model_check.check("pcs", operation, params)
            if errors:
                text = "; ".join(f"{name}: {msg}" for name, msg in errors)
                raise validation(f"{len(errors)} validation error(s) detected: {text}", errors)
            handler = getattr(self, "_op_" + re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower())
            with self._lock:
                self._advance()
                result = self._idempotent(operation, params, region, account_id, handler)
            bad = model_check.check("pcs", operation, result, output=True)
            if bad:
                log.error("PCS emulator produced a malformed %s response: %s", operation, bad)
                raise PcsError("InternalServerException", f"emulator output does not match the model: {bad}")
        except PcsError as err:
            return err.response()
        except Exception as exc:  # noqa: BLE001 - a server must answer
            log.exception("PCS emulator failure in %s", operation)
            return PcsError("InternalServerException", f"{type(exc).__name__}: {exc}").response()
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": str(uuid.uuid4())}
        return 200, headers, json.dumps(result).encode()

    def _idempotent(self, operation: str, params: dict, region: str, account: str, handler: Callable) -> dict:
        token = params.get("clientToken")
        if not token:
            return handler(params, region, account)
        now = self.clock()
        self._tokens = {k: v for k, v in self._tokens.items() if now - v[0] < TOKEN_TTL}
        key = (account, region, operation, token)
        fingerprint = json.dumps({k: v for k, v in params.items() if k != "clientToken"}, sort_keys=True)
        if key in self._tokens:
            _, stored_fingerprint, original = self._tokens[key]
            if stored_fingerprint != fingerprint:
                raise PcsError("ConflictException", f"clientToken {token} was already used with different parameters",
                               resourceId=token, resourceType="clientToken")
            return copy.deepcopy(original)  # the original result, however the resource has moved on since
        result = handler(params, region, account)
        self._tokens[key] = (now, fingerprint, copy.deepcopy(result))
        return result

    # -- state machine -----------------------------------------------------------------------------
    def _advance(self) -> None:
        now = self.clock()
        for res in sorted(self._resources.values(), key=lambda r: r.seq):
            if res.status in TRANSITIONAL and now - res.since >= self.faults.transition_latency(res.kind):
                self._finish(res)
            elif res.waiting_for_block and res.status == "ACTIVE":
                self._launch_when_block_begins(res)

    def _finish(self, res: Resource) -> None:
        step = TRANSITIONAL[res.status]
        forced = self.faults.forced_status(res.kind, res.name, res.id)
        res.modified_at = self.wall()
        if forced == f"{step}_FAILED":
            res.status = forced
            res.error_info = [{"code": "InjectedFailure",
                               "message": f"sandbox fault: {res.kind} {res.name} forced to {forced}"}]
            return
        if step == "DELETE":
            if res.kind == "compute_node_group":
                self._terminate(res, list(res.instances))
            self._resources.pop(res.id, None)
            self._tags.pop(res.arn, None)
            return
        res.error_info = []
        if res.kind == "compute_node_group":
            failure = self._reconcile(res)
            if self._waits_for_its_block(res, failure):
                failure = None
            if failure and failure.get("fatal"):
                res.status, res.error_info = f"{step}_FAILED", [{k: failure[k] for k in ("code", "message")}]
                return
            if failure:  # provisioned, but PCS reports what went wrong with its nodes
                res.error_info = [{k: failure[k] for k in ("code", "message")}]
        res.status = forced if step == "CREATE" and forced and forced not in FAILED else "ACTIVE"

    def _start(self, res: Resource, status: str) -> None:
        res.status = status
        res.since = self.clock()
        res.modified_at = self.wall()

    def tag_keys(self, account: str) -> set[str]:
        """Every tag key on the account's PCS resources (what Cost Explorer lists as cost allocation tags)."""
        with self._lock:
            return {key for res in self._resources.values() if res.account == account
                    for key in self._tags.get(res.arn, {})}

    # -- moto lookups ------------------------------------------------------------------------------
    _ec2 = staticmethod(moto_backends.ec2)
    _iam = staticmethod(moto_backends.iam)

    # -- resources ---------------------------------------------------------------------------------
    def _new(self, kind: str, name: str, account: str, region: str, cluster_id: str | None, spec: dict[str, Any],
             tags: dict[str, str] | None) -> Resource:
        rid = _new_id()
        while rid in self._resources:
            rid = _new_id()
        now = self.wall()
        self._seq += 1
        res = Resource(kind=kind, id=rid, name=name, arn=f"arn:aws:pcs:{region}:{account}:{ARN_KIND[kind]}/{rid}",
                       account=account, region=region, cluster_id=cluster_id, spec=spec, status="CREATING",
                       since=self.clock(), created_at=now, modified_at=now, seq=self._seq)
        self._resources[rid] = res
        self._tags[res.arn] = dict(tags or {})
        return res

    def _all(self, kind: str, account: str, region: str, cluster_id: str | None = None) -> list[Resource]:
        return sorted((r for r in self._resources.values()
                       if r.kind == kind and r.account == account and r.region == region
                       and (cluster_id is None or r.cluster_id == cluster_id)), key=lambda r: r.seq)

    def _find(self, kind: str, ident: str, account: str, region: str, cluster_id: str | None = None) -> Resource:
        for res in self._all(kind, account, region, cluster_id):
            if ident in (res.id, res.name):
                return res
        raise not_found(kind, ident)

    def _cluster(self, ident: str, account: str, region: str) -> Resource:
        return self._find("cluster", ident, account, region)

    @staticmethod
    def _require_active(res: Resource, action: str) -> None:
        if res.status != "ACTIVE":
            raise conflict(res.kind, res.id,
                           f"Cannot {action} {RESOURCE_TYPE[res.kind]} {res.name} ({res.id}) while it is {res.status}")

    @staticmethod
    def _require_deletable(res: Resource) -> None:
        if res.status != "ACTIVE" and res.status not in FAILED:
            raise conflict(res.kind, res.id,
                           f"Cannot delete {RESOURCE_TYPE[res.kind]} {res.name} ({res.id}) while it is {res.status}")

    @staticmethod
    def _check_tags(tags: dict[str, str] | None) -> None:
        for key in tags or {}:
            if key.lower().startswith("aws:"):
                raise validation(f"Tag key {key} uses the reserved prefix aws:", [(f"tags.{key}", "reserved prefix")])

    # -- views -------------------------------------------------------------------------------------
    def _view(self, res: Resource) -> dict[str, Any]:
        base = self._summary(res)
        spec = copy.deepcopy(res.spec)
        if res.kind == "cluster":
            base.update(scheduler=spec["scheduler"], size=spec["size"], networking=spec["networking"],
                        slurmConfiguration=spec["slurmConfiguration"])
            if res.status not in ("CREATING", "CREATE_FAILED"):
                base["endpoints"] = spec["endpoints"]
        elif res.kind == "compute_node_group":
            base.update({k: v for k, v in spec.items() if v not in (None, "")})
        else:
            base.update(computeNodeGroupConfigurations=spec["computeNodeGroupConfigurations"])
            if spec.get("slurmConfiguration"):
                base["slurmConfiguration"] = spec["slurmConfiguration"]
        if res.error_info:
            base["errorInfo"] = copy.deepcopy(res.error_info)
        return base

    @staticmethod
    def _summary(res: Resource) -> dict[str, Any]:
        out = {"name": res.name, "id": res.id, "arn": res.arn, "createdAt": res.created_at,
               "modifiedAt": res.modified_at, "status": res.status}
        if res.cluster_id:
            out["clusterId"] = res.cluster_id
        return out

    @staticmethod
    def _page(items: list[Resource], params: dict, key: str) -> dict[str, Any]:
        try:
            start = paging.offset(params.get("nextToken"))
        except ValueError as exc:
            raise validation("Invalid nextToken", [("nextToken", "not a token returned by this API")]) from exc
        size = params.get("maxResults") or DEFAULT_PAGE_SIZE
        out: dict[str, Any] = {key: [PcsEmulator._summary(r) for r in items[start:start + size]]}
        if start + size < len(items):
            out["nextToken"] = paging.token(start + size)
        return out

    # -- tags --------------------------------------------------------------------------------------
    def _by_arn(self, arn: str, account: str, region: str) -> Resource:
        for res in self._resources.values():
            if res.arn == arn and res.account == account and res.region == region:
                return res
        raise PcsError("ResourceNotFoundException", f"Resource {arn} not found", resourceId=arn,
                       resourceType="resource")

    def _op_tag_resource(self, p: dict, region: str, account: str) -> dict:
        res = self._by_arn(p["resourceArn"], account, region)
        self._check_tags(p["tags"])
        self._tags.setdefault(res.arn, {}).update(p["tags"])
        return {}

    def _op_untag_resource(self, p: dict, region: str, account: str) -> dict:
        res = self._by_arn(p["resourceArn"], account, region)
        for key in p["tagKeys"]:
            self._tags.get(res.arn, {}).pop(key, None)
        return {}

    def _op_list_tags_for_resource(self, p: dict, region: str, account: str) -> dict:
        res = self._by_arn(p["resourceArn"], account, region)
        return {"tags": dict(self._tags.get(res.arn, {}))}
