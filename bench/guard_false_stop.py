"""No false stop: the budget guard, re-decided run after run, never stops a node a minute before its moment.

    .venv/bin/python bench/guard_false_stop.py [--runs 20] [--json]

One PCS cluster (``configs/quickstart-pcs.yaml``, ``budget: {expires: 1h}``) in a private sandbox, created once with
the installed command (``fmcluster create SPEC --yes``). Run k (1-based) raises the lease to k hours with
``fmcluster create`` (which moves the guard: a new basis is a new decision and new schedules), reads the moment from
``fmcluster status NAME --json`` (its ``budget.hours_left``, on the sandbox's clock), moves the sandbox's clock to one
minute before it (``POST /_fmcluster/clock``, which runs every schedule then due before answering) and checks, with
plain boto3, that every node still runs: each compute node group keeps the spec's scaling (gpu 1..1, burst 0..2),
the cluster's running EC2 instances are the ones running before, and no schedule of the cluster's group ran.

Prints one summary line (or the JSON result) and exits 1 on any false stop, or when a command fails. The cluster is
destroyed at the end and the leftover scan must find nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import REPO, TAG, Sandbox, fmcluster_exe, run

# the spec's sizes (configs/quickstart-pcs.yaml): gpu `nodes: 1`, burst `nodes: {min: 0, max: 2}`
SPEC_SCALING = {"gpu": {"minInstanceCount": 1, "maxInstanceCount": 1},
                "burst": {"minInstanceCount": 0, "maxInstanceCount": 2}}


def write_spec(path: Path, name: str, hours: int) -> None:
    text = (REPO / "configs" / "quickstart-pcs.yaml").read_text().replace("name: quickstart-pcs", f"name: {name}")
    path.write_text(text + f"budget: {{expires: {hours}h}}\n")


def cli(sandbox: Sandbox, home: Path, *args: str) -> str:
    done = run([*fmcluster_exe(), *args], sandbox.cli_env(home))
    if done.returncode != 0 or "Traceback" in done.stderr:
        raise SystemExit(f"fmcluster {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout


def running_instances(sandbox: Sandbox, name: str) -> set[str]:
    pages = sandbox.client("ec2").get_paginator("describe_instances").paginate(
        Filters=[{"Name": f"tag:{TAG}", "Values": [name]}, {"Name": "instance-state-name", "Values": ["running"]}])
    return {i["InstanceId"] for page in pages for r in page["Reservations"] for i in r["Instances"]}


def false_stops(sandbox: Sandbox, name: str, before: set[str]) -> list[str]:
    """What stopped that should not have; [] when every node still runs."""
    pcs = sandbox.client("pcs")
    wrong = []
    for group, wanted in SPEC_SCALING.items():
        got = pcs.get_compute_node_group(clusterIdentifier=name, computeNodeGroupIdentifier=group)[
            "computeNodeGroup"]["scalingConfiguration"]
        if got != wanted:
            wrong.append(f"node group {group} scaled to {got}")
    gone = before - running_instances(sandbox, name)
    if gone:
        wrong.append(f"instances no longer running: {sorted(gone)}")
    ran = [r for r in sandbox.control("GET", "/_fmcluster/schedule-runs") if r["group"] == f"fmcluster-{name}"]
    if ran:
        wrong.append(f"schedules ran: {ran}")
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else (lambda *a: None)

    started = time.monotonic()
    stops: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="fmcluster-bench-guard-") as tmp:
        tmp_path = Path(tmp)
        sandbox = Sandbox(tmp_path / "sandbox-home").start()
        try:
            name = f"guard-{uuid.uuid4().hex[:8]}"
            spec, home = tmp_path / "spec.yaml", tmp_path / "cli-home"
            write_spec(spec, name, 1)
            cli(sandbox, home, "create", str(spec), "--yes")
            created_s = time.monotonic() - started
            before = running_instances(sandbox, name)
            if not before:
                raise SystemExit("no running instance after create: nothing to keep running")
            runs_started = time.monotonic()
            for k in range(1, args.runs + 1):
                if k > 1:  # a later lease: create decides the guard's moment again and moves the schedules
                    write_spec(spec, name, k)
                    cli(sandbox, home, "create", str(spec), "--yes")
                budget = json.loads(cli(sandbox, home, "status", name, "--json"))["budget"]
                sandbox.control("POST", "/_fmcluster/clock", {"advance_seconds": budget["hours_left"] * 3600 - 60})
                wrong = false_stops(sandbox, name, before)
                say(f"run {k}: guard at {budget['fires_at']}, clock a minute before: "
                    + ("; ".join(wrong) if wrong else "every node runs"))
                if wrong:
                    stops.append({"run": k, "fires_at": budget["fires_at"], "wrong": wrong})
            runs_s = time.monotonic() - runs_started
            cli(sandbox, home, "destroy", name, "--yes")
            leftovers = {k: v for k, v in sandbox.inventory(name).items() if v}
        finally:
            sandbox.stop()

    total_s = time.monotonic() - started
    result = {"runs": args.runs, "false_stops": len(stops), "stops": stops, "instances": len(before),
              "create_s": round(created_s, 1), "runs_s": round(runs_s, 1),
              "per_run_s": round(runs_s / max(1, args.runs), 1), "total_s": round(total_s, 1),
              "leftovers": leftovers}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"guard_false_stop: {args.runs - len(stops)}/{args.runs} runs left all {len(before)} instances running "
              f"a minute before the guard's moment ({len(stops)} false stops); one cluster, "
              f"{result['per_run_s']} s per run, {result['total_s']} s in all"
              + (f"; LEFT BEHIND: {leftovers}" if leftovers else ""))
    return 1 if stops or leftovers else 0


if __name__ == "__main__":
    sys.exit(main())
