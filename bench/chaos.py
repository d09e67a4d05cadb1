"""Chaos lifecycles in the sandbox: create → status → destroy under seeded faults, then look for leftovers.

    python bench/chaos.py [--runs 4] [--seed 1000] [--json]

Runs alternate PCS and ParallelCluster (the quickstart configs, each with a unique name). Run *i* uses
seed ``--seed + i`` for everything random in it:

* 20 % of all sandbox calls throttled (the sandbox's own seeded RNG) for the whole run;
* one SIGKILL of the CLI at a random moment of ``create`` or of ``destroy`` (chosen by the seed), then
  the same command is run again;
* on PCS, one ICE: ``insufficient_capacity`` for the queue's instance type during a second ``create``,
  which must fail clearly; the fault is then cleared and ``create`` re-run. If that re-run cannot recover
  (a CREATE_FAILED node group stays), the run accepts the failure and destroys, and says so.

After every ``create`` that succeeds, the sandbox is checked for duplicates (more than one PCS cluster,
security group, launch template, node group, queue or stack of one name); after ``destroy``, for anything
left: EC2 instances not terminated, security groups, launch templates, placement groups, PCS clusters and
CloudFormation stacks not DELETE_COMPLETE. Prints ``{"runs", "converged", "leaked", "duplicates"}`` and the
seed of every run that did not converge (re-run one with ``--runs 1 --seed SEED``, and
``--first parallelcluster`` for an odd run).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, Sandbox, duplicates, fmcluster_exe, run  # noqa: E402

QUICKSTART = {"pcs": REPO / "configs" / "quickstart-pcs.yaml",
              "parallelcluster": REPO / "configs" / "quickstart-parallelcluster.yaml"}
# PCS transitions slow enough that a kill lands mid-way (create takes ~4 s without throttling)
PCS_LATENCY = {"pcs.cluster": 2.0, "pcs.compute_node_group": 1.0, "pcs.queue": 0.5}
THROTTLE = 0.2
TIMEOUT = 900


def write_spec(directory: Path, backend: str, name: str) -> tuple[Path, str]:
    data = yaml.safe_load(QUICKSTART[backend].read_text())
    data["name"] = name
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, data["queues"][0]["instance_type"]


class Run:
    def __init__(self, sandbox: Sandbox, directory: Path, backend: str, seed: int):
        self.sandbox, self.backend, self.seed = sandbox, backend, seed
        self.rng = random.Random(seed)
        self.name = f"ch{seed % 1000:03d}-{uuid.uuid4().hex[:6]}"
        self.spec, self.instance_type = write_spec(directory, backend, self.name)
        self.env = sandbox.cli_env(directory / f"home-{self.name}")
        self.log: list[str] = []
        self.problems: list[str] = []
        self.duplicates: dict[str, list[str]] = {}
        self.leftovers: dict[str, list[str]] = {}

    def say(self, text: str) -> None:
        self.log.append(text)

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        started = time.monotonic()
        result = run([*fmcluster_exe(), *args], self.env, timeout=TIMEOUT)
        lines = result.stderr.strip().splitlines() or [""]
        tail = next((line for line in lines if line.lower().startswith("error")), lines[-1])[:200]
        self.say(f"{' '.join(args[:2])}: exit {result.returncode} in {time.monotonic() - started:.1f}s  {tail}")
        if "Still tagged" in result.stderr:
            self.say("  " + " | ".join(result.stderr.split("Still tagged", 1)[1].splitlines()[1:4]))
        if "Traceback" in result.stderr:
            self.problems.append(f"traceback in `{' '.join(args[:2])}`: {result.stderr[-400:]}")
        return result

    def killed(self, *args: str, within: float) -> None:
        """Start the command, SIGKILL it after a random delay in [0.3, within] s."""
        delay = self.rng.uniform(0.3, within)
        proc = subprocess.Popen([*fmcluster_exe(), *args], env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            proc.wait(timeout=delay)
            self.say(f"{' '.join(args[:2])}: finished (exit {proc.returncode}) before the kill at {delay:.1f}s")
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            self.say(f"{' '.join(args[:2])}: SIGKILL after {delay:.1f}s")

    def check_duplicates(self, when: str) -> None:
        inventory = self.sandbox.inventory(self.name)
        self.say(f"{when}: " + "; ".join(f"{k} {len(v)}" + (f" {v}" if k == "cfn_stacks" else "")
                                         for k, v in inventory.items() if v))
        found = duplicates(inventory)
        if found:
            self.duplicates[when] = found

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
        created = False
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
        final = self.cli("create", str(self.spec), "--yes")
        if final.returncode == 0:
            created = True
        elif self.backend == "pcs":
            # A node group left CREATE_FAILED by the ICE: accept the failure and destroy.
            self.say("create after clearing the ICE did not recover; accepting the failure and destroying")
            first_error = next((line for line in final.stderr.splitlines() if line.lower().startswith("error")),
                               "")
            self.problems.append(f"re-running create after an ICE does not recover: {first_error[:200]}")
        else:
            self.problems.append(f"create failed: {final.stderr[-300:]}")
        if created:
            self.check_duplicates("after create")
            status = self.cli("status", self.name, "--json")
            if status.returncode != 0:
                self.problems.append("status failed")
            else:
                report = json.loads(status.stdout)
                if report.get("status") not in ("ACTIVE", "CREATE_COMPLETE", "UPDATE_COMPLETE"):
                    self.problems.append(f"status says {report.get('status')} after a successful create")
        if kill_in == "destroy":
            self.killed("destroy", self.name, "--yes", within=4.0 if self.backend == "pcs" else 8.0)
        destroyed = self.cli("destroy", self.name, "--yes")
        if destroyed.returncode != 0:
            self.say("destroy failed once; one more try")
            destroyed = self.cli("destroy", self.name, "--yes")
        sb.faults({"reset": True})  # scan without throttling
        inventory = sb.inventory(self.name)
        self.leftovers = {kind: items for kind, items in inventory.items() if items}
        found = duplicates(inventory)
        if found:
            self.duplicates["after destroy"] = found
        converged = (destroyed.returncode == 0 and not self.leftovers and not self.duplicates
                     and (created or self.backend == "pcs"))
        return {"seed": self.seed, "backend": self.backend, "name": self.name, "kill_in": kill_in,
                "created": created, "destroyed": destroyed.returncode == 0, "converged": converged,
                "leftovers": self.leftovers, "duplicates": self.duplicates, "problems": self.problems,
                "log": self.log}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1000, help="run i uses seed SEED+i")
    parser.add_argument("--first", choices=["pcs", "parallelcluster"], default="pcs",
                        help="backend of the first run; they alternate")
    parser.add_argument("--json", action="store_true", help="print the summary and every run as JSON")
    args = parser.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    order = ["pcs", "parallelcluster"] if args.first == "pcs" else ["parallelcluster", "pcs"]

    results = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fmcluster-bench-chaos-") as tmp:
        sandbox = Sandbox(Path(tmp) / "sandbox-home").start()
        try:
            for i in range(args.runs):
                run_ = Run(sandbox, Path(tmp), order[i % 2], args.seed + i)
                try:
                    result = run_.execute()
                except Exception as exc:  # a crash of the harness or a hung command: report, clean up, go on
                    sandbox.faults({"reset": True})
                    run([*fmcluster_exe(), "destroy", run_.name, "--yes"], run_.env, timeout=TIMEOUT)
                    result = {"seed": run_.seed, "backend": run_.backend, "name": run_.name, "converged": False,
                              "leftovers": run_.leftovers, "duplicates": run_.duplicates,
                              "problems": [*run_.problems, f"harness: {type(exc).__name__}: {exc}"],
                              "log": run_.log}
                results.append(result)
                for line in result["log"]:
                    say("  " + line)
                verdict = "converged" if result["converged"] else "DID NOT CONVERGE"
                say(f"run {i + 1}/{args.runs} seed {result['seed']} {result['backend']}: {verdict}"
                    + (f"; leftovers {result['leftovers']}" if result["leftovers"] else "")
                    + (f"; duplicates {result['duplicates']}" if result["duplicates"] else "")
                    + (f"; problems {result['problems']}" if result["problems"] else ""))
        finally:
            sandbox.stop()
    summary = {"runs": len(results), "converged": sum(r["converged"] for r in results),
               "leaked": sum(bool(r["leftovers"]) for r in results),
               "duplicates": sum(bool(r["duplicates"]) for r in results)}
    not_converged = [r["seed"] for r in results if not r["converged"]]
    if args.json:
        print(json.dumps({**summary, "not_converged_seeds": not_converged,
                          "seconds": round(time.monotonic() - started, 1), "results": results}, indent=2))
    else:
        print(json.dumps(summary))
        for seed in not_converged:
            print(f"seed {seed} did not converge")
        print(f"{time.monotonic() - started:.0f} s in all")
    return 0 if summary["converged"] == summary["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
