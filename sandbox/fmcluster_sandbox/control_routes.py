"""The sandbox's control routes: what tests and ``fmcluster sandbox`` ask of it that is not an AWS API.

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
    ``null`` removes it); ``{"nccl_replay_larger_runs": true}`` (an all-reduce over more nodes than any capture
    replays its type's 2-node capture: a model for tests that compare runs of one size, off by default).
    :mod:`fmcluster_sandbox.kube.node_health` says what a healthy node has.
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
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from fmcluster_sandbox import protocols, scheduler_runs


def answer(app: Any, environ: dict[str, Any], start_response: Any) -> Any:
    """Answer a ``/_fmcluster/…`` request to ``app`` (a :class:`fmcluster_sandbox.app.SandboxApp`)."""
    from fmcluster_sandbox.service_quotas import get_quotas, set_quotas

    path = environ.get("PATH_INFO", "")
    method = environ.get("REQUEST_METHOD", "GET")
    try:
        payload = json.loads(protocols.read_body(environ) or b"{}") if method == "POST" else {}
    except json.JSONDecodeError as exc:
        return app.json(start_response, 400, {"error": f"body is not JSON: {exc}"})
    if not isinstance(payload, dict):
        return app.json(start_response, 400, {"error": "body must be a JSON object"})
    try:
        routed = scheduler_runs.control(app.schedule_runs, method, path, payload)
        if routed is not None:
            return app.json(start_response, *routed)
        if path == "/_fmcluster/health":
            return app.json(start_response, 200, app.health())
        if path == "/_fmcluster/sns-published" and method == "GET":
            from fmcluster_sandbox.sns_published import published

            topic = parse_qs(environ.get("QUERY_STRING", "")).get("topic_arn", [""])[0]
            return app.json(start_response, *published(topic))
        if path == "/_fmcluster/faults":
            if method == "POST":
                from fmcluster_sandbox import topology

                moves = payload.get("topology_move")
                for instance_id, node in (moves.items() if isinstance(moves, dict) else ()):
                    if node is not None:  # a move must name a place the instance can hang off
                        topology.LAYOUT.check_move(instance_id, node)
                app.faults.update(payload)
            return app.json(start_response, 200, app.faults.to_json())
        if path == "/_fmcluster/quotas":
            if method == "POST":
                return app.json(start_response, 200, set_quotas(payload))
            qs = parse_qs(environ.get("QUERY_STRING", ""))
            return app.json(start_response, 200, get_quotas(qs.get("region", ["us-east-1"])[0],
                                                              qs.get("account", [None])[0]))
        if path == "/_fmcluster/capacity-reservations" and method == "POST":
            from moto.core import DEFAULT_ACCOUNT_ID

            account = str(payload.pop("account", None) or DEFAULT_ACCOUNT_ID)
            return app.json(start_response, 200, app.capacity_reservations.seed(payload, account))
        if path == "/_fmcluster/capacity-block-offerings" and method == "POST":
            from fmcluster_sandbox import capacity_blocks

            return app.json(start_response, 200, capacity_blocks.seed(payload))
        if path == "/_fmcluster/reset" and method == "POST":
            app.reset_state()
            return app.json(start_response, 200, {"ok": True})
    except (ValueError, TypeError, KeyError) as exc:
        return app.json(start_response, 400, {"error": str(exc)})
    return app.json(start_response, 404, {"error": f"no control route {method} {path}"})
