"""What every chaos run shares: its spec file, the CLI with traceback detection, SIGKILLs, the duplicate and
leftover scans, and the live PCS state read from the sandbox with boto3 (never from fmcluster's output)."""

from __future__ import annotations

import json
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from announced_cli import PREFIX  # noqa: E402
from common import REPO, Sandbox, duplicates, fmcluster_exe, run  # noqa: E402

QUICKSTART = {"pcs": REPO / "configs" / "quickstart-pcs.yaml",
              "parallelcluster": REPO / "configs" / "quickstart-parallelcluster.yaml",
              "eks": REPO / "configs" / "p5-kueue-eks.yaml"}
ANNOUNCED_CLI = Path(__file__).resolve().parent / "announced_cli.py"
THROTTLE = 0.2
TIMEOUT = 900
FAILED_LINES = 40  # of a failed command's output kept in the run's result
SETTLE_S = 30.0


def settling(inventory: dict[str, list[str]]) -> bool:
    """Something is left, and all of it is only AWS finishing a delete that was asked for (a stack
    DELETE_IN_PROGRESS, an instance shutting down, an EKS cluster or file system DELETING): worth a short wait
    before calling it a leftover."""
    left = [item for items in inventory.values() for item in items]
    return bool(left) and all(item.endswith(("DELETE_IN_PROGRESS", "shutting-down", "DELETING", "deleting"))
                              for item in left)


class Run:
    kind = "base"
    backend = "pcs"

    def __init__(self, sandbox: Sandbox, directory: Path, seed: int):
        self.sandbox, self.seed = sandbox, seed
        self.rng = random.Random(seed)
        self.name = f"ch{seed % 1000:03d}-{uuid.uuid4().hex[:6]}"
        self.data = yaml.safe_load(QUICKSTART[self.backend].read_text())
        self.data["name"] = self.name
        self.spec = directory / f"{self.name}.yaml"
        self.write_spec()
        self.instance_type = self.data["queues"][0]["instance_type"]
        self.env = sandbox.cli_env(directory / f"home-{self.name}")
        self.log: list[str] = []
        self.problems: list[str] = []
        # each failed command's last lines of output: a run that did not converge says what happened on the way
        self.failed_output: dict[str, list[str]] = {}
        self.duplicates: dict[str, list[str]] = {}
        self.leftovers: dict[str, list[str]] = {}
        self.mismatches: list[str] = []

    # the spec -------------------------------------------------------------------------------------
    def write_spec(self) -> None:
        self.spec.write_text(yaml.safe_dump(self.data, sort_keys=False))

    def queue(self, name: str) -> dict:
        return next(q for q in self.data["queues"] if q["name"] == name)

    # commands -------------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.log.append(text)

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        started = time.monotonic()
        result = run([*fmcluster_exe(), *args], self.env, timeout=TIMEOUT)
        lines = result.stderr.strip().splitlines() or [""]
        tail = next((line for line in lines if line.lower().startswith("error")), lines[-1])[:200]
        label = " ".join(a if not a.endswith(".yaml") else "SPEC" for a in args[:3] if a != "--yes")
        self.say(f"{label}: exit {result.returncode} in {time.monotonic() - started:.1f}s  {tail.strip()}")
        if "Still tagged" in result.stderr:
            self.say("  " + " | ".join(result.stderr.split("Still tagged", 1)[1].splitlines()[1:4]))
        if "Traceback" in result.stderr + result.stdout:
            self.problems.append(f"traceback in `{label}`: {result.stderr[-400:]}")
        return result

    def must(self, *args: str) -> subprocess.CompletedProcess:
        """A command that has to succeed; a failure is a problem of the run (which goes on)."""
        result = self.cli(*args)
        if result.returncode != 0:
            first_error = next((line for line in result.stderr.splitlines() if line.lower().startswith("error")),
                               result.stderr[-200:])
            self.problems.append(f"`{' '.join(args[:2])}` exit {result.returncode}: {first_error.strip()[:300]}")
            label = f"{' '.join(args[:2])} (problem {len(self.problems)})"
            self.failed_output[label] = result.stderr.rstrip().splitlines()[-FAILED_LINES:]
        return result

    def create(self) -> subprocess.CompletedProcess:
        return self.must("create", str(self.spec), "--yes")

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

    def killed_in_call(self, call: str, *args: str, held: float, kill_after: float) -> bool:
        """Run the command with AWS's ``call`` (``iam.CreateRole``) held *held* s by the sandbox, and SIGKILL
        it *kill_after* s into that request. Then wait until the held request has landed in the sandbox (as
        AWS applies a request whose client died) and clear the fault. True when the kill landed in the call."""
        self.sandbox.faults({"latency": {f"call.{call}": held}})
        proc = subprocess.Popen([sys.executable, str(ANNOUNCED_CLI), *args], env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
        seen, deadline = None, time.monotonic() + TIMEOUT
        sent = re.compile(re.escape(PREFIX + call) + r"(?![A-Za-z])")  # iam.DeleteRole, not iam.DeleteRolePolicy
        try:
            while seen is None and time.monotonic() < deadline and proc.poll() is None:
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                if sent.search(line):
                    seen = time.monotonic()
            if seen is not None:
                time.sleep(kill_after)
            landed = seen is not None and proc.poll() is None
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        if seen is not None:
            time.sleep(max(0.0, held - (time.monotonic() - seen)) + 0.5)
        self.sandbox.faults({"latency": {f"call.{call}": None}})
        verb = args[0]
        if landed:
            self.say(f"{verb}: SIGKILL {kill_after:.1f}s into {call} (held {held:.0f}s)")
        elif seen is None:
            self.say(f"{verb}: never sent {call} (exit {proc.returncode})")
            self.problems.append(f"{verb} never sent {call}, so no kill landed in it")
        else:
            self.say(f"{verb}: ended (exit {proc.returncode}) before the kill in {call}")
            self.problems.append(f"{verb} ended before the kill in {call}")
        return landed

    # what the sandbox holds -----------------------------------------------------------------------
    def check_duplicates(self, when: str) -> None:
        inventory = self.sandbox.inventory(self.name)
        self.say(f"{when}: " + "; ".join(f"{k} {len(v)}" + (f" {v}" if k == "cfn_stacks" else "")
                                         for k, v in inventory.items() if v))
        found = duplicates(inventory)
        if found:
            self.duplicates[when] = found

    def expected(self) -> dict[str, Any]:
        """What AWS must hold for the spec file: per node group its counts and instance types, per queue its
        node groups (PCS: one node group per queue, of the queue's name, plus the login group)."""
        def counts(nodes: Any) -> list[int]:
            return [nodes, nodes] if isinstance(nodes, int) else [nodes["min"], nodes["max"]]

        groups = {q["name"]: {"counts": counts(q["nodes"]), "instance_types": [q["instance_type"]]}
                  for q in self.data["queues"]}
        groups["login"] = {"counts": [1, 1], "instance_types": [self.data["head_node"]["instance_type"]]}
        return {"node_groups": groups, "queues": {q["name"]: [q["name"]] for q in self.data["queues"]}}

    def live(self) -> dict[str, Any]:
        """The PCS cluster as the sandbox holds it (boto3, paged)."""
        pcs = self.sandbox.client("pcs")
        groups: dict[str, dict] = {}
        names: dict[str, str] = {}
        for page in pcs.get_paginator("list_compute_node_groups").paginate(clusterIdentifier=self.name):
            for item in page["computeNodeGroups"]:
                group = pcs.get_compute_node_group(clusterIdentifier=self.name,
                                                   computeNodeGroupIdentifier=item["id"])["computeNodeGroup"]
                scaling = group["scalingConfiguration"]
                names[group["id"]] = group["name"]
                groups[group["name"]] = {"counts": [scaling["minInstanceCount"], scaling["maxInstanceCount"]],
                                         "instance_types": [c["instanceType"] for c in group["instanceConfigs"]],
                                         "status": group["status"]}
        queues: dict[str, list[str]] = {}
        for page in pcs.get_paginator("list_queues").paginate(clusterIdentifier=self.name):
            for item in page["queues"]:
                live = pcs.get_queue(clusterIdentifier=self.name, queueIdentifier=item["id"])["queue"]
                queues[live["name"]] = sorted(names.get(c["computeNodeGroupId"], c["computeNodeGroupId"])
                                              for c in live["computeNodeGroupConfigurations"])
                if live["status"] != "ACTIVE":
                    queues[live["name"]].append(f"status {live['status']}")
        return {"node_groups": groups, "queues": queues}

    def matches_spec(self, when: str) -> bool:
        """Live PCS state equals the spec file (counts, instance types, the set of queues), every part ACTIVE."""
        expected, live = self.expected(), self.live()
        found = []
        for name, group in live["node_groups"].items():
            if group.pop("status") != "ACTIVE":
                found.append(f"node group {name} is not ACTIVE")
        if live["node_groups"] != expected["node_groups"]:
            found.append(f"node groups live {json.dumps(live['node_groups'], sort_keys=True)} "
                         f"!= spec {json.dumps(expected['node_groups'], sort_keys=True)}")
        if live["queues"] != expected["queues"]:
            found.append(f"queues live {live['queues']} != spec {expected['queues']}")
        self.say(f"{when}: live == spec" if not found else f"{when}: live != spec: {'; '.join(found)}")
        self.mismatches += [f"{when}: {f}" for f in found]
        return not found

    def destroy_and_scan(self) -> bool:
        destroyed = self.cli("destroy", self.name, "--yes")
        if destroyed.returncode != 0:
            self.say("destroy failed once; one more try")
            destroyed = self.cli("destroy", self.name, "--yes")
        faults = self.sandbox.faults({})
        self.sandbox.faults({"reset": True})  # scan without throttling
        inventory = self.sandbox.inventory(self.name)
        deadline = time.monotonic() + SETTLE_S
        while settling(inventory) and time.monotonic() < deadline:  # deleted, AWS still finishing the delete
            time.sleep(1.0)
            inventory = self.sandbox.inventory(self.name)
        self.sandbox.faults({k: v for k, v in faults.items() if k in ("throttle_rate", "latency")})
        left = {kind: items for kind, items in inventory.items() if items}
        for kind, items in left.items():
            self.leftovers.setdefault(kind, []).extend(i for i in items if i not in self.leftovers.get(kind, []))
        found = duplicates(inventory)
        if found:
            self.duplicates["after destroy"] = found
        if destroyed.returncode != 0:
            self.problems.append("destroy failed twice")
        return destroyed.returncode == 0 and not left

    def result(self, converged: bool, **detail: Any) -> dict:
        return {"seed": self.seed, "kind": self.kind, "backend": self.backend, "name": self.name, **detail,
                "converged": converged and not self.problems and not self.leftovers and not self.duplicates
                and not self.mismatches,
                "leftovers": self.leftovers, "duplicates": self.duplicates, "mismatches": self.mismatches,
                "problems": self.problems, "failed_output": self.failed_output, "log": self.log}
