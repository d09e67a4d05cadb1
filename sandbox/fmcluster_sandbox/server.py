"""The sandbox endpoint: one local HTTPS port that speaks the AWS protocols fmcluster uses.

Run it with ``python -m fmcluster_sandbox.server --port P --home DIR [--faults FILE] [--no-tls]``
(or ``fmcluster sandbox``). It binds ``127.0.0.1`` only and serves, on the same port:

* **moto's server** (EC2, IAM, S3, FSx, CloudFormation, Service Quotas, STS and everything else moto
  has), routed the way moto routes: by the SigV4 credential scope;
* the **PCS emulator** (:mod:`fmcluster_sandbox.pcs`) for every request with
  ``X-Amz-Target: AWSParallelComputingService.<Operation>``;
* the **EKS emulator** (:mod:`fmcluster_sandbox.eks`) for every request whose credential scope names ``eks``
  (REST-JSON), instead of moto's partial EKS; each cluster's endpoint is ``<endpoint_url>/k8s/<cluster name>``,
  answered by the ``kube`` hook (:attr:`SandboxApp.kube`, the per-cluster Kubernetes API) when one is set;
* the EC2 and FSx actions moto lacks (placement groups, capacity reservations and Capacity Blocks,
  DescribeCapacityBlockOfferings and PurchaseCapacityBlock, DescribeCapacityBlocks and DescribeCapacityBlockStatus
  (:mod:`fmcluster_sandbox.capacity_block_status`), DescribeInstanceTopology and
  DescribeCapacityReservationTopology over a per-zone network layout (:mod:`fmcluster_sandbox.topology_api`,
  :mod:`fmcluster_sandbox.topology`), Local Zones and their opt-in
  (:mod:`fmcluster_sandbox.local_zones`), FSx data repository associations and volumes), and EC2's launch rules in
  front of moto's RunInstances (:mod:`fmcluster_sandbox.ec2_launch`);
* Resource Groups for Capacity Reservation groups, which moto routes only in part
  (:mod:`fmcluster_sandbox.resource_groups`), and launches into them
  (:mod:`fmcluster_sandbox.reservation_group_launch`);
* Service Quotas for EC2 and PCS that moto lacks (:mod:`fmcluster_sandbox.service_quotas`);
* Cost Explorer's cost allocation tags, which moto lacks (:mod:`fmcluster_sandbox.cost_allocation_tags`), AWS
  Budgets (moto's) with each request checked against the model first, and the Budgets action moto lacks
  (:mod:`fmcluster_sandbox.budgets_extras`);
* EventBridge Scheduler: moto's store behind AWS's request rules (:mod:`fmcluster_sandbox.scheduler_api`), and
  one-time schedules that come due on the sandbox clock calling their universal target as their execution role
  (:mod:`fmcluster_sandbox.scheduler_runs`);
* each EKS cluster's **Kubernetes API** under ``/k8s/<cluster name>/`` (:mod:`fmcluster_sandbox.kube`), which
  authenticates ``aws eks get-token`` bearer tokens against the cluster's access entries;
* **fault injection** (:class:`fmcluster_sandbox.faults.Faults`) in front of all of it: a per-call delay,
  throttling errors in each protocol's own form, and ``InsufficientInstanceCapacity`` on EC2
  ``RunInstances`` for chosen instance types.

Every request the sandbox answers itself is checked against botocore's model of its service
(:mod:`fmcluster_sandbox.model_check`); ``docs/sandbox-fidelity.md`` lists each AWS rule the sandbox enforces,
the AWS page it follows and the test that proves it, and the rules it does not emulate.

Clients trust the self-signed certificate with ``AWS_CA_BUNDLE=<home>/sandbox/cert.pem``; requests are
signed with any credentials (``testing``/``testing``) and land in moto's account ``123456789012``.

Control routes (JSON in, JSON out; not AWS APIs):

``GET /_fmcluster/health``
    ``{"ok": true, "pid": ..., "port": ..., "endpoint_url": ..., "services": [...], "pcs": true,
    "pcluster_support": true, "faults_available": true}``
``GET /_fmcluster/faults``
    the current :class:`Faults` as JSON, with ``"held"``: per ``call.<service>.<Operation>`` delay, how many
    calls it has held (``started``) and how many of those were answered since.
``POST /_fmcluster/faults``
    merge changes (``Faults.update``), e.g. ``{"throttle_rate": {"ec2": 1.0}}``,
    ``{"insufficient_capacity": ["p5.48xlarge"]}``, ``{"latency": {"pcs": 0.5}}``,
    ``{"topology_move": {"i-0123456789abcdef0": "nn-0123456789abcdef0"}}``, or ``{"reset": true}``;
    answers with the new faults. The health of an EKS node for the workloads the sandbox runs there (the MPI
    Operator's launcher, :mod:`fmcluster_sandbox.kube.mpi_operator`), by node name or instance id:
    ``{"node_health": {"<node>": {"gpus_missing": 1}}}`` (``nvidia-smi -L`` lists one GPU fewer, a rank on it
    fails as CUDA does), ``{"efa_devices_missing": 1}`` (one ``fi_info`` block and one ``/sys/class/infiniband``
    device fewer; the all-reduce slows to the node's remaining share), ``{"never_finishes": true}`` (its
    all_reduce_perf hangs until the job's deadline), ``{"dcgm_failures": [{"gpu": 3, "test": "memory"}]}``
    (``dcgmi diag -r 2 -j`` there fails GPU 3's memory test, with DCGM's message and exit code; a test name
    dcgmi diag does not run is a 400 naming those it does); ``{"node_health": {"<node>": null}}`` heals it;
    ``{"slow_link": ["<node a>", "<node b>", 0.5]}`` (an all-reduce spanning both runs at that factor;
    ``null`` removes it). :mod:`fmcluster_sandbox.kube.node_health` says what a healthy node has.
``GET /_fmcluster/quotas?region=us-east-1``
    the service quotas the sandbox answers with for that region (``ec2`` vCPU quotas, ``pcs`` Clusters).
``POST /_fmcluster/quotas``
    set quota values as an account holder would have them raised: ``{"region": "us-east-1",
    "L-417A185B": 0}`` (``"service_code"`` defaults to ``ec2``, ``"account"`` to 123456789012), e.g.
    ``{"service_code": "pcs", "L-0ADE95E3": 10}`` for 10 PCS clusters per Region; ``{"reset": true}``
    restores the defaults (EC2 generous, PCS Clusters 5 as on AWS).
``POST /_fmcluster/capacity-reservations``
    seed an ODCR or a Capacity Block as AWS would hold it (PurchaseCapacityBlock buys offered ones), e.g.
    ``{"instance_type": "p5en.48xlarge", "availability_zone": "us-east-1a", "count": 8,
    "type": "capacity-block", "start": "2026-12-01T00:00:00Z", "end": "2026-12-15T00:00:00Z",
    "reservation_id": "cr-0123456789abcdef0"}``; the state follows the dates (scheduled, active, expired)
    unless ``"state"`` is given; answers ``{"reservation_id": ...}``.
``GET /_fmcluster/clock``
    ``{"now": "2026-12-07T01:00:00Z", "offset_seconds": 3600.0}``: sandbox time is real time plus the offset. Every
    response's ``Date`` header follows it (AWS sends its time there), and so do one-time schedules coming due; the
    rest of the sandbox (state timers, Capacity Block states) stays on real time.
``POST /_fmcluster/clock``
    ``{"advance_seconds": N}`` (N >= 0; a negative N is refused with 400) moves sandbox time forward and runs every
    schedule now due before answering, so the caller sees their effects; ``{"reset": true}`` goes back to real time
    (for the tests' isolation, not anything AWS does). Answers the clock as GET does, plus ``"ran"``: the runs this
    call made. A background tick runs schedules that come due as real time passes.
``GET /_fmcluster/schedule-runs``
    every schedule run so far: ``[{"schedule", "group", "at", "fired_at", "target", "outcome": "succeeded" |
    "denied" | "failed", "message"}]``. Not an AWS API: AWS shows runs only through CloudWatch metrics
    (InvocationAttemptCount, TargetErrorCount, ...) and the schedule's dead-letter queue.
``GET /_fmcluster/sns-published?topic_arn=ARN``
    every message published to the topic, in order: ``[{"message_id", "subject", "message"}]`` (404 for a topic
    that does not exist). Not an AWS API: AWS shows publishes only as CloudWatch metrics and subscribers' mail.
``POST /_fmcluster/reset``
    forget every resource: moto's state (default VPCs come back on next use), the PCS and EKS emulators'
    clusters, reservations, placement groups and quota changes, the schedule runs, and the clock's offset. Faults
    are kept (reset them with ``POST /_fmcluster/faults {"reset": true}``). moto's own ``POST /moto-api/reset``
    does the same.

The process writes ``<home>/sandbox/sandbox.json`` (pid, port, endpoint_url, ca_bundle, started_at)
once it listens, and removes it when it stops, so ``fmcluster sandbox status|env`` find a foreground
sandbox too.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fmcluster_sandbox import cost_allocation_tags, ec2_faults, protocols, scheduler_runs
from fmcluster_sandbox.clock import CLOCK
from fmcluster_sandbox.faults import Faults

HOST = "127.0.0.1"
STATE_FILE = "sandbox.json"
PCS_TARGET_PREFIX = "AWSParallelComputingService."
FSX_TARGET_PREFIX = "AWSSimbaAPIService_v20180301."
ADVERTISED_SERVICES = ["ec2", "iam", "s3", "fsx", "cloudformation", "servicequotas", "sts", "pcs",
                       "resource-groups", "eks", "scheduler", "budgets", "ce", "sns"]
#: Path prefix of the per-cluster Kubernetes API endpoints (``<endpoint>/k8s/<cluster name>``).
KUBE_PREFIX = "/k8s/"
#: moto backends created eagerly in the background after start-up, so the first real call is fast.
_PREWARM = ["ec2", "s3", "iam", "sts", "cloudformation", "fsx", "servicequotas"]
_PREWARM_REGIONS = ["us-east-1", "us-west-2"]
# EC2 actions moto 5.2.5 does not implement, served by the sandbox's own modules.
PLACEMENT_GROUP_ACTIONS = ("CreatePlacementGroup", "DescribePlacementGroups", "DeletePlacementGroup")
CAPACITY_RESERVATION_ACTIONS = ("CreateCapacityReservation", "DescribeCapacityReservations",
                                "ModifyCapacityReservation", "CancelCapacityReservation")
LOCAL_ZONE_ACTIONS = ("DescribeAvailabilityZones", "ModifyAvailabilityZoneGroup")
FSX_BACKUP_OPERATIONS = ("CreateBackup", "DescribeBackups", "DeleteBackup")
FSX_DRA_OPERATIONS = ("CreateDataRepositoryAssociation", "DescribeDataRepositoryAssociations",
                      "DeleteDataRepositoryAssociation")


def load_faults(faults_file: str | os.PathLike[str] | None) -> Faults:
    return Faults.from_file(faults_file) if faults_file else Faults()


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

    def _json(self, start_response, status: int, obj: Any):
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

    # -- control routes ------------------------------------------------------------------------
    def _control(self, environ, start_response):
        from fmcluster_sandbox.service_quotas import get_quotas, set_quotas

        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            payload = json.loads(protocols.read_body(environ) or b"{}") if method == "POST" else {}
        except json.JSONDecodeError as exc:
            return self._json(start_response, 400, {"error": f"body is not JSON: {exc}"})
        if not isinstance(payload, dict):
            return self._json(start_response, 400, {"error": "body must be a JSON object"})
        try:
            routed = scheduler_runs.control(self.schedule_runs, method, path, payload)
            if routed is not None:
                return self._json(start_response, *routed)
            if path == "/_fmcluster/health":
                return self._json(start_response, 200, self.health())
            if path == "/_fmcluster/sns-published" and method == "GET":
                from fmcluster_sandbox.sns_published import published

                topic = parse_qs(environ.get("QUERY_STRING", "")).get("topic_arn", [""])[0]
                return self._json(start_response, *published(topic))
            if path == "/_fmcluster/faults":
                if method == "POST":
                    from fmcluster_sandbox import topology

                    moves = payload.get("topology_move")
                    for instance_id, node in (moves.items() if isinstance(moves, dict) else ()):
                        if node is not None:  # a move must name a place the instance can hang off
                            topology.LAYOUT.check_move(instance_id, node)
                    self.faults.update(payload)
                return self._json(start_response, 200, self.faults.to_json())
            if path == "/_fmcluster/quotas":
                if method == "POST":
                    return self._json(start_response, 200, set_quotas(payload))
                qs = parse_qs(environ.get("QUERY_STRING", ""))
                return self._json(start_response, 200, get_quotas(qs.get("region", ["us-east-1"])[0],
                                                                  qs.get("account", [None])[0]))
            if path == "/_fmcluster/capacity-reservations" and method == "POST":
                from moto.core import DEFAULT_ACCOUNT_ID

                account = str(payload.pop("account", None) or DEFAULT_ACCOUNT_ID)
                return self._json(start_response, 200, self.capacity_reservations.seed(payload, account))
            if path == "/_fmcluster/capacity-block-offerings" and method == "POST":
                from fmcluster_sandbox import capacity_blocks

                return self._json(start_response, 200, capacity_blocks.seed(payload))
            if path == "/_fmcluster/reset" and method == "POST":
                self.reset_state()
                return self._json(start_response, 200, {"ok": True})
        except (ValueError, TypeError, KeyError) as exc:
            return self._json(start_response, 400, {"error": str(exc)})
        return self._json(start_response, 404, {"error": f"no control route {method} {path}"})

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
            return self._control(environ, start_response)
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
        answer = self._own(environ, service, target, operation, params, access_key, region)
        if answer is not None:
            return self._respond(start_response, *answer)
        if service == "s3" and operation == "PutObject" and environ.get("HTTP_IF_NONE_MATCH") == "*":
            # S3, "How to prevent object overwrites with conditional writes": of concurrent conditional writes of
            # one key, the first to finish succeeds and the rest get 412. moto checks, then writes, unlocked: on
            # this threaded server two could both succeed. One at a time, moto's check is S3's.
            with self._conditional_writes:
                return list(self.moto(environ, start_response))
        return self.moto(environ, start_response)

    def _own(self, environ, service: str, target: str, operation: str, params: dict[str, str],
             access_key: str | None, region: str) -> tuple[int, dict, bytes] | None:
        """The answer of a request the sandbox serves itself, or None for moto's."""
        if service == "pcs":
            return self._pcs(environ, operation, access_key, region)
        if service == "eks":
            return self._eks(environ, access_key, region)
        if service in ("scheduler", "budgets", "ce"):
            from fmcluster_sandbox import guard_services

            return guard_services.answer(self.cost_tags, environ, service, target, operation, region,
                                         self._account(environ, access_key))
        if service == "ec2" and operation in PLACEMENT_GROUP_ACTIONS:
            return self.placement_groups.handle(operation, params, region, self._account(environ, access_key))
        if service == "ec2" and operation in CAPACITY_RESERVATION_ACTIONS:
            return self.capacity_reservations.handle(operation, params, region, self._account(environ, access_key))
        if service == "resource-groups":  # moto 5.2.5 routes only part of it: see fmcluster_sandbox.resource_groups
            return self.resource_groups.handle(environ, region, self._account(environ, access_key))
        if service == "ec2" and operation == "DescribeCapacityBlockOfferings":
            from fmcluster_sandbox import capacity_blocks

            return capacity_blocks.handle(params, region)
        if service == "ec2" and operation == "PurchaseCapacityBlock":
            from fmcluster_sandbox import capacity_blocks

            return capacity_blocks.purchase(params, region, self._account(environ, access_key))
        if service == "ec2" and operation == "DescribeCapacityBlockStatus":
            from fmcluster_sandbox import capacity_block_status

            return capacity_block_status.describe_status(params, region, self._account(environ, access_key),
                                                         self.faults)
        if service == "ec2" and operation == "DescribeCapacityBlocks":
            from fmcluster_sandbox import capacity_block_status

            return capacity_block_status.describe_blocks(params, region, self._account(environ, access_key))
        if service == "ec2" and operation in ("DescribeCapacityBlockExtensionOfferings",
                                              "PurchaseCapacityBlockExtension"):
            from fmcluster_sandbox import capacity_block_extensions

            serve = (capacity_block_extensions.describe if operation.startswith("Describe")
                     else capacity_block_extensions.purchase)
            return serve(params, region, self._account(environ, access_key))
        if service == "ec2" and operation in ("DescribeInstanceTopology", "DescribeCapacityReservationTopology"):
            from fmcluster_sandbox import topology_api

            return topology_api.handle(operation, params, region, self._account(environ, access_key), self.faults)
        if service == "ec2" and operation in LOCAL_ZONE_ACTIONS:
            from fmcluster_sandbox import local_zones

            return local_zones.handle(operation, params, region, self._account(environ, access_key))
        if target.startswith(FSX_TARGET_PREFIX) and operation in FSX_DRA_OPERATIONS:
            return self.data_repositories.handle(operation, protocols.read_body(environ), region,
                                                 self._account(environ, access_key))
        if target.startswith(FSX_TARGET_PREFIX) and operation == "UpdateFileSystem":  # moto has no UpdateFileSystem
            from fmcluster_sandbox.fsx_extras import update_file_system

            return update_file_system(protocols.read_body(environ), region, self._account(environ, access_key))
        if target.startswith(FSX_TARGET_PREFIX) and operation in FSX_BACKUP_OPERATIONS:  # moto serves them unchecked
            from fmcluster_sandbox.fsx_extras import check_request

            return check_request(operation, protocols.read_body(environ))  # None: moto answers
        if target.startswith(FSX_TARGET_PREFIX) and operation == "DescribeVolumes":  # moto has no FSx volumes
            from fmcluster_sandbox.fsx_extras import describe_volumes

            return describe_volumes(protocols.read_body(environ), region, self._account(environ, access_key))
        return None

    def _account(self, environ: dict[str, Any], access_key: str | None) -> str:
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

    def _eks(self, environ, access_key, region) -> tuple[int, dict, bytes]:
        body = protocols.read_body(environ)
        account = self._account(environ, access_key)
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

    def _pcs(self, environ, operation, access_key, region) -> tuple[int, dict, bytes]:
        body = protocols.read_body(environ)
        try:
            status, headers, out = self.pcs.handle(operation, body, region, self._account(environ, access_key))
        except Exception as exc:  # a bug in the emulator: answer like AWS's 500, log the traceback
            import traceback

            traceback.print_exc()
            out = json.dumps({"__type": "InternalServerException", "message": repr(exc)}).encode()
            status, headers = 500, {"Content-Type": "application/x-amz-json-1.0"}
        headers = dict(headers or {})
        headers.setdefault("Content-Type", "application/x-amz-json-1.0")
        headers.setdefault("x-amzn-RequestId", protocols.request_id())
        return status, headers, out


# --------------------------------------------------------------------------------------------------
# Serving
# --------------------------------------------------------------------------------------------------


def _write_state(path: Path, info: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    os.replace(tmp, path)


def _remove_state_if_ours(path: Path) -> None:
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def serve(port: int, home: str | os.PathLike[str], faults_file: str | os.PathLike[str] | None = None, *,
          tls: bool = True, quiet: bool = False) -> None:
    """Serve the sandbox on ``127.0.0.1:port`` (0 = any free port) until SIGINT/SIGTERM."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    sandbox_dir = Path(home) / "sandbox"
    sandbox_dir.mkdir(parents=True, exist_ok=True)
    try:
        faults = load_faults(faults_file)
    except (OSError, ValueError, TypeError) as exc:
        raise SystemExit(f"fmcluster sandbox: --faults {faults_file}: {exc}") from None
    app = SandboxApp(faults)

    ssl_context = ca_bundle = None
    if tls:
        from fmcluster_sandbox.tls import ensure_certificate

        cert, key = ensure_certificate(sandbox_dir)
        ssl_context, ca_bundle = (str(cert), str(key)), str(cert)
        app.ca_bundle = ca_bundle

    class _Dated(MotoRequestHandler):
        def date_time_string(self, timestamp: float | None = None) -> str:
            # http.server writes a Date of its own before the app's headers; the app's (sandbox time) is the one
            return ""

        def send_header(self, keyword: str, value: str) -> None:
            if keyword.lower() == "date" and not value:
                return
            super().send_header(keyword, value)

    handler: type[MotoRequestHandler] = _Dated
    if quiet:
        class _Quiet(_Dated):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                pass

        handler = _Quiet

    try:
        server = make_server(HOST, port, app, threaded=True, request_handler=handler, ssl_context=ssl_context)
    except OSError as exc:
        raise SystemExit(f"fmcluster sandbox: cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    actual_port = server.server_port
    endpoint = f"{'https' if tls else 'http'}://{HOST}:{actual_port}"
    app.port, app.endpoint_url = actual_port, endpoint
    # moto calls itself at MOTO_PORT in a few places (e.g. CloudFormation custom resources)
    os.environ["MOTO_PORT"] = str(actual_port)

    state_path = sandbox_dir / STATE_FILE
    _write_state(state_path, {
        "pid": os.getpid(), "port": actual_port, "endpoint_url": endpoint, "ca_bundle": ca_bundle,
        "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "home": str(Path(home).resolve()), "log": str(sandbox_dir / "sandbox.log"),
    })

    def _stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    threading.Thread(target=app.prewarm, name="prewarm", daemon=True).start()
    scheduler_runs.Ticker(app.schedule_runs).start()
    print(f"fmcluster sandbox listening on {endpoint} (pid {os.getpid()})", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        _remove_state_if_ours(state_path)
        server.server_close()
        print("fmcluster sandbox stopped", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fmcluster_sandbox.server",
                                     description="Serve the fmcluster AWS sandbox.")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free port)")
    parser.add_argument("--home", required=True, help="fmcluster home; files go to HOME/sandbox/")
    parser.add_argument("--faults", default=None, help="JSON/YAML file with the initial faults")
    parser.add_argument("--no-tls", action="store_true", help="serve plain HTTP instead of HTTPS")
    parser.add_argument("--quiet", action="store_true", help="do not log every request")
    args = parser.parse_args(argv)
    serve(args.port, args.home, args.faults, tls=not args.no_tls, quiet=args.quiet)
    # Nothing is left to clean up: skip tearing down thousands of moto objects (a second or more).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
