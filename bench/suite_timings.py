"""The timing checks that used to sit inside tests (the project keeps timings out of the suite): each measured a few
times against a private sandbox or in-process, reported as a ratio to what it is compared with.

    .venv/bin/python bench/suite_timings.py [--runs 3] [--json] [--no-cdk]

Cases and their targets (the figure is the median of the runs; the bench exits 1 when one is missed):

- ``call_latency.ec2``: a call the sandbox holds 0.4 s (``call.ec2.DescribeVpcs``) answers within [1.0, 3.75)
  times the delay, and another call of the same service (DescribeSubnets) in under 1.0 times it.
  (was tests/sandbox/test_sandbox_server.py::test_call_latency_is_applied)
- ``call_latency.pcs``: a PCS call held 0.4 s answers within [1.0, 1.875) times the delay: the PCS emulator's own
  delay is applied once, not again by the server. (was test_pcs_call_latency_is_applied_once)
- ``lock_handover``: once a process holding a cluster's lock ends, the next ``locks.acquire`` gets it in under
  10 s. (was tests/state/test_locks.py::test_a_waiting_second_command_gets_the_lock_once_the_first_ends)
- ``pause_stop``: ``waiting.pause(60, stop)`` with the stop set after 0.2 s ends in under 30 s, i.e. a ratio to
  the 60 s pause under 0.5. (was tests/engine/test_waiting.py::test_a_pause_ends_at_once_when_the_command_stops)
- ``pcluster_create`` (no target; skipped with ``--no-cdk`` or without Node.js): a ParallelCluster create
  through ``pcluster.lib`` against the sandbox, and the share of it spent in ParallelCluster's CDK synthesis.
  (was printed by tests/sandbox/test_sandbox_pcluster.py::test_pcluster_cluster_lifecycle)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, Sandbox  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))

DELAY = 0.4
HOLDER = """
import sys
from pathlib import Path
from fmcluster.state import locks
locks.acquire(Path(sys.argv[1]), "demo", "us-east-1", "fmcluster create held.yaml")
print("held", flush=True)
sys.stdin.read()
"""


def _timed(call: Callable[[], Any]) -> float:
    start = time.monotonic()
    call()
    return time.monotonic() - start


def call_latency(sandbox: Sandbox, service: str) -> dict[str, float]:
    client = sandbox.client(service)
    if service == "ec2":
        held, other, op = client.describe_vpcs, client.describe_subnets, "DescribeVpcs"
    else:
        held, other, op = client.list_clusters, None, "ListClusters"
    held()  # warm the connection
    sandbox.faults({"latency": {f"call.{service}.{op}": DELAY}})
    try:
        figures = {"held_ratio": _timed(held) / DELAY}
        if other is not None:
            figures["other_ratio"] = _timed(other) / DELAY
    finally:
        sandbox.faults({"reset": True})
    return figures


def lock_handover() -> dict[str, float]:
    from fmcluster.state import locks

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "locks"
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "held"
        proc.terminate()
        proc.wait(timeout=30)
        start = time.monotonic()
        path = locks.acquire(directory, "demo", "us-east-1", "fmcluster scale demo")
        seconds = time.monotonic() - start
        locks.release(path)
    return {"seconds": seconds}


def pause_stop() -> dict[str, float]:
    from fmcluster.engine.waiting import Stop, Stopped, pause

    stop = Stop()
    threading.Timer(0.2, stop.set).start()
    start = time.monotonic()
    try:
        pause(60, stop)
    except Stopped:
        pass
    return {"ratio_to_pause": (time.monotonic() - start) / 60}


def pcluster_create(sandbox: Sandbox, run: int) -> dict[str, float]:
    from pcluster_fixture import default_subnet, minimal_config, reset_pcluster_clients, wait_for

    os.environ.update(sandbox.env)
    reset_pcluster_clients()
    import pcluster.lib as pc
    from pcluster.templates import cdk_builder

    synth: list[float] = []
    original = cdk_builder.CDKTemplateBuilder.build_cluster_template

    def timed_build(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            synth.append(time.monotonic() - start)

    cdk_builder.CDKTemplateBuilder.build_cluster_template = staticmethod(timed_build)
    name = f"bench-pc-{run}"
    try:
        start = time.monotonic()
        pc.create_cluster(cluster_name=name, region="us-east-1", rollback_on_failure=False,
                          cluster_configuration=minimal_config(default_subnet(sandbox.client("ec2")),
                                                               MinCount=0, MaxCount=2))
        wait_for(lambda: pc.describe_cluster(cluster_name=name, region="us-east-1")["cloudFormationStackStatus"],
                 lambda s: s != "CREATE_IN_PROGRESS", timeout=300)
        seconds = time.monotonic() - start
    finally:
        cdk_builder.CDKTemplateBuilder.build_cluster_template = original
    pc.delete_cluster(cluster_name=name, region="us-east-1")
    return {"create_seconds": seconds, "cdk_share": sum(synth) / seconds}


# case -> {figure: (low, high)}: the median must lie in [low, high)
TARGETS: dict[str, dict[str, tuple[float, float]]] = {
    "call_latency.ec2": {"held_ratio": (1.0, 3.75), "other_ratio": (0.0, 1.0)},
    "call_latency.pcs": {"held_ratio": (1.0, 1.875)},
    "lock_handover": {"seconds": (0.0, 10.0)},
    "pause_stop": {"ratio_to_pause": (0.0, 0.5)},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-cdk", action="store_true", help="skip the ParallelCluster create (about a minute)")
    args = parser.parse_args()

    samples: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Sandbox(Path(tmp) / "home").start()
        try:
            for run in range(args.runs):
                samples.setdefault("call_latency.ec2", []).append(call_latency(sandbox, "ec2"))
                samples.setdefault("call_latency.pcs", []).append(call_latency(sandbox, "pcs"))
                samples.setdefault("lock_handover", []).append(lock_handover())
                samples.setdefault("pause_stop", []).append(pause_stop())
                if not args.no_cdk and shutil.which("node"):
                    samples.setdefault("pcluster_create", []).append(pcluster_create(sandbox, run))
        finally:
            sandbox.stop()

    report: dict[str, Any] = {}
    missed = []
    for case, runs in samples.items():
        medians = {figure: statistics.median(r[figure] for r in runs) for figure in runs[0]}
        report[case] = {figure: round(value, 3) for figure, value in medians.items()}
        for figure, (low, high) in TARGETS.get(case, {}).items():
            if not low <= medians[figure] < high:
                missed.append(f"{case}.{figure} = {medians[figure]:.3f}, target [{low}, {high})")
    if args.json:
        print(json.dumps({"runs": args.runs, "cases": report, "missed": missed}, indent=2))
    else:
        for case, figures in report.items():
            targets = TARGETS.get(case, {})
            print(f"{case:20} " + "  ".join(
                f"{figure}={value}" + (f" (target [{targets[figure][0]}, {targets[figure][1]}))"
                                       if figure in targets else "") for figure, value in figures.items()))
        for line in missed:
            print(f"MISSED {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
