"""The sandbox's WSGI app: control routes, fault injection, the requests the sandbox answers itself, and moto
for the rest (:mod:`fmcluster_sandbox.server` says what it serves and how to run it)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fmcluster_sandbox import control_routes, cost_allocation_tags, ec2_faults, own_routes, protocols, scheduler_runs
from fmcluster_sandbox.clock import CLOCK
from fmcluster_sandbox.faults import Faults

PCS_TARGET_PREFIX = "AWSParallelComputingService."
ADVERTISED_SERVICES = ["ec2", "iam", "s3", "fsx", "cloudformation", "servicequotas", "sts", "pcs",
                       "resource-groups", "eks", "scheduler", "budgets", "ce", "sns"]
#: Path prefix of the per-cluster Kubernetes API endpoints (``<endpoint>/k8s/<cluster name>``).
KUBE_PREFIX = "/k8s/"
#: moto backends created eagerly in the background after start-up, so the first real call is fast.
_PREWARM = ["ec2", "s3", "iam", "sts", "cloudformation", "fsx", "servicequotas"]
_PREWARM_REGIONS = ["us-east-1", "us-west-2"]


class SandboxApp:
    """WSGI app: control routes, fault injection, PCS by header, the sandbox's EC2/FSx actions, and moto."""

    def __init__(self, faults: Faults | None = None):
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        from fmcluster_sandbox import (
            capacity_reservations,
            ec2_accounts,
            ec2_interfaces,
            ec2_launch,
            fsx_extras,
            iam_extras,
            instance_catalog,
            launch_template_paging,
            local_zones,
            pcluster_support,
            pcs_amis,
            placement_groups,
            reservation_group_launch,
            resource_groups,
            topology,
            vpc_teardown,
        )
        from fmcluster_sandbox.eks import EksEmulator
        from fmcluster_sandbox.pcs import PcsEmulator
        from fmcluster_sandbox.service_quotas import install_service_quotas

        # A real account has AWS's managed policies (AmazonSSMManagedInstanceCore, …) to attach.
        os.environ.setdefault("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
        self.faults = faults if faults is not None else Faults()
        self.moto = DomainDispatcherApplication(create_backend_app)
        self.placement_groups = placement_groups.REGISTRY
        self.capacity_reservations = capacity_reservations.REGISTRY
        fsx_extras.install()
        self.data_repositories = fsx_extras.REGISTRY
        ec2_accounts.install()
        instance_catalog.install()
        local_zones.install()
        ec2_launch.install()
        reservation_group_launch.install()  # after ec2_launch: group launches wrap its rules
        topology.install()  # after both: an instance takes its reservation's place in the network
        self.resource_groups = resource_groups.REGISTRY
        ec2_interfaces.install()
        launch_template_paging.install()
        vpc_teardown.install()
        iam_extras.install()
        pcs_amis.install()
        install_service_quotas()
        # Without fmcluster[parallelcluster] the sandbox serves PCS only: nothing to emulate pcluster for.
        self.pcluster_support = importlib.util.find_spec("pcluster") is not None
        if self.pcluster_support:
            pcluster_support.install(self.faults)
        self._new_pcs = lambda: PcsEmulator(self.faults)
        self.pcs = self._new_pcs()
        self.port: int | None = None
        self.endpoint_url: str | None = None
        #: the sandbox's TLS certificate (PEM), the certificate authority of every EKS cluster's endpoint
        self.ca_bundle: str | None = None
        self._new_eks = lambda: EksEmulator(self.faults, endpoint_url=lambda: self.endpoint_url,
                                            ca_pem=self._ca_pem, on_cluster_deleted=self._kube_forget)
        self.eks = self._new_eks()
        #: KUBE HOOK: the per-cluster Kubernetes API. When set, ``GET|POST|... /k8s/<cluster>/...`` goes to
        #: ``self.kube.handle(cluster_name, environ) -> (status, headers, body)``; unset, those paths are 404.
        self.kube: Any = None
        self._pcs_lock = threading.Lock()
        self.clock = CLOCK
        self.schedule_runs = scheduler_runs.Runs(CLOCK, lambda: self.endpoint_url, lambda: self.ca_bundle)
        self.cost_tags = cost_allocation_tags.CostAllocationTags(
            lambda account: cost_allocation_tags.ec2_tag_keys(account) | self.pcs.tag_keys(account)
            | self.eks.tag_keys(account), CLOCK.now)
        self._conditional_writes = threading.Lock()
        from fmcluster_sandbox.kube import KubeApi

        #: the per-cluster Kubernetes API (``/k8s/<cluster name>/...``), set last so that nothing above resets it:
        #: access entries, nodes and versions come from the EKS emulator (``self.eks``) when the sandbox has one;
        #: without it no principal is allowed and no node runs.
        self.kube = KubeApi(principal_allowed=self._kube_principal_allowed, nodes=self._kube_nodes,
                            cluster_version=self._kube_version, access_policies=self._kube_access_policies,
                            cluster_region=self._kube_region, faults=self.faults)

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _respond(start_response, status: int, headers: dict[str, str], body: bytes):
        from http import HTTPStatus

        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        hdrs = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "connection")}
        hdrs["Content-Length"] = str(len(body))
        start_response(f"{status} {reason}", list(hdrs.items()))
        return [body]

    def json(self, start_response, status: int, obj: Any):
        return self._respond(start_response, status, {"Content-Type": "application/json"}, json.dumps(obj).encode())

    def prewarm(self) -> None:
        """Create moto's most used backends (and the default VPCs) ahead of the first request."""
        try:
            from moto.core import DEFAULT_ACCOUNT_ID
            from moto.ec2.models import ec2_backends

            for name in _PREWARM:
                with self.moto.lock:
                    if name not in self.moto.app_instances:
                        self.moto.app_instances[name] = self.moto.create_app(name)
            for region in _PREWARM_REGIONS:
                ec2_backends[DEFAULT_ACCOUNT_ID][region]
        except Exception as exc:  # never fatal: the first real request will do the same work
            print(f"fmcluster sandbox: prewarm failed: {exc!r}", file=sys.stderr)

    def _ca_pem(self) -> bytes | None:
        if not self.ca_bundle:
            return None
        try:
            return Path(self.ca_bundle).read_bytes()
        except OSError:
            return None

    def _forget_own_state(self) -> None:
        with self._pcs_lock:
            self.pcs = self._new_pcs()
            self.eks = self._new_eks()
        if getattr(self, "kube", None) is not None:
            self.kube.reset()
        self.placement_groups.reset()
        self.capacity_reservations.reset()
        self.data_repositories.reset()
        self.resource_groups.reset()
        from fmcluster_sandbox import capacity_block_extensions, capacity_blocks

        capacity_blocks.reset()
        capacity_block_extensions.reset()
        from fmcluster_sandbox import topology

        topology.LAYOUT.reset()
        self.schedule_runs.reset()
        self.cost_tags.reset()
        self.clock.reset()

    def reset_state(self) -> None:
        from moto.moto_api._internal.models import moto_api_backend

        moto_api_backend.reset()
        self._forget_own_state()


    def health(self) -> dict[str, Any]:
        return {"ok": True, "pid": os.getpid(), "port": self.port, "endpoint_url": self.endpoint_url,
                "services": list(ADVERTISED_SERVICES), "pcs": True, "pcluster_support": self.pcluster_support,
                "faults_available": True}

    # -- AWS requests ------------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        def dated(status, headers, exc_info=None):
            # AWS's time is the sandbox clock's: one Date header, from it (the server's handler writes none).
            headers = [(k, v) for k, v in headers if k.lower() != "date"] + [("Date", self.clock.http_date())]
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        return self._route(environ, dated)

    def _route(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_fmcluster/"):
            return control_routes.answer(self, environ, start_response)
        if path.startswith(KUBE_PREFIX):
            return self._kube(environ, start_response, path)
        if path == "/moto-api/reset" and environ.get("REQUEST_METHOD") == "POST":
            self._forget_own_state()
            return self.moto(environ, start_response)

        target = environ.get("HTTP_X_AMZ_TARGET", "")
        access_key, region, service = protocols.credential_scope(environ)
        region = region or "us-east-1"
        params: dict[str, str] = {}
        if target.startswith(PCS_TARGET_PREFIX):
            service, protocol, operation = "pcs", "json", target[len(PCS_TARGET_PREFIX):]
        elif target:
            protocol, operation = "json", target.rsplit(".", 1)[-1]
        elif service == "s3":
            protocol, operation = "s3", protocols.s3_operation(environ)
        else:
            params = protocols.query_params(environ)
            if "Action" in params:
                protocol = "ec2" if service == "ec2" else "query"
                operation = params["Action"]
            else:
                protocol = "rest-json"
                operation = f"{environ.get('REQUEST_METHOD', 'GET')} {path}"
                if service == "eks":  # EKS's operation name, so call.eks.<Operation> delays apply
                    from fmcluster_sandbox.eks import routing

                    found = routing.match(environ.get("REQUEST_METHOD", "GET"), environ.get("RAW_URI") or path)
                    operation = found[0] if found else operation
        service = service or "unknown"

        # The PCS emulator applies call.pcs.<Op> delays itself; every other service is delayed here.
        delay = 0.0 if service == "pcs" else self.faults.call_delay(service, operation)
        if delay and delay > 0:
            held = f"call.{service}.{operation}"
            self.faults.note_held(held, "started")
            time.sleep(delay)
            try:
                return self._answer(environ, start_response, service, target, operation, params, access_key,
                                    region, protocol)
            finally:
                self.faults.note_held(held, "answered")
        return self._answer(environ, start_response, service, target, operation, params, access_key, region,
                            protocol)

    def _answer(self, environ, start_response, service: str, target: str, operation: str, params: dict[str, str],
                access_key: str | None, region: str, protocol: str):
        """Answer an AWS request after any per-call delay: throttled, refused for capacity, or served."""
        if self.faults.should_throttle(service):
            return self._respond(start_response, *protocols.throttle_response(service, protocol))
        if service == "ec2" and operation == "RunInstances":
            ice = ec2_faults.insufficient_capacity(self.faults, params, region)
            if ice is not None:
                return self._respond(start_response, 500, {"Content-Type": "text/xml"}, ice)
        if service == "ec2" and operation == "RebootInstances":
            return self._reboot(environ, start_response, params)
        answer = own_routes.answer(self, environ, service, target, operation, params, access_key, region)
        if answer is not None:
            return self._respond(start_response, *answer)
        if service == "s3" and operation == "PutObject" and environ.get("HTTP_IF_NONE_MATCH") == "*":
            # S3, "How to prevent object overwrites with conditional writes": of concurrent conditional writes of
            # one key, the first to finish succeeds and the rest get 412. moto checks, then writes, unlocked: on
            # this threaded server two could both succeed. One at a time, moto's check is S3's.
            with self._conditional_writes:
                return list(self.moto(environ, start_response))
        return self.moto(environ, start_response)

    def _reboot(self, environ, start_response, params: dict[str, str]):
        """EC2 RebootInstances, answered by moto; once it succeeds, the faults set to last until a reboot go
        (``node_health`` ``until_reboot``, :mod:`fmcluster_sandbox.faults`)."""
        answered: list[str] = []

        def started(status: str, headers: list, exc_info: Any = None):
            answered.append(status)
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        body = list(self.moto(environ, started))
        if answered and answered[0].startswith("200"):
            self.faults.rebooted([v for k, v in params.items() if k.startswith("InstanceId.")])
        return body

    def account(self, environ: dict[str, Any], access_key: str | None) -> str:
        from moto.core import DEFAULT_ACCOUNT_ID

        if os.environ.get("MOTO_ACCOUNT_ID"):
            return os.environ["MOTO_ACCOUNT_ID"]
        if environ.get("HTTP_X_MOTO_ACCOUNT_ID"):
            return environ["HTTP_X_MOTO_ACCOUNT_ID"]
        if access_key:
            try:
                from moto.iam.models import get_account_id_from

                return get_account_id_from(access_key)
            except Exception:
                pass
        return DEFAULT_ACCOUNT_ID

    def _kube(self, environ, start_response, path: str):
        """A request to a cluster's Kubernetes API endpoint: handed to the ``kube`` hook, 404 without one."""
        cluster_name = path[len(KUBE_PREFIX):].split("/", 1)[0]
        if self.kube is None or not cluster_name:
            body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                               "code": 404, "message": f"no Kubernetes API at {path}"}).encode()
            return self._respond(start_response, 404, {"Content-Type": "application/json"}, body)
        status, headers, body = self.kube.handle(cluster_name, environ)
        return self._respond(start_response, status, dict(headers or {}), body)

    def _caller_arn(self, account: str, access_key: str | None, region: str) -> str:
        """The ARN STS GetCallerIdentity would answer for these credentials (moto's own rules)."""
        try:
            from moto.sts.models import sts_backends

            partition = "aws"
            return sts_backends[account][partition].get_caller_identity(access_key or "", region)[1]
        except Exception:  # noqa: BLE001 - moto's default caller
            return f"arn:aws:sts::{account}:user/moto"

    def eks_answer(self, environ, access_key, region) -> tuple[int, dict, bytes]:
        body = protocols.read_body(environ)
        account = self.account(environ, access_key)
        raw_path = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "")
        return self.eks.handle(environ.get("REQUEST_METHOD", "GET"), raw_path, environ.get("QUERY_STRING", ""),
                               body, region, account, self._caller_arn(account, access_key, region))

    def _kube_forget(self, cluster: str, region: str) -> None:
        if getattr(self, "kube", None) is not None:
            self.kube.forget(cluster, region)

    def _kube_principal_allowed(self, cluster: str, region: str, principal_arn: str) -> bool:
        eks = getattr(self, "eks", None)
        return bool(eks is not None and eks.principal_allowed(cluster, region, principal_arn))

    def _kube_nodes(self, cluster: str, region: str) -> list[dict[str, Any]]:
        eks = getattr(self, "eks", None)
        return eks.nodes(cluster, region) if eks is not None else []

    def _kube_access_policies(self, cluster: str, region: str, principal_arn: str) -> list[dict[str, Any]] | None:
        """The principal's associated access policies, when the EKS emulator answers ``access_policies(name, region,
        principal)`` (ListAssociatedAccessPolicies form); None: RBAC is not evaluated."""
        lookup = getattr(getattr(self, "eks", None), "access_policies", None)
        return lookup(cluster, region, principal_arn) if lookup is not None else None

    def _kube_region(self, cluster: str, region: str) -> str | None:
        """The Region of the EKS cluster ``/k8s/<cluster>`` names, preferring the token's STS Region."""
        lookup = getattr(getattr(self, "eks", None), "cluster_region", None)
        return lookup(cluster, region) if lookup is not None else None

    def _kube_version(self, cluster: str, region: str) -> str | None:
        """The cluster's Kubernetes version, when the EKS emulator answers ``cluster_version(name, region)``."""
        lookup = getattr(getattr(self, "eks", None), "cluster_version", None)
        return lookup(cluster, region) if lookup is not None else None

    def pcs_answer(self, environ, operation, access_key, region) -> tuple[int, dict, bytes]:
        body = protocols.read_body(environ)
        try:
            status, headers, out = self.pcs.handle(operation, body, region, self.account(environ, access_key))
        except Exception as exc:  # a bug in the emulator: answer like AWS's 500, log the traceback
            import traceback

            traceback.print_exc()
            out = json.dumps({"__type": "InternalServerException", "message": repr(exc)}).encode()
            status, headers = 500, {"Content-Type": "application/x-amz-json-1.0"}
        headers = dict(headers or {})
        headers.setdefault("Content-Type", "application/x-amz-json-1.0")
        headers.setdefault("x-amzn-RequestId", protocols.request_id())
        return status, headers, out
