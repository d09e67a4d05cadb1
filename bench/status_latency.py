"""How long ``status NAME --json`` waits on AWS's round trips, with the plan's reads one at a time and side by side.

    .venv/bin/python bench/status_latency.py [--runs 5] [--delay 0.1] [--backends pcs,eks] [--json]

A read-only command reads every resource of the spec by id (the plan: :meth:`fmcluster.engine.walk.Engine.plan`).
On AWS each read is a round trip of tens to hundreds of milliseconds, so an EKS cluster of a hundred resources read
one after the other waits seconds on the network alone; the plan reads each resource as soon as what it refers to
has been read, up to ``FMCLUSTER_MAX_OPERATIONS`` (8) at once.

In a private sandbox, the quickstart PCS cluster (``configs/quickstart-pcs.yaml``) and an EKS cluster
(``configs/p5-kueue-eks.yaml`` on a Capacity Block seeded in the sandbox, as ``bench/chaos_eks.py`` makes it) are
created, then every AWS call is held ``--delay`` seconds before its answer (the sandbox's per-call latency
``call.<service>.*``; the Kubernetes API is not delayed), and ``status NAME --json`` runs ``--runs`` times with
``FMCLUSTER_MAX_OPERATIONS=1`` (every read one after the other, as before) and ``--runs`` times with the default,
alternating, through the installed command. Reported per backend: the median wall time of each and their ratio;
both must print the same report (its resources and their states). Target (exit 1 when missed): the EKS cluster's
``status`` at least 1.5× faster with the default than one read at a time, both reports equal, nothing left after
``destroy``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_run import Run  # noqa: E402
from common import fmcluster_exe, run  # noqa: E402
from created_clusters import measure_each  # noqa: E402

EKS_TARGET = 1.5
# Every service a status of these clusters calls (PCS applies its own per-call delay; the sandbox delays the rest)
SERVICES = ("ec2", "eks", "pcs", "iam", "sts", "fsx", "s3", "cloudformation", "efs", "scheduler", "budgets",
            "sns", "resource-groups", "tagging", "ssm", "service-quotas", "pricing", "logs", "lambda", "dynamodb")


def _report_shape(stdout: str) -> object:
    """What must not depend on how the reads were scheduled: the resources and their states, the queues' nodes."""
    report = json.loads(stdout)
    return {"status": report.get("status"),
            "resources": sorted(json.dumps(r, sort_keys=True) for r in report.get("resources", [])),
            "queues": sorted(json.dumps({k: v for k, v in q.items() if "cost" not in k and "usd" not in k},
                                        sort_keys=True) for q in report.get("queues", []))}


def timings(cluster: Run, runs: int) -> dict:
    times: dict[str, list[float]] = {"one_at_a_time": [], "default": []}
    shapes: dict[str, object] = {}
    failures: list[str] = []
    for _ in range(runs):
        for label, env in (("one_at_a_time", cluster.env | {"FMCLUSTER_MAX_OPERATIONS": "1"}),
                           ("default", cluster.env)):
            started = time.monotonic()
            result = run([*fmcluster_exe(), "status", cluster.name, "--json"], env)
            times[label].append(time.monotonic() - started)
            if result.returncode != 0:
                failures.append(f"{label}: exit {result.returncode}: {result.stderr.strip()[-300:]}")
                continue
            shape = _report_shape(result.stdout)
            if shapes.setdefault(label, shape) != shape:
                failures.append(f"{label}: the report changed between runs")
    if len(shapes) == 2 and shapes["one_at_a_time"] != shapes["default"]:
        failures.append("the two schedules printed different reports")
    medians = {label: round(statistics.median(values), 2) for label, values in times.items()}
    return {"runs": runs, "median_s": medians,
            "ratio": round(medians["one_at_a_time"] / medians["default"], 2) if medians["default"] else None,
            "failures": failures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.1, help="seconds each AWS call is held before its answer")
    parser.add_argument("--backends", default="pcs,eks")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    started = time.monotonic()

    def measure(cluster: Run, directory: Path) -> dict:
        cluster.sandbox.faults({"latency": {f"call.{service}.*": args.delay for service in SERVICES}})
        return timings(cluster, args.runs)

    results, leftovers = measure_each([b for b in args.backends.split(",") if b], 3000,
                                      "fmcluster-bench-status-latency-", measure, say)
    ok = (not leftovers and all(not r.get("failures", ["create failed"]) for r in results.values())
          and ("eks" not in results or (results["eks"].get("ratio") or 0) >= EKS_TARGET))
    summary = {"delay_s": args.delay, "results": results, "leftovers": leftovers, "eks_target": EKS_TARGET,
               "seconds": round(time.monotonic() - started, 1), "ok": ok}
    print(json.dumps(summary, indent=2) if args.json else json.dumps(
        {b: f"median {r.get('median_s')} s, ratio {r.get('ratio')}" for b, r in results.items()} | {"ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
