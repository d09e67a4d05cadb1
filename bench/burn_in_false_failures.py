"""No false failure: `fmcluster burn-in` on a healthy cluster never fails a node, and runs the rounds `plan` counts.

    .venv/bin/python bench/burn_in_false_failures.py [--runs 20] [--scheduler kueue|volcano|kai] [--json]

One EKS cluster in a private sandbox, made with the installed command (``fmcluster create SPEC --yes``): the
scheduler (Kueue unless ``--scheduler`` says otherwise; the jobs are marked for it, Volcano's and KAI's workers asking
for the EFA installer's huge pages) and three p5.48xlarge queues of 2, 8 and 32 nodes, each on a Capacity Block
seeded for it (as bench/chaos_eks.py does), no fault injected. Then the installed ``fmcluster burn-in NAME --queue Q
--level L --json``:

* ``--runs`` times (20) at ``standard`` on the 8-node queue: a run that exits non-zero, fails a node or ends with an
  NCCL finding other than ``none`` is a false failure;
* once per level (quick, standard, long) on the 2- and 32-node queues, and quick and long on the 8-node one: the
  NCCL rounds each run reports against the rounds ``plan``'s estimate counts
  (fmcluster/catalog/burn_in_levels.py ``nccl_rounds``, the same function ``plan`` uses): within its range, and
  exactly its low end when the report shows no node's place in the network (``nccl.layers`` empty); the jobs
  (the check job and one MPIJob per all-reduce run) are reported beside them.

The sandbox answers the tools at once, so a run's wall time here is the jobs' scheduling and polling, not DCGM's
minutes: it is printed beside ``plan``'s estimate for the level, not compared with it. An all-reduce over more than
2 nodes needs the sandbox's ``nccl_replay_larger_runs`` switch (no larger p5 run is published; the narrowing compares
runs of one size with each other), which this script turns on.

Exits 1 on any false failure, any count outside the estimate, or a command that fails; the cluster is destroyed at
the end and the leftover scan must find nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from common import Sandbox, fmcluster_exe, run

from fmcluster.catalog.burn_in_levels import LEVELS, estimate, nccl_rounds
from fmcluster.catalog.network_topology import network_layers

TYPE = "p5.48xlarge"
QUEUES = {"two": 2, "eight": 8, "thirtytwo": 32}
ZONE = "us-east-1a"
JOB_TIMEOUT_MIN = "5"


def _iso(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def seed_block(sandbox: Sandbox, count: int) -> str:
    """A p5 Capacity Block of ``count`` instances, active now, as PurchaseCapacityBlock leaves it."""
    now = dt.datetime.now(dt.timezone.utc)
    reservation = f"cr-{uuid.uuid4().hex[:17]}"
    sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "instance_type": TYPE, "availability_zone": ZONE, "count": count, "type": "capacity-block",
        "start": _iso(now - dt.timedelta(hours=1)), "end": _iso(now + dt.timedelta(days=2)),
        "reservation_id": reservation})
    return reservation


def write_spec(path: Path, name: str, blocks: dict[str, str], scheduler: str) -> None:
    path.write_text(yaml.safe_dump({
        "name": name, "region": "us-east-1", "backend": "eks", "kubernetes": {"scheduler": scheduler},
        "queues": [{"name": queue, "instance_type": TYPE, "nodes": nodes,
                    "capacity": {"type": "capacity-block", "reservation_id": blocks[queue]}}
                   for queue, nodes in QUEUES.items()]}, sort_keys=False))


def cli(sandbox: Sandbox, home: Path, *args: str) -> str:
    done = run([*fmcluster_exe(), *args], sandbox.cli_env(home), timeout=1800)
    if done.returncode != 0 or "Traceback" in done.stderr:
        raise SystemExit(f"fmcluster {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout


def burn_in(sandbox: Sandbox, home: Path, name: str, queue: str, level: str) -> dict[str, Any]:
    """One ``fmcluster burn-in`` run: its exit code, report and wall time; what went wrong in ``problems``."""
    started = time.monotonic()
    done = run([*fmcluster_exe(), "burn-in", name, "--queue", queue, "--level", level, "--json",
                "--timeout", JOB_TIMEOUT_MIN], sandbox.cli_env(home), timeout=1800)
    seconds = time.monotonic() - started
    problems = []
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = {}
        problems.append(f"no JSON report (exit {done.returncode}): {done.stderr[-600:]}")
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("·")]
        problems.append(f"exit {done.returncode}: {' / '.join(said[-3:])[-600:]}")
    if "Traceback" in done.stderr:
        problems.append("a traceback")
    failed = [n["node"] for n in report.get("nodes", []) if n["state"] != "passed"]
    if failed:
        problems.append(f"nodes not passed: {failed}")
    finding = (report.get("nccl") or {}).get("finding")
    if level != "quick" and (finding or {}).get("kind") != "none":
        problems.append(f"NCCL finding: {finding}")
    if report and not report.get("passed"):
        problems.append("the report says passed: false")
    nccl = report.get("nccl") or {}
    return {"queue": queue, "nodes": QUEUES[queue], "level": level, "exit": done.returncode,
            "seconds": round(seconds, 1), "rounds": nccl.get("rounds"), "jobs": 1 + len(nccl.get("runs", [])),
            "topology": bool(nccl.get("layers")), "problems": problems}


def against_estimate(result: dict[str, Any]) -> dict[str, Any]:
    """The estimate's counted rounds and time for the run's level and size, and whether the run agrees."""
    nodes, level = result["nodes"], result["level"]
    low, high = (0, 0) if level == "quick" else nccl_rounds(nodes, network_layers(TYPE))
    rounds = result["rounds"]
    agrees = rounds is not None and (low <= rounds <= high if result["topology"] else rounds == low)
    seconds = estimate(level, TYPE, nodes).seconds
    return {"estimate_rounds": [low, high], "agrees": agrees,
            "estimate_s": [round(s, 1) for s in seconds] if seconds else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--scheduler", choices=("kueue", "volcano", "kai"), default="kueue")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else \
        (lambda *a: print(*a, flush=True))

    started = time.monotonic()
    repeated: list[dict[str, Any]] = []
    levels: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fmcluster-bench-burn-in-") as tmp:
        tmp_path = Path(tmp)
        sandbox = Sandbox(tmp_path / "sandbox-home").start()
        try:
            name = f"burn-{uuid.uuid4().hex[:8]}"
            spec, home = tmp_path / "spec.yaml", tmp_path / "cli-home"
            write_spec(spec, name, {queue: seed_block(sandbox, nodes) for queue, nodes in QUEUES.items()},
                       args.scheduler)
            cli(sandbox, home, "create", str(spec), "--yes")
            created_s = time.monotonic() - started
            say(f"created {name} ({args.scheduler}): 2 + 8 + 32 p5.48xlarge on Capacity Blocks, in {created_s:.0f} s")
            sandbox.faults({"nccl_replay_larger_runs": True})
            for k in range(1, args.runs + 1):
                result = burn_in(sandbox, home, name, "eight", "standard")
                result.update(against_estimate(result))
                repeated.append(result)
                say(f"run {k}: {result['seconds']} s, {result['rounds']} rounds, {result['jobs']} jobs"
                    + (f"; FALSE FAILURE: {'; '.join(result['problems'])}" if result["problems"] else ""))
            for queue in QUEUES:
                for level in LEVELS:
                    if queue == "eight" and level == "standard":
                        result = dict(repeated[0]) if repeated else burn_in(sandbox, home, name, queue, level)
                    else:
                        result = burn_in(sandbox, home, name, queue, level)
                    result.update(against_estimate(result))
                    levels.append(result)
                    say(f"{result['nodes']:>2} nodes {level:<8} {result['rounds']} rounds (estimate "
                        f"{result['estimate_rounds'][0]}-{result['estimate_rounds'][1]}"
                        f"{', topology known' if result['topology'] else ''}), {result['jobs']} jobs, "
                        f"{result['seconds']} s here; plan: {result['estimate_s']} s"
                        + ("" if result["agrees"] else " DISAGREES")
                        + (f"; FAILED: {'; '.join(result['problems'])}" if result["problems"] else ""))
            sandbox.faults({"reset": True})
            cli(sandbox, home, "destroy", name, "--yes")
            leftovers = {k: v for k, v in sandbox.inventory(name).items() if v}
        finally:
            sandbox.stop()

    false = [r for r in repeated if r["problems"]]
    disagree = [r for r in repeated + [lv for lv in levels if lv not in repeated] if not r["agrees"]]
    levels_agree = sum(r["agrees"] for r in levels)
    broken = [r for r in levels if r["problems"]]
    per_run = [r["seconds"] for r in repeated]
    result = {"scheduler": args.scheduler, "runs": len(repeated), "false_failures": len(false), "failures": false,
              "levels": levels, "disagreements": disagree, "level_failures": broken, "create_s": round(created_s, 1),
              "per_run_s_median": round(statistics.median(per_run), 1) if per_run else None,
              "per_run_s_max": max(per_run, default=None), "total_s": round(time.monotonic() - started, 1),
              "leftovers": leftovers}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"burn_in_false_failures ({args.scheduler}): {len(repeated) - len(false)}/{len(repeated)} standard "
              f"runs on 8 healthy p5.48xlarge nodes passed every node ({len(false)} false failures), "
              f"{result['per_run_s_median']} s per run (median, longest {result['per_run_s_max']} s); "
              f"{sum(not r['agrees'] for r in repeated)} of them with rounds outside plan's estimate; "
              f"{levels_agree}/{len(levels)} level runs' rounds within plan's estimate ({len(broken)} failed); "
              f"{result['total_s']} s in all"
              + (f"; LEFT BEHIND: {leftovers}" if leftovers else ""))
    return 1 if false or disagree or broken or leftovers else 0


if __name__ == "__main__":
    sys.exit(main())
