"""AWS Parallel Computing Service emulator of the sandbox (moto has no PCS).

The sandbox server hands it every request whose ``X-Amz-Target`` is ``AWSParallelComputingService.<Op>``
(awsJson1_0). Requests are checked against botocore's PCS model (``pcs_model``), resources follow PCS's
state machine with lazy, clock-driven transitions, and references (subnets, security groups, launch
templates, instance profiles) are looked up in moto's in-process backends. Static nodes of a compute node
group are real moto EC2 instances tagged ``aws:pcs:compute-node-group-id`` / ``aws:pcs:cluster-id``.

Idempotency: a ``clientToken`` replayed with the same request returns the same resource (its current
view); replayed with a different request it is refused with ``ConflictException``. Tokens live 8 hours.
The emulator never throttles: the server throttles every service, PCS included.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import logging
import random
import re
import secrets
import string
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fmcluster.sandbox import pcs_model
from fmcluster.sandbox.faults import Faults

log = logging.getLogger(__name__)

# The PCS model carries no httpStatusCode on its error shapes; these are PCS's documented codes.
ERROR_STATUS = {
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "ResourceNotFoundException": 404,
    "ConflictException": 409,
    "ServiceQuotaExceededException": 402,
    "ThrottlingException": 429,
    "InternalServerException": 500,
}
SIZE_LIMITS = {"SMALL": 32, "MEDIUM": 512, "LARGE": 2048}
MAX_NODE_GROUPS = 10
MAX_QUEUES = 10
# AWS's published end of support; new clusters on these versions are refused (DESIGN §4).
EOL_SLURM_VERSIONS = {"24.11": "2026-05-31", "25.05": "2026-11-30"}
NODE_GROUP_TAG = "aws:pcs:compute-node-group-id"
CLUSTER_TAG = "aws:pcs:cluster-id"
TOKEN_TTL = 8 * 3600.0
TRANSITIONAL = {"CREATING": "CREATE", "UPDATING": "UPDATE", "DELETING": "DELETE"}
FAILED = ("CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED")
ARN_KIND = {"cluster": "cluster", "compute_node_group": "computenodegroup", "queue": "queue"}
RESOURCE_TYPE = {"cluster": "cluster", "compute_node_group": "computeNodeGroup", "queue": "queue"}


class PcsError(Exception):
    def __init__(self, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra

    def response(self) -> tuple[int, dict[str, str], bytes]:
        body = {"__type": self.code, "message": self.message, **self.extra}
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "x-amzn-ErrorType": self.code,
            "x-amzn-RequestId": str(uuid.uuid4()),
        }
        return ERROR_STATUS.get(self.code, 400), headers, json.dumps(body).encode()


def validation(
    message: str, fields: list[tuple[str, str]] | None = None, reason: str = "fieldValidationFailed"
):
    field_list = [{"name": name, "message": msg} for name, msg in (fields or [])]
    extra: dict[str, Any] = {"reason": reason}
    if field_list:
        extra["fieldList"] = field_list
    return PcsError("ValidationException", message, **extra)


def not_found(kind: str, ident: str) -> PcsError:
    return PcsError(
        "ResourceNotFoundException",
        f"{RESOURCE_TYPE[kind]} {ident} not found",
        resourceId=ident,
        resourceType=RESOURCE_TYPE[kind],
    )


def conflict(kind: str, ident: str, message: str) -> PcsError:
    return PcsError("ConflictException", message, resourceId=ident, resourceType=RESOURCE_TYPE[kind])


def quota(message: str, kind: str, ident: str, quota_code: str) -> PcsError:
    return PcsError(
        "ServiceQuotaExceededException",
        message,
        serviceCode="pcs",
        resourceId=ident,
        resourceType=RESOURCE_TYPE[kind],
        quotaCode=quota_code,
    )


def _new_id() -> str:
    return "pcs_" + "".join(random.choices(string.ascii_lowercase + string.digits, k=10))


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


class PcsEmulator:
    def __init__(
        self,
        faults: Faults,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ):
        self.faults = faults
        self.clock = clock
        self.wall = wall
        self._lock = threading.RLock()
        self._resources: dict[str, Resource] = {}
        self._tags: dict[str, dict[str, str]] = {}
        self._tokens: dict[tuple[str, str, str, str], tuple[float, str, Any]] = {}
        self._seq = 0

    # -- entry point -----------------------------------------------------------------------------
    def handle(
        self, operation: str, body: bytes, region: str, account_id: str
    ) -> tuple[int, dict[str, str], bytes]:
        delay = self.faults.call_delay("pcs", operation)
        if delay > 0:
            time.sleep(delay)
        try:
            if pcs_model.operation(operation) is None:
                raise validation(f"Unknown operation {operation}", reason="unknownOperation")
            try:
                params = json.loads(body or b"{}")
            except ValueError as exc:
                raise validation(f"Cannot parse request body: {exc}", reason="cannotParse") from exc
            errors = pcs_model.check_input(operation, params)
            if errors:
                text = "; ".join(f"{name}: {msg}" for name, msg in errors)
                raise validation(f"{len(errors)} validation error(s) detected: {text}", errors)
            handler = getattr(self, "_op_" + re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower())
            with self._lock:
                self._advance()
                result = self._idempotent(operation, params, region, account_id, handler)
            bad = pcs_model.check_output(operation, result)
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
            _, stored_fingerprint, stored = self._tokens[key]
            if stored_fingerprint != fingerprint:
                raise PcsError(
                    "ConflictException",
                    f"clientToken {token} was already used with different parameters",
                    resourceId=token,
                    resourceType="clientToken",
                )
            resource_id, snapshot = stored
            resource = self._resources.get(resource_id) if resource_id else None
            if resource is None:
                return copy.deepcopy(snapshot)
            return {next(iter(snapshot)): self._view(resource)} if snapshot else {}
        result = handler(params, region, account)
        resource_id = None
        if result:
            inner = next(iter(result.values()))
            resource_id = inner.get("id") if isinstance(inner, dict) else None
        self._tokens[key] = (now, fingerprint, (resource_id, copy.deepcopy(result)))
        return result

    # -- state machine -----------------------------------------------------------------------------
    def _advance(self) -> None:
        now = self.clock()
        for res in sorted(self._resources.values(), key=lambda r: r.seq):
            if res.status in TRANSITIONAL and now - res.since >= self.faults.transition_latency(res.kind):
                self._finish(res)

    def _finish(self, res: Resource) -> None:
        step = TRANSITIONAL[res.status]
        forced = self.faults.forced_status(res.kind, res.name, res.id)
        res.modified_at = self.wall()
        if forced == f"{step}_FAILED":
            res.status = forced
            res.error_info = [
                {
                    "code": "InjectedFailure",
                    "message": f"sandbox fault: {res.kind} {res.name} forced to {forced}",
                }
            ]
            return
        if step == "DELETE":
            if res.kind == "compute_node_group":
                self._terminate(res, list(res.instances))
            self._resources.pop(res.id, None)
            self._tags.pop(res.arn, None)
            return
        if res.kind == "compute_node_group":
            failure = self._reconcile(res)
            if failure:
                res.status, res.error_info = f"{step}_FAILED", [failure]
                return
        res.error_info = []
        if step == "CREATE" and forced and forced not in FAILED:
            res.status = forced
        else:
            res.status = "ACTIVE"

    def _start(self, res: Resource, status: str) -> None:
        res.status = status
        res.since = self.clock()
        res.modified_at = self.wall()

    # -- moto lookups ------------------------------------------------------------------------------
    @staticmethod
    def _ec2(account: str, region: str) -> Any:
        from moto.ec2.models import ec2_backends

        return ec2_backends[account][region]

    @staticmethod
    def _iam(account: str) -> Any:
        from moto.iam.models import iam_backends

        backends = iam_backends[account]
        for partition in ("aws", "global"):
            if partition in backends:
                return backends[partition]
        return backends["aws"]

    def _check_subnets(
        self, subnet_ids: list[str], field_name: str, account: str, region: str, vpc_id: str | None = None
    ) -> str:
        ec2 = self._ec2(account, region)
        vpcs = set()
        for index, subnet_id in enumerate(subnet_ids):
            try:
                subnet = ec2.get_subnet(subnet_id)
            except Exception as exc:  # moto raises InvalidSubnetIdNotFoundError
                raise validation(
                    f"Subnet {subnet_id} does not exist",
                    [(f"{field_name}[{index}]", f"subnet {subnet_id} not found")],
                ) from exc
            if vpc_id and subnet.vpc_id != vpc_id:
                raise validation(
                    f"Subnet {subnet_id} is not in the cluster's VPC {vpc_id}",
                    [(f"{field_name}[{index}]", f"subnet is in {subnet.vpc_id}, not {vpc_id}")],
                )
            vpcs.add(subnet.vpc_id)
        if len(vpcs) > 1:
            raise validation("All subnets must be in the same VPC", [(field_name, "subnets span VPCs")])
        return next(iter(vpcs)) if vpcs else (vpc_id or "")

    def _check_security_groups(
        self, group_ids: list[str], field_name: str, account: str, region: str, vpc_id: str
    ) -> None:
        ec2 = self._ec2(account, region)
        for index, group_id in enumerate(group_ids):
            group = ec2.get_security_group_from_id(group_id)
            if group is None:
                raise validation(
                    f"Security group {group_id} does not exist",
                    [(f"{field_name}[{index}]", f"security group {group_id} not found")],
                )
            if vpc_id and group.vpc_id != vpc_id:
                raise validation(
                    f"Security group {group_id} is not in VPC {vpc_id}",
                    [(f"{field_name}[{index}]", f"security group is in {group.vpc_id}")],
                )

    def _check_launch_template(self, template: dict, account: str, region: str) -> None:
        ec2 = self._ec2(account, region)
        try:
            found = ec2.get_launch_template(template["id"])
        except Exception as exc:
            raise validation(
                f"Launch template {template['id']} does not exist",
                [("customLaunchTemplate.id", f"launch template {template['id']} not found")],
            ) from exc
        try:
            found.get_version(template["version"])
        except Exception as exc:
            raise validation(
                f"Launch template {template['id']} has no version {template['version']}",
                [("customLaunchTemplate.version", f"version {template['version']} not found")],
            ) from exc

    def _check_instance_profile(self, arn: str, account: str) -> None:
        where = [("iamInstanceProfileArn", arn)]
        if arn.split(":")[4] != account:
            raise PcsError("AccessDeniedException", f"Instance profile {arn} belongs to another account")
        try:
            profile = self._iam(account).get_instance_profile_by_arn(arn)
        except Exception as exc:
            raise validation(
                f"Instance profile {arn} does not exist",
                [("iamInstanceProfileArn", f"instance profile {arn} not found")],
            ) from exc
        roles = list(getattr(profile, "roles", []) or [])
        if not roles:
            raise validation(f"Instance profile {arn} has no role", where)
        ok = profile.path == "/aws-pcs/" or any(
            role.name.startswith("AWSPCS") or role.path == "/aws-pcs/" for role in roles
        )
        if not ok:
            raise validation(
                f"Instance profile {arn}: its role name must start with AWSPCS or its path be /aws-pcs/",
                [("iamInstanceProfileArn", "role name must start with AWSPCS or path must be /aws-pcs/")],
            )

    @staticmethod
    def _check_tags(tags: dict[str, str] | None) -> None:
        for key in tags or {}:
            if key.lower().startswith("aws:"):
                raise validation(
                    f"Tag key {key} uses the reserved prefix aws:", [(f"tags.{key}", "reserved prefix")]
                )

    # -- static nodes ------------------------------------------------------------------------------
    def _reconcile(self, ng: Resource) -> dict[str, str] | None:
        """Bring the group's running static instances to minInstanceCount; an errorInfo entry on failure."""
        spec = ng.spec
        types = [c.get("instanceType", "") for c in spec["instanceConfigs"]]
        usable = [t for t in types if self.faults.has_capacity(t)]
        if not usable:
            return {
                "code": "InsufficientInstanceCapacity",
                "message": f"There is no Spot/On-Demand capacity available for {', '.join(types)} "
                f"in the requested subnets (sandbox fault).",
            }
        ec2 = self._ec2(ng.account, ng.region)
        alive = []
        for instance_id in ng.instances:
            try:
                if ec2.get_instance(instance_id).state not in ("terminated", "shutting-down"):
                    alive.append(instance_id)
            except Exception:  # noqa: BLE001 - gone from moto
                continue
        ng.instances = alive
        wanted = spec["scalingConfiguration"]["minInstanceCount"]
        if len(alive) > wanted:
            self._terminate(ng, alive[wanted:])
            ng.instances = alive[:wanted]
            return None
        missing = wanted - len(alive)
        if missing <= 0:
            return None
        subnets = spec["subnetIds"]
        per_subnet = {s: 0 for s in subnets}
        for index in range(missing):
            per_subnet[subnets[(len(alive) + index) % len(subnets)]] += 1
        template = spec.get("customLaunchTemplate")
        tags = {NODE_GROUP_TAG: ng.id, CLUSTER_TAG: ng.cluster_id or ""}
        try:
            for subnet_id, count in per_subnet.items():
                if not count:
                    continue
                kwargs: dict[str, Any] = {
                    "instance_type": usable[0],
                    "is_instance_type_default": False,
                    "region_name": ng.region,
                    "subnet_id": subnet_id,
                    "tags": {"instance": dict(tags)},
                    "security_group_ids": list(spec.get("securityGroupIds") or []),
                    "key_name": spec.get("sshKeyName") or None,
                    "client_token": None,
                }
                if template:
                    kwargs["launch_template"] = {
                        "LaunchTemplateId": template["id"],
                        "Version": template["version"],
                    }
                if spec.get("purchaseOption") == "SPOT":
                    kwargs["instance_market_options"] = "spot"
                image = spec.get("amiId") or None
                if image is None and not self._template_image(ng, template):
                    return {
                        "code": "InvalidParameter",
                        "message": "No AMI: set amiId or ImageId in the launch template",
                    }
                reservation = ec2.run_instances(image, count, None, [], **kwargs)
                for instance in reservation.instances:
                    ng.instances.append(instance.id)
                    try:
                        ec2.associate_iam_instance_profile(
                            instance_id=instance.id, iam_instance_profile_arn=spec["iamInstanceProfileArn"]
                        )
                    except Exception:  # noqa: BLE001 - association is cosmetic in the sandbox
                        pass
        except Exception as exc:  # noqa: BLE001 - any EC2 failure fails the node group
            code = getattr(exc, "error_type", None) or getattr(exc, "code", None) or type(exc).__name__
            return {"code": str(code), "message": f"RunInstances failed: {getattr(exc, 'message', exc)}"}
        return None

    def _template_image(self, ng: Resource, template: dict | None) -> str | None:
        if not template:
            return None
        try:
            version = (
                self._ec2(ng.account, ng.region)
                .get_launch_template(template["id"])
                .get_version(template["version"])
            )
            return version.data.get("ImageId")
        except Exception:  # noqa: BLE001
            return None

    def _terminate(self, ng: Resource, instance_ids: list[str]) -> None:
        if not instance_ids:
            return
        ec2 = self._ec2(ng.account, ng.region)
        known = {i.id for i in ec2.all_instances()}
        present = [i for i in instance_ids if i in known]
        if present:
            ec2.terminate_instances(present)
        ng.instances = [i for i in ng.instances if i not in instance_ids]

    # -- lookups -----------------------------------------------------------------------------------
    def _new(
        self,
        kind: str,
        name: str,
        account: str,
        region: str,
        cluster_id: str | None,
        spec: dict[str, Any],
        tags: dict[str, str] | None,
    ) -> Resource:
        rid = _new_id()
        while rid in self._resources:
            rid = _new_id()
        arn = f"arn:aws:pcs:{region}:{account}:{ARN_KIND[kind]}/{rid}"
        now = self.wall()
        self._seq += 1
        res = Resource(
            kind=kind,
            id=rid,
            name=name,
            arn=arn,
            account=account,
            region=region,
            cluster_id=cluster_id,
            spec=spec,
            status="CREATING",
            since=self.clock(),
            created_at=now,
            modified_at=now,
            seq=self._seq,
        )
        self._resources[rid] = res
        self._tags[arn] = dict(tags or {})
        return res

    def _all(self, kind: str, account: str, region: str, cluster_id: str | None = None) -> list[Resource]:
        return sorted(
            (
                r
                for r in self._resources.values()
                if r.kind == kind
                and r.account == account
                and r.region == region
                and (cluster_id is None or r.cluster_id == cluster_id)
            ),
            key=lambda r: r.seq,
        )

    def _find(
        self, kind: str, ident: str, account: str, region: str, cluster_id: str | None = None
    ) -> Resource:
        for res in self._all(kind, account, region, cluster_id):
            if ident in (res.id, res.name):
                return res
        raise not_found(kind, ident)

    def _cluster(self, ident: str, account: str, region: str) -> Resource:
        return self._find("cluster", ident, account, region)

    @staticmethod
    def _require_active(res: Resource, action: str) -> None:
        if res.status != "ACTIVE":
            raise conflict(
                res.kind,
                res.id,
                f"Cannot {action} {RESOURCE_TYPE[res.kind]} {res.name} ({res.id}) while it is {res.status}",
            )

    @staticmethod
    def _require_deletable(res: Resource) -> None:
        if res.status != "ACTIVE" and res.status not in FAILED:
            raise conflict(
                res.kind,
                res.id,
                f"Cannot delete {RESOURCE_TYPE[res.kind]} {res.name} ({res.id}) while it is {res.status}",
            )

    # -- views -------------------------------------------------------------------------------------
    def _view(self, res: Resource) -> dict[str, Any]:
        base = self._summary(res)
        spec = copy.deepcopy(res.spec)
        if res.kind == "cluster":
            base.update(
                scheduler=spec["scheduler"],
                size=spec["size"],
                networking=spec["networking"],
                slurmConfiguration=spec["slurmConfiguration"],
            )
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
        out = {
            "name": res.name,
            "id": res.id,
            "arn": res.arn,
            "createdAt": res.created_at,
            "modifiedAt": res.modified_at,
            "status": res.status,
        }
        if res.cluster_id:
            out["clusterId"] = res.cluster_id
        return out

    @staticmethod
    def _page(items: list[Resource], params: dict, key: str) -> dict[str, Any]:
        start = 0
        token = params.get("nextToken")
        if token:
            try:
                start = int(json.loads(base64.urlsafe_b64decode(token.encode()))["offset"])
                if start < 0:
                    raise ValueError(start)
            except Exception as exc:
                raise validation(
                    "Invalid nextToken", [("nextToken", "not a token returned by this API")]
                ) from exc
        size = params.get("maxResults") or 100
        page = items[start : start + size]
        out: dict[str, Any] = {key: [PcsEmulator._summary(r) for r in page]}
        if start + size < len(items):
            out["nextToken"] = base64.urlsafe_b64encode(
                json.dumps({"offset": start + size}).encode()
            ).decode()
        return out

    # -- clusters ----------------------------------------------------------------------------------
    def _op_create_cluster(self, p: dict, region: str, account: str) -> dict:
        name = p["clusterName"]
        self._check_tags(p.get("tags"))
        for other in self._all("cluster", account, region):
            if other.name == name:
                raise conflict("cluster", other.id, f"A cluster named {name} already exists ({other.id})")
        version = p["scheduler"]["version"]
        valid = pcs_model.documented_values("SchedulerRequest", "version")
        if valid and version not in valid:
            raise validation(
                f"Slurm version {version} is not supported",
                [("scheduler.version", f"must be one of {', '.join(valid)}")],
            )
        if version in EOL_SLURM_VERSIONS:
            raise validation(
                f"Slurm {version} reached end of support on {EOL_SLURM_VERSIONS[version]}; "
                f"new clusters cannot use it",
                [("scheduler.version", f"Slurm {version} is past end of support")],
            )
        networking = p["networking"]
        subnets = networking.get("subnetIds") or []
        if len(subnets) != 1:
            raise validation(
                "A PCS cluster takes exactly 1 subnet",
                [("networking.subnetIds", "exactly 1 subnet is required")],
            )
        vpc_id = self._check_subnets(subnets, "networking.subnetIds", account, region)
        self._check_security_groups(
            networking.get("securityGroupIds") or [], "networking.securityGroupIds", account, region, vpc_id
        )
        creating = [c for c in self._all("cluster", account, region) if c.status == "CREATING"]
        if creating:
            raise quota(
                f"Only 1 cluster can be CREATING per Region; {creating[0].name} is",
                "cluster",
                creating[0].id,
                "L-CREATING-CLUSTERS",
            )
        slurm = copy.deepcopy(p.get("slurmConfiguration") or {})
        if "accounting" in slurm:
            slurm["accounting"].setdefault("defaultPurgeTimeInDays", -1)
        spec = {
            "scheduler": {"type": p["scheduler"]["type"], "version": version},
            "size": p["size"],
            "networking": {
                "subnetIds": list(subnets),
                "securityGroupIds": list(networking.get("securityGroupIds") or []),
                "networkType": networking.get("networkType", "IPV4"),
            },
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
        self._require_active(res, "update")
        spec = res.spec
        if p.get("scheduler"):
            version = p["scheduler"]["version"]
            valid = pcs_model.documented_values("SchedulerRequest", "version")
            if (valid and version not in valid) or version in EOL_SLURM_VERSIONS:
                raise validation(
                    f"Slurm version {version} is not supported",
                    [
                        (
                            "scheduler.version",
                            f"must be one of {', '.join(v for v in valid if v not in EOL_SLURM_VERSIONS)}",
                        )
                    ],
                )
            current = spec["scheduler"]["version"]
            if tuple(map(int, version.split("."))) < tuple(map(int, current.split("."))):
                raise validation(
                    f"Cannot downgrade Slurm from {current} to {version}",
                    [("scheduler.version", "downgrades are not supported")],
                )
        slurm_update = copy.deepcopy(p.get("slurmConfiguration") or {})
        if p.get("scheduler"):
            spec["scheduler"]["version"] = p["scheduler"]["version"]
        slurm = spec["slurmConfiguration"]
        for key, value in slurm_update.items():
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
            kinds = sorted({RESOURCE_TYPE[c.kind] for c in children})
            raise conflict(
                "cluster",
                res.id,
                f"Cluster {res.name} still has {len(children)} resource(s) "
                f"({', '.join(kinds)}); delete its queues and compute node groups "
                f"first",
            )
        self._start(res, "DELETING")
        return {}

    # -- compute node groups -----------------------------------------------------------------------
    def _active_cluster(self, ident: str, account: str, region: str, action: str) -> Resource:
        cluster = self._cluster(ident, account, region)
        if cluster.status != "ACTIVE":
            raise conflict(
                "cluster", cluster.id, f"Cannot {action} while cluster {cluster.name} is {cluster.status}"
            )
        return cluster

    def _check_scaling(self, cluster: Resource, scaling: dict, exclude: str | None) -> None:
        low, high = scaling["minInstanceCount"], scaling["maxInstanceCount"]
        if low > high:
            raise validation(
                "minInstanceCount must not exceed maxInstanceCount",
                [("scalingConfiguration.minInstanceCount", f"{low} > maxInstanceCount {high}")],
            )
        limit = SIZE_LIMITS[cluster.spec["size"]]
        used = sum(
            r.spec["scalingConfiguration"]["maxInstanceCount"]
            for r in self._all("compute_node_group", cluster.account, cluster.region, cluster.id)
            if r.id != exclude
        )
        if used + high > limit:
            raise quota(
                f"Cluster {cluster.name} is {cluster.spec['size']} (at most {limit} instances); node groups "
                f"already allow {used}, {high} more exceeds it",
                "cluster",
                cluster.id,
                "L-CLUSTER-SIZE",
            )

    def _check_node_group_refs(self, spec: dict, cluster: Resource, account: str, region: str) -> None:
        vpc = cluster.spec.get("_vpc")
        self._check_subnets(spec["subnetIds"], "subnetIds", account, region, vpc)
        self._check_security_groups(
            spec.get("securityGroupIds") or [], "securityGroupIds", account, region, vpc or ""
        )
        mode = spec.get("launchTemplateMode")
        template = spec.get("customLaunchTemplate")
        if mode == "MANAGED":
            if template:
                raise validation(
                    "customLaunchTemplate cannot be set when launchTemplateMode is MANAGED",
                    [("customLaunchTemplate", "not allowed with MANAGED")],
                )
            missing = [f for f in ("amiId", "securityGroupIds") if not spec.get(f)]
            if missing:
                raise validation(
                    "MANAGED launch templates need amiId and securityGroupIds",
                    [(f, "is required when launchTemplateMode is MANAGED") for f in missing],
                )
        elif not template:
            raise validation(
                "customLaunchTemplate is required unless launchTemplateMode is MANAGED",
                [("customLaunchTemplate", "is required")],
            )
        else:
            self._check_launch_template(template, account, region)
        self._check_instance_profile(spec["iamInstanceProfileArn"], account)
        if not spec["instanceConfigs"] or not all(c.get("instanceType") for c in spec["instanceConfigs"]):
            raise validation(
                "At least one instance type is required",
                [("instanceConfigs", "needs at least 1 entry with instanceType")],
            )
        if spec.get("spotOptions") and spec.get("purchaseOption") != "SPOT":
            raise validation(
                "spotOptions needs purchaseOption SPOT", [("spotOptions", "only valid for SPOT")]
            )

    NODE_GROUP_FIELDS = (
        "amiId",
        "securityGroupIds",
        "sshKeyName",
        "subnetIds",
        "purchaseOption",
        "launchTemplateMode",
        "customLaunchTemplate",
        "iamInstanceProfileArn",
        "scalingConfiguration",
        "instanceConfigs",
        "spotOptions",
        "slurmConfiguration",
        "nodeLifecycleActions",
        "instanceHealthChecks",
    )

    def _op_create_compute_node_group(self, p: dict, region: str, account: str) -> dict:
        self._check_tags(p.get("tags"))
        cluster = self._active_cluster(p["clusterIdentifier"], account, region, "create a compute node group")
        name = p["computeNodeGroupName"]
        groups = self._all("compute_node_group", account, region, cluster.id)
        _check_new_member(cluster, groups, name, "compute_node_group", "Compute node group", "compute node groups",
                          MAX_NODE_GROUPS, "L-NODE-GROUPS-PER-CLUSTER")
        spec = {k: copy.deepcopy(p[k]) for k in self.NODE_GROUP_FIELDS if p.get(k) is not None}
        spec.setdefault("purchaseOption", "ONDEMAND")
        spec.setdefault(
            "launchTemplateMode", "MANAGED" if p.get("launchTemplateMode") == "MANAGED" else "CUSTOM"
        )
        self._check_node_group_refs(spec, cluster, account, region)
        self._check_scaling(cluster, spec["scalingConfiguration"], None)
        res = self._new("compute_node_group", name, account, region, cluster.id, spec, p.get("tags"))
        return {"computeNodeGroup": self._view(res)}

    def _op_get_compute_node_group(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        res = self._find("compute_node_group", p["computeNodeGroupIdentifier"], account, region, cluster.id)
        return {"computeNodeGroup": self._view(res)}

    def _op_list_compute_node_groups(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        return self._page(
            self._all("compute_node_group", account, region, cluster.id), p, "computeNodeGroups"
        )

    def _op_update_compute_node_group(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        res = self._find("compute_node_group", p["computeNodeGroupIdentifier"], account, region, cluster.id)
        self._require_active(res, "update")
        spec = copy.deepcopy(res.spec)
        for key in self.NODE_GROUP_FIELDS:
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
        self._check_node_group_refs(spec, cluster, account, region)
        self._check_scaling(cluster, spec["scalingConfiguration"], res.id)
        res.spec = spec
        self._start(res, "UPDATING")
        return {"computeNodeGroup": self._view(res)}

    def _op_delete_compute_node_group(self, p: dict, region: str, account: str) -> dict:
        cluster = self._cluster(p["clusterIdentifier"], account, region)
        res = self._find("compute_node_group", p["computeNodeGroupIdentifier"], account, region, cluster.id)
        self._require_deletable(res)
        users = [
            q
            for q in self._all("queue", account, region, cluster.id)
            if any(c.get("computeNodeGroupId") == res.id for c in q.spec["computeNodeGroupConfigurations"])
        ]
        if users:
            raise conflict(
                "compute_node_group",
                res.id,
                f"Compute node group {res.name} is used by queue(s) {', '.join(q.name for q in users)}",
            )
        self._start(res, "DELETING")
        return {}

    # -- queues ------------------------------------------------------------------------------------
    def _queue_configs(self, configs: list[dict], cluster: Resource, account: str, region: str) -> list[dict]:
        out = []
        for index, config in enumerate(configs):
            ident = config.get("computeNodeGroupId")
            if not ident:
                raise validation(
                    "computeNodeGroupId is required",
                    [(f"computeNodeGroupConfigurations[{index}].computeNodeGroupId", "is required")],
                )
            group = self._find("compute_node_group", ident, account, region, cluster.id)
            if group.status == "DELETING":
                raise conflict(
                    "compute_node_group", group.id, f"Compute node group {group.name} is being deleted"
                )
            out.append({"computeNodeGroupId": group.id})
        return out

    def _op_create_queue(self, p: dict, region: str, account: str) -> dict:
        self._check_tags(p.get("tags"))
        cluster = self._active_cluster(p["clusterIdentifier"], account, region, "create a queue")
        name = p["queueName"]
        queues = self._all("queue", account, region, cluster.id)
        _check_new_member(cluster, queues, name, "queue", "Queue", "queues", MAX_QUEUES, "L-QUEUES-PER-CLUSTER")
        spec = {
            "computeNodeGroupConfigurations": self._queue_configs(
                p.get("computeNodeGroupConfigurations") or [], cluster, account, region
            )
        }
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
        if p.get("computeNodeGroupConfigurations") is not None:
            res.spec["computeNodeGroupConfigurations"] = self._queue_configs(
                p["computeNodeGroupConfigurations"], cluster, account, region
            )
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

    # -- tags --------------------------------------------------------------------------------------
    def _by_arn(self, arn: str, account: str, region: str) -> Resource:
        for res in self._resources.values():
            if res.arn == arn and res.account == account and res.region == region:
                return res
        raise PcsError(
            "ResourceNotFoundException", f"Resource {arn} not found", resourceId=arn, resourceType="resource"
        )

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

    # -- agent-facing ------------------------------------------------------------------------------
    def _op_register_compute_node_group_instance(self, p: dict, region: str, account: str) -> dict:
        """Answers the node agent: ``bootstrapId`` is the EC2 instance id of one of the group's nodes."""
        try:
            cluster = self._cluster(p["clusterIdentifier"], account, region)
        except PcsError as exc:
            raise PcsError("AccessDeniedException", "The cluster ID doesn't exist.") from exc
        for group in self._all("compute_node_group", account, region, cluster.id):
            if p["bootstrapId"] in group.instances:
                index = group.instances.index(p["bootstrapId"]) + 1
                return {
                    "nodeID": f"{group.name}-{index}",
                    "sharedSecret": secrets.token_urlsafe(32),
                    "endpoints": copy.deepcopy(cluster.spec.get("endpoints", [])),
                    "clusterName": cluster.name,
                    "computeNodeGroupId": group.id,
                    "computeNodeGroupName": group.name,
                    "schedulerVersion": cluster.spec["scheduler"]["version"],
                    **(
                        {"nodeLifecycleActions": copy.deepcopy(group.spec["nodeLifecycleActions"])}
                        if group.spec.get("nodeLifecycleActions")
                        else {}
                    ),
                }
        raise PcsError("AccessDeniedException", "The EC2 instance isn't present.")


def _check_new_member(cluster: Any, siblings: list[Any], name: str, kind: str, label: str, plural: str,
                      limit: int, quota_code: str) -> None:
    """A cluster's node groups and queues: names are unique within it, and PCS caps how many it holds."""
    for other in siblings:
        if other.name == name:
            raise conflict(kind, other.id, f"{label} {name} already exists")
    if len(siblings) >= limit:
        raise quota(f"Cluster {cluster.name} already has {limit} {plural}", "cluster", cluster.id, quota_code)
