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

The control routes (``/_fmcluster/…``: health, faults, quotas, seeded reservations, the clock, schedule
runs, published messages, reset) are documented in :mod:`fmcluster_sandbox.control_routes`.

The process writes ``<home>/sandbox/sandbox.json`` (pid, port, endpoint_url, ca_bundle, started_at)
once it listens, and removes it when it stops, so ``fmcluster sandbox status|env`` find a foreground
sandbox too.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import signal
import ssl
import sys
import threading
from pathlib import Path
from typing import Any

from fmcluster_sandbox import scheduler_runs
from fmcluster_sandbox.app import SandboxApp
from fmcluster_sandbox.faults import Faults

HOST = "127.0.0.1"
STATE_FILE = "sandbox.json"
# A client that has not finished its TLS handshake by then is dropped (its connection thread ends).
HANDSHAKE_TIMEOUT_S = 30.0


def load_faults(faults_file: str | os.PathLike[str] | None) -> Faults:
    return Faults.from_file(faults_file) if faults_file else Faults()

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
        from werkzeug.serving import load_ssl_context

        from fmcluster_sandbox.tls import ensure_certificate

        cert, key = ensure_certificate(sandbox_dir)
        ssl_context, ca_bundle = load_ssl_context(str(cert), str(key)), str(cert)
        app.ca_bundle = ca_bundle

    class _Dated(MotoRequestHandler):
        def handle(self) -> None:
            # The TLS handshake happens here, in the connection's own thread: done in accept() (werkzeug's way), one
            # client that stalls mid-handshake (a process killed or interrupted there) held up every other
            # connection to the sandbox, which no AWS endpoint does.
            if isinstance(self.connection, ssl.SSLSocket):
                previous = self.connection.gettimeout()
                self.connection.settimeout(HANDSHAKE_TIMEOUT_S)
                try:
                    self.connection.do_handshake()
                except (OSError, ssl.SSLError):
                    return
                self.connection.settimeout(previous)
            super().handle()

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
        server = make_server(HOST, port, app, threaded=True, request_handler=handler)
    except OSError as exc:
        raise SystemExit(f"fmcluster sandbox: cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    if ssl_context is not None:
        server.socket = ssl_context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        server.ssl_context = ssl_context  # werkzeug's https scheme and its quiet handling of TLS errors
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
