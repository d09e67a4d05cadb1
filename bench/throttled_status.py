"""``status NAME --json`` of a PCS and of an EKS cluster while the sandbox throttles 20 % of AWS calls.

    .venv/bin/python bench/throttled_status.py [--runs 10] [--rate 0.2] [--seed 2000] [--backends pcs,eks] [--json]

Starts a private sandbox, creates ``configs/quickstart-pcs.yaml`` and ``configs/p5-kueue-eks.yaml`` (on a
Capacity Block seeded for it, as bench/chaos_eks.py does) without throttling, then runs ``status NAME --json``
``--runs`` times per cluster through ``bench/counted_cli.py`` (the fmcluster of the Python running this
script), run *i* with the sandbox's throttling re-seeded to ``--seed + i`` at ``--rate`` on every service.
Run it with another checkout's interpreter (``/work/main/.venv/bin/python bench/throttled_status.py``) to
measure that checkout's fmcluster.

Per backend: how many runs exited 0 with a JSON report whose status is ACTIVE, the median and the longest
wall time, and the throttled answers fmcluster's clients got in all (each one retried, or the run failed);
the first lines of each failure. Then both clusters are destroyed (unthrottled) and the sandbox is scanned
for leftovers. Exits 1 unless every run succeeded and nothing was left.
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
from common import REPO, run  # noqa: E402
from created_clusters import measure_each  # noqa: E402


def statuses(cluster: Run, runs: int, rate: float, seed: int, directory: Path) -> dict:
    sandbox = cluster.sandbox
    times, throttled, failures, ok = [], 0, [], 0
    for i in range(runs):
        sandbox.faults({"throttle_rate": {"*": rate}, "seed": seed + i})
        out = directory / f"status-{cluster.name}-{i}.json"
        started = time.monotonic()
        result = run([sys.executable, str(REPO / "bench" / "counted_cli.py"), str(out), "status", cluster.name,
                      "--json"], cluster.env)
        times.append(time.monotonic() - started)
        sandbox.faults({"throttle_rate": {"*": None}})
        counted = json.loads(out.read_text()) if out.exists() else {}
        throttled += counted.get("throttled", 0)
        try:
            status = json.loads(result.stdout).get("status") if result.returncode == 0 else None
        except json.JSONDecodeError:
            status = None
        if result.returncode == 0 and status == "ACTIVE":
            ok += 1
        else:
            failures.append(f"seed {seed + i}: exit {result.returncode}, status {status}: "
                            + " | ".join(result.stderr.strip().splitlines()[-2:])[:300])
    return {"runs": runs, "exit_0_active": ok, "median_s": round(statistics.median(times), 2),
            "max_s": round(max(times), 2), "throttled_answers": throttled, "failures": failures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rate", type=float, default=0.2, help="share of AWS calls the sandbox throttles")
    parser.add_argument("--seed", type=int, default=2000, help="run i throttles with seed SEED+i")
    parser.add_argument("--backends", default="pcs,eks")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    started = time.monotonic()
    results, leftovers = measure_each(
        [b for b in args.backends.split(",") if b], args.seed, "fmcluster-bench-throttled-",
        lambda cluster, directory: statuses(cluster, args.runs, args.rate, args.seed, directory), say)
    ok = all(r.get("exit_0_active") == args.runs for r in results.values()) and not leftovers
    summary = {"rate": args.rate, "runs": args.runs, "results": results, "leftovers": leftovers,
               "seconds": round(time.monotonic() - started, 1), "ok": ok}
    print(json.dumps(summary, indent=2) if args.json else json.dumps(
        {b: f"{r.get('exit_0_active', 0)}/{args.runs} exit 0, median {r.get('median_s')} s, max {r.get('max_s')} s, "
            f"{r.get('throttled_answers')} throttled answers" for b, r in results.items()} | {"ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
