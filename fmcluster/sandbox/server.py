"""The sandbox endpoint: one local HTTPS port that speaks the AWS protocols fmcluster uses.

Run it with ``python -m fmcluster.sandbox.server --port P --home DIR [--faults FILE] [--no-tls]``
(or ``fmcluster sandbox``). It binds ``127.0.0.1`` only and serves, on the same port:

* **moto's server** (EC2, IAM, S3, FSx, CloudFormation, Service Quotas, STS and everything else moto
  has), routed the way moto routes: by the SigV4 credential scope;
* fmcluster's **PCS emulator** (:class:`fmcluster.sandbox.pcs.PcsEmulator`) for every request with
  ``X-Amz-Target: AWSParallelComputingService.<Operation>``;
* **fault injection** (:class:`fmcluster.sandbox.faults.Faults`) in front of both: a per-call delay,
  throttling errors in each protocol's own form, and ``InsufficientInstanceCapacity`` on EC2
  ``RunInstances`` for chosen instance types;
* EC2 **service quotas** that moto lacks (Running On-Demand P / G+VT / Standard / Trn instances, All P
  Spot Instance Requests), seeded with generous values per account and region.

Clients trust the self-signed certificate with ``AWS_CA_BUNDLE=<home>/sandbox/cert.pem``; requests are
signed with any credentials (``testing``/``testing``) and land in moto's account ``123456789012``.

Control routes (JSON in, JSON out; not AWS APIs):

``GET /_fmcluster/health``
    ``{"ok": true, "pid": ..., "port": ..., "endpoint_url": ..., "services": [...], "pcs": bool,
    "pcluster_support": bool, "faults_available": bool}``
``GET /_fmcluster/faults``
    the current :class:`Faults` as JSON.
``POST /_fmcluster/faults``
    merge changes (``Faults.update``), e.g. ``{"throttle_rate": {"ec2": 1.0}}``,
    ``{"insufficient_capacity": ["p5.48xlarge"]}``, ``{"latency": {"pcs": 0.5}}``, or ``{"reset": true}``;
    answers with the new faults.
``GET /_fmcluster/quotas?region=us-east-1``
    the EC2 service quotas the sandbox answers with for that region.
``POST /_fmcluster/quotas``
    ``{"region": "us-east-1", "L-417A185B": 0}`` sets quota values (``"service_code"`` defaults to
    ``ec2``, ``"account"`` to 123456789012); ``{"reset": true}`` restores the seeded values.
``POST /_fmcluster/capacity-reservations``
    seed an ODCR or a Capacity Block as AWS would hold it (moto has no capacity reservations; the sandbox
    serves Create/Describe/CancelCapacityReservation itself), e.g. ``{"instance_type": "p5en.48xlarge",
    "availability_zone": "us-east-1a", "count": 8, "type": "capacity-block", "state": "active",
    "start": "2026-12-01T00:00:00Z", "end": "2026-12-15T00:00:00Z", "reservation_id": "cr-0123456789abcdef0"}``;
    answers ``{"reservation_id": ...}``.
``POST /_fmcluster/reset``
    forget every resource: moto's state (default VPCs come back on next use), the PCS emulator's
    clusters, and quota changes. Faults are kept (reset them with ``POST /_fmcluster/faults
    {"reset": true}``). moto's own ``POST /moto-api/reset`` does the same (the sandbox resets PCS and
    quotas along with it).

The process writes ``<home>/sandbox/sandbox.json`` (pid, port, endpoint_url, ca_bundle, started_at)
once it listens, and removes it when it stops, so ``fmcluster sandbox status|env`` find a foreground
sandbox too.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import importlib.util
import io
import json
import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fmcluster.sandbox.service_quotas import get_quotas, install_service_quotas, set_quotas

HOST = "127.0.0.1"
STATE_FILE = "sandbox.json"
PCS_TARGET_PREFIX = "AWSParallelComputingService."
ADVERTISED_SERVICES = ["ec2", "iam", "s3", "fsx", "cloudformation", "servicequotas", "sts"]
#: moto backends created eagerly in the background after start-up, so the first real call is fast.
_PREWARM = ["ec2", "s3", "iam", "sts", "cloudformation", "fsx", "servicequotas"]
_PREWARM_REGIONS = ["us-east-1", "us-west-2"]

# --------------------------------------------------------------------------------------------------
# Request inspection
# --------------------------------------------------------------------------------------------------


def credential_scope(environ: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(access_key, region, service)`` from the SigV4 Authorization header or presigned query."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    cred = None
    if "Credential=" in auth:
        cred = auth.split("Credential=", 1)[1].split(",", 1)[0].strip()
    else:
        qs = parse_qs(environ.get("QUERY_STRING", ""))
        if "X-Amz-Credential" in qs:
            cred = qs["X-Amz-Credential"][0]
    if not cred:
        return None, None, None
    parts = cred.split("/")
    if len(parts) != 5:
        return None, None, None
    return parts[0], parts[2], parts[3].lower()


def _read_body(environ: dict[str, Any]) -> bytes:
    """Read the request body and put it back so that moto can read it again."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


def _query_params(environ: dict[str, Any]) -> dict[str, str]:
    """Query-protocol parameters (URL query plus a form-encoded body)."""
    params = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    ctype = environ.get("CONTENT_TYPE", "")
    if environ.get("REQUEST_METHOD") == "POST" and ctype.startswith("application/x-www-form-urlencoded"):
        body = _read_body(environ).decode("utf-8", "replace")
        params.update({k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()})
    return params


def _s3_operation(environ: dict[str, Any]) -> str:
    method = environ.get("REQUEST_METHOD", "GET")
    path = environ.get("PATH_INFO", "/").strip("/")
    host = environ.get("HTTP_HOST", "")
    virtual = host.count(".") >= 1 and not host.split(":")[0].replace(".", "").isdigit()
    has_key = ("/" in path) if not virtual else bool(path)
    if not path and not virtual:
        return "ListBuckets"
    if has_key:
        return {"GET": "GetObject", "PUT": "PutObject", "DELETE": "DeleteObject", "HEAD": "HeadObject"}.get(
            method, method
        )
    return {"GET": "ListObjects", "PUT": "CreateBucket", "DELETE": "DeleteBucket", "HEAD": "HeadBucket"}.get(
        method, method
    )


def _request_id() -> str:
    return str(uuid.uuid4())


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def throttle_response(service: str, protocol: str) -> tuple[int, dict[str, str], bytes]:
    """The error AWS sends when it throttles, in the protocol the caller speaks.

    ``protocol`` is one of ``json`` (awsJson 1.0/1.1), ``rest-json``, ``ec2``, ``query`` or ``s3``.
    """
    rid = _request_id()
    if protocol == "json":
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
        return 400, {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": rid}, body
    if protocol == "rest-json":
        body = json.dumps({"message": "Rate exceeded"}).encode()
        return 429, {
            "Content-Type": "application/json",
            "x-amzn-ErrorType": "ThrottlingException",
            "x-amzn-RequestId": rid,
        }, body
    if protocol == "ec2":
        return 503, {"Content-Type": "text/xml;charset=UTF-8"}, ec2_error_xml(
            "RequestLimitExceeded", "Request limit exceeded.", rid
        )
    if protocol == "s3":
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            "<Message>Please reduce your request rate.</Message>"
            f"<RequestId>{rid}</RequestId><HostId>{rid}</HostId></Error>"
        ).encode()
        return 503, {"Content-Type": "application/xml", "x-amz-request-id": rid}, body
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse><Error><Type>Sender</Type>'
        "<Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
        f"<RequestId>{rid}</RequestId></ErrorResponse>"
    ).encode()
    return 400, {"Content-Type": "text/xml", "x-amzn-RequestId": rid}, body


def ec2_error_xml(code: str, message: str, rid: str | None = None) -> bytes:
    rid = rid or _request_id()
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        f"<Code>{code}</Code><Message>{_xml_escape(message)}</Message></Error></Errors>"
        f"<RequestID>{rid}</RequestID></Response>"
    ).encode()


# --------------------------------------------------------------------------------------------------
# The WSGI application
# --------------------------------------------------------------------------------------------------


class _NoFaults:
    """Used only while ``fmcluster.sandbox.faults`` is not available: injects nothing."""

    def should_throttle(self, service: str) -> bool:
        return False

    def call_delay(self, service: str, operation: str) -> float:
        return 0.0

    def update(self, changes: dict) -> None:
        raise ValueError("fault injection is not available in this build (fmcluster.sandbox.faults)")

    def to_json(self) -> dict:
        return {}

    insufficient_capacity: set[str] = set()


def load_faults(faults_file: str | os.PathLike[str] | None) -> Any:
    if importlib.util.find_spec("fmcluster.sandbox.faults") is None:
        if faults_file:
            raise SystemExit(f"--faults {faults_file}: fault injection is not available in this build")
        return _NoFaults()
    from fmcluster.sandbox.faults import Faults

    if faults_file:
        return Faults.from_file(faults_file)
    return Faults()


def _make_pcs(faults: Any) -> Any:
    if importlib.util.find_spec("fmcluster.sandbox.pcs") is None:
        return None
    from fmcluster.sandbox.pcs import PcsEmulator

    return PcsEmulator(faults)


def _install_pcluster_support(faults: Any = None) -> bool:
    if importlib.util.find_spec("fmcluster.sandbox.pcluster_support") is None or \
            importlib.util.find_spec("pcluster") is None:  # without fmcluster[parallelcluster]: PCS only
        return False
    mod = importlib.import_module("fmcluster.sandbox.pcluster_support")
    mod.install(faults)
    return True


# EC2 actions moto 5.2.5 does not implement, served by the sandbox's own modules.
PLACEMENT_GROUP_ACTIONS = ("CreatePlacementGroup", "DescribePlacementGroups", "DeletePlacementGroup")
CAPACITY_RESERVATION_ACTIONS = ("CreateCapacityReservation", "DescribeCapacityReservations",
                                "CancelCapacityReservation")
FSX_TARGET_PREFIX = "AWSSimbaAPIService_v20180301."
FSX_DRA_OPERATIONS = ("CreateDataRepositoryAssociation", "DescribeDataRepositoryAssociations",
                      "DeleteDataRepositoryAssociation")


class SandboxApp:
    """WSGI app: control routes, fault injection, PCS by header, and moto for everything else."""

    def __init__(self, faults: Any = None, *, pcluster_support: bool | None = None):
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        from fmcluster.sandbox.capacity_reservations import CapacityReservations
        from fmcluster.sandbox.placement_groups import PlacementGroups

        # A real account has AWS's managed policies (AmazonSSMManagedInstanceCore, …) to attach.
        os.environ.setdefault("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
        self.faults = faults if faults is not None else load_faults(None)
        self.moto = DomainDispatcherApplication(create_backend_app)
        self.placement_groups = PlacementGroups()
        self.capacity_reservations = CapacityReservations()
        from fmcluster.sandbox import fsx_extras

        fsx_extras.install()
        self.data_repositories = fsx_extras.DataRepositoryAssociations()
        from fmcluster.sandbox import pcs_amis

        pcs_amis.install()
        self.pcs = _make_pcs(self.faults)
        install_service_quotas()
        self.pcluster_support = (
            _install_pcluster_support(self.faults) if pcluster_support is None else pcluster_support
        )
        self.port: int | None = None
        self.endpoint_url: str | None = None
        self._pcs_lock = threading.Lock()

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
        return self._respond(
            start_response, status, {"Content-Type": "application/json"}, json.dumps(obj).encode()
        )

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

    def reset_state(self) -> None:
        from moto.moto_api._internal.models import moto_api_backend

        moto_api_backend.reset()
        with self._pcs_lock:
            self.pcs = _make_pcs(self.faults)
        self.placement_groups.reset()
        self.capacity_reservations.reset()
        self.data_repositories.reset()

    # -- control routes ------------------------------------------------------------------------
    def _control(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            payload = json.loads(_read_body(environ) or b"{}") if method == "POST" else {}
        except json.JSONDecodeError as exc:
            return self._json(start_response, 400, {"error": f"body is not JSON: {exc}"})
        if not isinstance(payload, dict):
            return self._json(start_response, 400, {"error": "body must be a JSON object"})
        try:
            if path == "/_fmcluster/health":
                return self._json(start_response, 200, self.health())
            if path == "/_fmcluster/faults":
                if method == "POST":
                    self.faults.update(payload)
                return self._json(start_response, 200, self.faults.to_json())
            if path == "/_fmcluster/quotas":
                if method == "POST":
                    return self._json(start_response, 200, set_quotas(payload))
                qs = parse_qs(environ.get("QUERY_STRING", ""))
                region = qs.get("region", ["us-east-1"])[0]
                return self._json(start_response, 200, get_quotas(region, qs.get("account", [None])[0]))
            if path == "/_fmcluster/capacity-reservations" and method == "POST":
                from moto.core import DEFAULT_ACCOUNT_ID

                account = str(payload.pop("account", None) or DEFAULT_ACCOUNT_ID)
                return self._json(start_response, 200, self.capacity_reservations.seed(payload, account))
            if path == "/_fmcluster/reset" and method == "POST":
                self.reset_state()
                return self._json(start_response, 200, {"ok": True})
        except (ValueError, TypeError, KeyError) as exc:
            return self._json(start_response, 400, {"error": str(exc)})
        return self._json(start_response, 404, {"error": f"no control route {method} {path}"})

    def health(self) -> dict[str, Any]:
        services = list(ADVERTISED_SERVICES)
        if self.pcs is not None:
            services.append("pcs")
        return {
            "ok": True,
            "pid": os.getpid(),
            "port": self.port,
            "endpoint_url": self.endpoint_url,
            "services": services,
            "pcs": self.pcs is not None,
            "pcluster_support": self.pcluster_support,
            "faults_available": not isinstance(self.faults, _NoFaults),
        }

    # -- AWS requests ------------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_fmcluster/"):
            return self._control(environ, start_response)
        if path == "/moto-api/reset" and environ.get("REQUEST_METHOD") == "POST":
            with self._pcs_lock:
                self.pcs = _make_pcs(self.faults)
            self.placement_groups.reset()
            self.capacity_reservations.reset()
            self.data_repositories.reset()
            return self.moto(environ, start_response)

        target = environ.get("HTTP_X_AMZ_TARGET", "")
        access_key, region, service = credential_scope(environ)
        region = region or "us-east-1"
        params: dict[str, str] = {}
        if target.startswith(PCS_TARGET_PREFIX):
            service, protocol, operation = "pcs", "json", target[len(PCS_TARGET_PREFIX) :]
        elif target:
            protocol, operation = "json", target.rsplit(".", 1)[-1]
        elif service == "s3":
            protocol, operation = "s3", _s3_operation(environ)
        else:
            params = _query_params(environ)
            if "Action" in params:
                protocol = "ec2" if service == "ec2" else "query"
                operation = params["Action"]
            else:
                protocol = "rest-json"
                operation = f"{environ.get('REQUEST_METHOD', 'GET')} {path}"
        service = service or "unknown"

        # PcsEmulator.handle applies call.pcs.<Op> delays itself; every other service is delayed here.
        delay = 0.0 if service == "pcs" else self.faults.call_delay(service, operation)
        if delay and delay > 0:
            time.sleep(delay)
        if self.faults.should_throttle(service):
            return self._respond(start_response, *throttle_response(service, protocol))

        if service == "ec2" and operation == "RunInstances":
            ice = self._insufficient_capacity(params, access_key, region)
            if ice is not None:
                return self._respond(start_response, 500, {"Content-Type": "text/xml"}, ice)

        if service == "pcs":
            return self._pcs(environ, start_response, operation, access_key, region)
        if service == "ec2" and operation in PLACEMENT_GROUP_ACTIONS:
            account = self._account(environ, access_key)
            answer = self.placement_groups.handle(operation, params, region, account)
            return self._respond(start_response, *answer)
        if target.startswith(FSX_TARGET_PREFIX) and operation in FSX_DRA_OPERATIONS:
            account = self._account(environ, access_key)
            answer = self.data_repositories.handle(operation, _read_body(environ), region, account)
            return self._respond(start_response, *answer)
        if target.startswith(FSX_TARGET_PREFIX) and operation == "DescribeVolumes":  # moto has no FSx volumes
            from fmcluster.sandbox.fsx_extras import describe_volumes

            account = self._account(environ, access_key)
            return self._respond(start_response, *describe_volumes(_read_body(environ), region, account))
        if service == "ec2" and operation in CAPACITY_RESERVATION_ACTIONS:
            account = self._account(environ, access_key)
            answer = self.capacity_reservations.handle(operation, params, region, account)
            return self._respond(start_response, *answer)
        return self.moto(environ, start_response)

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

    def _pcs(self, environ, start_response, operation, access_key, region):
        if self.pcs is None:
            body = json.dumps(
                {"__type": "InternalServerException", "message": "the PCS emulator is not available"}
            ).encode()
            return self._respond(start_response, 500, {"Content-Type": "application/x-amz-json-1.0"}, body)
        body = _read_body(environ)
        account = self._account(environ, access_key)
        try:
            status, headers, out = self.pcs.handle(operation, body, region, account)
        except Exception as exc:  # a bug in the emulator: answer like AWS's 500, log the traceback
            import traceback

            traceback.print_exc()
            out = json.dumps({"__type": "InternalServerException", "message": repr(exc)}).encode()
            status, headers = 500, {"Content-Type": "application/x-amz-json-1.0"}
        headers = dict(headers or {})
        headers.setdefault("Content-Type", "application/x-amz-json-1.0")
        headers.setdefault("x-amzn-RequestId", _request_id())
        return self._respond(start_response, status, headers, out)

    def _insufficient_capacity(self, params: dict[str, str], access_key: str | None, region: str):
        wanted = set(getattr(self.faults, "insufficient_capacity", ()) or ())
        itype = params.get("InstanceType")
        if not itype:
            # RunInstances with a launch template and no explicit type: look the type up
            itype = self._launch_template_type(params, region)
        if not itype or itype not in wanted:
            return None
        az = params.get("Placement.AvailabilityZone") or self._subnet_az(params, region) or f"{region}a"
        message = (
            f"We currently do not have sufficient {itype} capacity in the Availability Zone you "
            f"requested ({az}). Our system will be working on provisioning additional capacity. You can "
            f"currently get {itype} capacity by not specifying an Availability Zone in your request or "
            "choosing a different Availability Zone."
        )
        return ec2_error_xml("InsufficientInstanceCapacity", message)

    @staticmethod
    def _ec2_backend(region: str):
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.ec2.models import ec2_backends

        return ec2_backends[DEFAULT_ACCOUNT_ID][region]

    def _subnet_az(self, params: dict[str, str], region: str) -> str | None:
        subnet = params.get("SubnetId") or params.get("NetworkInterface.1.SubnetId")
        if not subnet:
            return None
        try:
            return self._ec2_backend(region).get_subnet(subnet).availability_zone
        except Exception:
            return None

    def _launch_template_type(self, params: dict[str, str], region: str) -> str | None:
        lt_id = params.get("LaunchTemplate.LaunchTemplateId")
        lt_name = params.get("LaunchTemplate.LaunchTemplateName")
        if not (lt_id or lt_name):
            return None
        try:
            backend = self._ec2_backend(region)
            lt = (
                backend.get_launch_template(lt_id)
                if lt_id
                else backend.get_launch_template_by_name(lt_name)
            )
            version = params.get("LaunchTemplate.Version") or "$Default"
            if version == "$Latest":
                v = lt.latest_version()
            elif version == "$Default":
                v = lt.default_version()
            else:
                v = lt.get_version(version)
            return v.data.get("InstanceType")
        except Exception:
            return None


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


def serve(
    port: int,
    home: str | os.PathLike[str],
    faults_file: str | os.PathLike[str] | None = None,
    *,
    tls: bool = True,
    quiet: bool = False,
) -> None:
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

    ssl_context = None
    ca_bundle = None
    if tls:
        from fmcluster.sandbox.tls import ensure_certificate

        cert, key = ensure_certificate(sandbox_dir)
        ssl_context = (str(cert), str(key))
        ca_bundle = str(cert)

    handler = MotoRequestHandler
    if quiet:

        class _Quiet(MotoRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                pass

        handler = _Quiet

    try:
        server = make_server(
            HOST, port, app, threaded=True, request_handler=handler, ssl_context=ssl_context
        )
    except OSError as exc:
        reason = exc.strerror or exc
        raise SystemExit(f"fmcluster sandbox: cannot listen on {HOST}:{port}: {reason}") from None
    actual_port = server.server_port
    scheme = "https" if tls else "http"
    endpoint = f"{scheme}://{HOST}:{actual_port}"
    app.port, app.endpoint_url = actual_port, endpoint
    # moto calls itself at MOTO_PORT in a few places (e.g. CloudFormation custom resources)
    os.environ["MOTO_PORT"] = str(actual_port)

    state_path = sandbox_dir / STATE_FILE
    info = {
        "pid": os.getpid(),
        "port": actual_port,
        "endpoint_url": endpoint,
        "ca_bundle": ca_bundle,
        "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "home": str(Path(home).resolve()),
        "log": str(sandbox_dir / "sandbox.log"),
    }
    _write_state(state_path, info)

    def _stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    threading.Thread(target=app.prewarm, name="prewarm", daemon=True).start()
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
    parser = argparse.ArgumentParser(
        prog="python -m fmcluster.sandbox.server", description="Serve the fmcluster AWS sandbox."
    )
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
