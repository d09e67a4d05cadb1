"""Chaos lifecycles in the sandbox: faults, spec edits, out-of-band changes and kills inside IAM calls, then
the live AWS state is compared with the spec and every leftover is looked for.

    python bench/chaos.py [--runs 10] [--seed 1000] [--kinds KIND,...] [--json]

Run *i* uses seed ``--seed + i`` for everything random in it, and its kind is chosen by that seed
(``KINDS[seed % len(KINDS)]``), so ``--runs 1 --seed SEED`` repeats one run exactly:

* ``fault-pcs`` / ``fault-parallelcluster`` (this module): 20 % of all sandbox calls throttled for the whole
  run; one SIGKILL of the CLI at a random moment of ``create`` or of ``destroy`` (chosen by the seed), then
  the same command again; on PCS, an ICE (``insufficient_capacity`` for the queue's type) during a second
  ``create``, which must fail clearly and name InsufficientInstanceCapacity; the fault is then cleared and
  ``create`` re-run.
* ``edits-pcs`` (bench/chaos_kinds.py): counts up, down and back to an earlier value through ``scale`` and
  through the spec file + ``create``, an instance-type edit, a queue added then removed, under throttling;
  the live state must equal the spec after every step.
* ``drift-pcs``: a queue deleted and another node group's scaling changed with boto3 behind fmcluster's
  back; ``status --json`` must list both in ``drift`` and ``create`` must repair them.
* ``iam-kill-pcs``: SIGKILL inside one IAM call of create and one of destroy, rotating with the seed (five
  consecutive seeds cover every call; the sandbox holds that call 4 s),
  each followed by ``destroy``, which must leave nothing, IAM role and instance profile included.
* ``edits-parallelcluster``: counts changed and a queue added through the spec file + ``create``.
* ``kill-eks`` (bench/chaos_eks.py): the EKS example (its seed's scheduler: Kueue, Volcano or KAI) plus an
  on-demand queue, under throttling with EKS's states held (``EKS_LATENCY``); one or two SIGKILLs at random
  moments of ``create`` (even seeds) or ``destroy`` (odd seeds), then the same command again. Converged: the
  cluster, its node groups (counts, instances) and add-ons ACTIVE, a Kubernetes Node per instance with its GPUs,
  the scheduler's queue objects with the catalog's GPU quotas (read from the cluster's Kubernetes API with an
  ``aws eks get-token`` token), ``status --json`` without drift, and nothing left after ``destroy``.

A run **converges** only when the live state (read from the sandbox with boto3, never from fmcluster's
output) equalled the spec after its last ``create`` (PCS: every node group's min/max and instance types, the
set of queues and their node groups, all ACTIVE; ParallelCluster: the stack's deployed configuration), no
command printed a traceback, no command that had to succeed failed, there were never two resources of one
name, and the final ``destroy`` left nothing: EC2 instances, security groups, launch templates, placement
groups, PCS clusters, the ``AWSPCS-<name>-<region>`` IAM role and instance profile, CloudFormation stacks,
EKS clusters, node groups and add-ons, EKS-tagged instances and security groups, the ``<name>-<region>-eks-*``
roles, VPCs, subnets, gateways, Elastic IPs, route tables, VPC endpoints, FSx file systems.

Prints ``{"runs", "converged", "leaked", "duplicates", "drift_repaired"}`` (with ``--json`` also every run's
detail) and exits 1 unless every run converged with nothing leaked and no duplicates.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_eks import EksKillRun  # noqa: E402
from chaos_kinds import DriftRun, EditRun, IamKillRun, PclusterEditRun  # noqa: E402
from chaos_run import THROTTLE, TIMEOUT, Run  # noqa: E402
from common import Sandbox, fmcluster_exe, run  # noqa: E402

# PCS transitions slow enough that a kill lands mid-way (create takes ~4 s without throttling)
PCS_LATENCY = {"pcs.cluster": 2.0, "pcs.compute_node_group": 1.0, "pcs.queue": 0.5}


class FaultRun(Run):
    """The fault lifecycle: create → status → destroy under throttling, a SIGKILL and (PCS) an ICE."""

    kind = "fault-pcs"

    def execute(self) -> dict:
        sb = self.sandbox
        sb.faults({"reset": True})
        faults: dict = {"throttle_rate": {"*": THROTTLE}, "seed": self.seed}
        if self.backend == "pcs":
            faults["latency"] = PCS_LATENCY
        sb.faults(faults)
        kill_in = self.rng.choice(["create", "destroy"])
        create_s = 6.0 if self.backend == "pcs" else 30.0
        self.say(f"{self.backend} {self.name} seed {self.seed}: kill during {kill_in}, "
                 f"throttle {THROTTLE:.0%}{', ICE on ' + self.instance_type if self.backend == 'pcs' else ''}")
        if kill_in == "create":
            self.killed("create", str(self.spec), "--yes", within=create_s)
        if self.backend == "pcs":
            sb.faults({"insufficient_capacity": [self.instance_type]})
            ice = self.cli("create", str(self.spec), "--yes")
            if ice.returncode == 0:
                self.problems.append("create succeeded although the queue's instance type had no capacity")
            elif "InsufficientInstanceCapacity" not in ice.stderr + ice.stdout:
                self.problems.append("ICE failure does not name InsufficientInstanceCapacity")
            sb.faults({"insufficient_capacity": []})
        created = self.create().returncode == 0
        if created:
            self.check_duplicates("after create")
            self.check_status()
            if self.backend == "pcs":
                self.matches_spec("after the last create")
        if kill_in == "destroy":
            self.killed("destroy", self.name, "--yes", within=4.0 if self.backend == "pcs" else 8.0)
        destroyed = self.destroy_and_scan()
        return self.result(created and destroyed, kill_in=kill_in, created=created, destroyed=destroyed)

    def check_status(self) -> None:
        status = self.must("status", self.name, "--json")
        if status.returncode == 0:
            report = json.loads(status.stdout)
            if report.get("status") != "ACTIVE":
                self.problems.append(f"status says {report.get('status')} after a successful create")


class PclusterFaultRun(FaultRun):
    kind, backend = "fault-parallelcluster", "parallelcluster"


# with the default --seed 1000, ten runs give two each of kill-eks, fault-pcs, iam-kill and fault-parallelcluster
KINDS: list[type[Run]] = [FaultRun, IamKillRun, PclusterFaultRun, PclusterEditRun, DriftRun, EditRun, EksKillRun]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1000, help="run i uses seed SEED+i")
    parser.add_argument("--kinds", default="", help="comma-separated kinds to keep (default: all): "
                        + ", ".join(k.kind for k in KINDS))
    parser.add_argument("--json", action="store_true", help="print the summary and every run as JSON")
    args = parser.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    wanted = [k for k in args.kinds.split(",") if k]
    unknown = set(wanted) - {k.kind for k in KINDS}
    if unknown:
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")

    results = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fmcluster-bench-chaos-") as tmp:
        sandbox = Sandbox(Path(tmp) / "sandbox-home").start()
        try:
            for i in range(args.runs):
                seed = args.seed + i
                kinds = [k for k in KINDS if not wanted or k.kind in wanted]
                run_ = kinds[seed % len(kinds)](sandbox, Path(tmp), seed)
                try:
                    result = run_.execute()
                except Exception as exc:  # a crash of the harness or a hung command: report, clean up, go on
                    sandbox.faults({"reset": True})
                    run([*fmcluster_exe(), "destroy", run_.name, "--yes"], run_.env, timeout=TIMEOUT)
                    run_.leftovers = {k: v for k, v in sandbox.inventory(run_.name).items() if v}
                    run_.problems.append(f"harness: {type(exc).__name__}: {exc}")
                    result = run_.result(False)
                results.append(result)
                for line in result["log"]:
                    say("  " + line)
                verdict = "converged" if result["converged"] else "DID NOT CONVERGE"
                say(f"run {i + 1}/{args.runs} seed {result['seed']} {result['kind']}: {verdict}"
                    + (f"; leftovers {result['leftovers']}" if result["leftovers"] else "")
                    + (f"; duplicates {result['duplicates']}" if result["duplicates"] else "")
                    + (f"; live != spec {result['mismatches']}" if result["mismatches"] else "")
                    + (f"; problems {result['problems']}" if result["problems"] else ""))
                for command, lines in result["failed_output"].items():
                    say(f"  {command}, its output's last lines:")
                    for line in lines:
                        say("    " + line)
        finally:
            sandbox.stop()
    summary = {"runs": len(results), "converged": sum(r["converged"] for r in results),
               "leaked": sum(bool(r["leftovers"]) for r in results),
               "duplicates": sum(bool(r["duplicates"]) for r in results),
               "drift_repaired": sum(bool(r.get("drift_repaired")) for r in results)}
    not_converged = [r["seed"] for r in results if not r["converged"]]
    if args.json:
        print(json.dumps({**summary, "not_converged_seeds": not_converged,
                          "seconds": round(time.monotonic() - started, 1), "results": results}, indent=2))
    else:
        print(json.dumps(summary))
        for seed in not_converged:
            print(f"seed {seed} did not converge")
        print(f"{time.monotonic() - started:.0f} s in all")
    ok = summary["converged"] == summary["runs"] and summary["leaked"] == 0 and summary["duplicates"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
