"""The chaos runs that change a live cluster: spec edits between steps, out-of-band changes (drift), kills
inside each IAM call, and a ParallelCluster spec edit. Each compares the live state with the spec with boto3."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_run import THROTTLE, Run  # noqa: E402

IAM_CREATE_CALLS = ["CreateRole", "PutRolePolicy", "AttachRolePolicy", "CreateInstanceProfile",
                    "AddRoleToInstanceProfile"]
IAM_DESTROY_CALLS = ["RemoveRoleFromInstanceProfile", "DeleteInstanceProfile", "DetachRolePolicy",
                     "DeleteRolePolicy", "DeleteRole"]
IAM_HOLD_S, IAM_KILL_AFTER_S = 4.0, 1.5
OTHER_TYPE = "m7i.2xlarge"


def _wait(what: str, done, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} after {timeout:.0f} s")
        time.sleep(0.2)


class EditRun(Run):
    """PCS counts up, down and back (``scale`` and spec + ``create``), an instance-type edit, a queue added
    and removed; the live node groups and queues must equal the spec after every step."""

    kind = "edits-pcs"

    def execute(self) -> dict:
        self.sandbox.faults({"reset": True})
        self.sandbox.faults({"throttle_rate": {"*": THROTTLE}, "seed": self.seed})
        self.say(f"pcs {self.name} seed {self.seed}: spec edits, throttle {THROTTLE:.0%}")
        if self.create().returncode != 0:
            return self.result(self.destroy_and_scan() and False)
        self.matches_spec("created")
        start = self.queue("gpu")["nodes"]
        up = start + self.rng.randint(1, 3)
        down = self.rng.randint(1, up - 1)
        for count in (up, down, up):  # the last one returns to a count asked for before
            self.scale("gpu", count)
        steps = [lambda: self.edit(f"gpu back to its first count {start}",
                                   lambda: self.queue("gpu").update(nodes=start)),
                 lambda: self.edit(f"burst instance type {self.queue('burst')['instance_type']} → {OTHER_TYPE}",
                                   lambda: self.queue("burst").update(instance_type=OTHER_TYPE)),
                 self.queue_added_and_removed]
        self.rng.shuffle(steps)
        for step in steps:
            step()
        self.check_duplicates("after the last create")
        converged = self.matches_spec("after the last create")
        return self.result(self.destroy_and_scan() and converged)

    def scale(self, queue: str, nodes: int | dict) -> None:
        value = str(nodes) if isinstance(nodes, int) else f"{nodes['min']}:{nodes['max']}"
        if self.must("scale", self.name, f"{queue}={value}", "--yes").returncode == 0:
            self.queue(queue)["nodes"] = nodes  # the spec file follows what was asked, for the next create
            self.write_spec()
        self.matches_spec(f"scale {queue}={value}")

    def edit(self, what: str, change) -> None:
        change()
        self.write_spec()
        self.say(f"spec edit: {what}")
        self.create()
        self.matches_spec(f"create after {what}")

    def queue_added_and_removed(self) -> None:
        self.edit("queue extra added", lambda: self.data["queues"].append(
            {"name": "extra", "instance_type": OTHER_TYPE, "nodes": {"min": 0, "max": self.rng.randint(1, 3)}}))
        self.edit("queue extra removed", lambda: self.data["queues"].pop())


class DriftRun(Run):
    """A PCS queue deleted and another node group's scaling changed with boto3 behind fmcluster's back:
    ``status --json`` must list both in ``drift``, and ``create`` must repair them."""

    kind = "drift-pcs"

    def execute(self) -> dict:
        self.sandbox.faults({"reset": True})
        self.sandbox.faults({"throttle_rate": {"*": THROTTLE}, "seed": self.seed})
        victim = self.rng.choice([q["name"] for q in self.data["queues"]])
        other = next(q for q in self.data["queues"] if q["name"] != victim)
        low, high = (other["nodes"], other["nodes"]) if isinstance(other["nodes"], int) else (
            other["nodes"]["min"], other["nodes"]["max"])
        changed = {"minInstanceCount": low + 1, "maxInstanceCount": high + self.rng.randint(1, 3)}
        self.say(f"pcs {self.name} seed {self.seed}: out of band, delete queue {victim}, node group "
                 f"{other['name']} {low}..{high} → {changed['minInstanceCount']}..{changed['maxInstanceCount']}")
        if self.create().returncode != 0:
            return self.result(self.destroy_and_scan() and False)
        self.matches_spec("created")
        before = self.drift("before the changes")
        if before:
            self.problems.append(f"drift right after create: {before}")
        pcs = self.sandbox.client("pcs")
        pcs.delete_queue(clusterIdentifier=self.name, queueIdentifier=victim)
        pcs.update_compute_node_group(clusterIdentifier=self.name, computeNodeGroupIdentifier=other["name"],
                                      scalingConfiguration=changed)
        _wait(f"queue {victim} deleted", lambda: victim not in {
            q["name"] for q in pcs.list_queues(clusterIdentifier=self.name)["queues"]})
        _wait(f"node group {other['name']} ACTIVE", lambda: pcs.get_compute_node_group(
            clusterIdentifier=self.name, computeNodeGroupIdentifier=other["name"])["computeNodeGroup"]["status"]
            == "ACTIVE")
        drift = self.drift("after the changes") or []
        resources = {d["resource"] for d in drift}
        shown_queue = f"queue:{victim}" in resources
        shown_scaling = any(r.startswith(f"compute_node_group:{other['name']}.") and "scaling" in r.lower()
                            for r in resources)
        if not shown_queue:
            self.problems.append(f"status drift does not show the deleted queue {victim}: {drift}")
        if not shown_scaling:
            self.problems.append(f"status drift does not show node group {other['name']}'s scaling: {drift}")
        self.create()
        after = self.drift("after create")
        matched = self.matches_spec("after the last create")
        repaired = shown_queue and shown_scaling and after == [] and matched
        if after:
            self.problems.append(f"drift left after create: {after}")
        self.check_duplicates("after the last create")
        return self.result(self.destroy_and_scan() and repaired, drift_repaired=repaired, drift_seen=drift)

    def drift(self, when: str) -> list | None:
        status = self.must("status", self.name, "--json")
        if status.returncode != 0:
            return None
        drift = json.loads(status.stdout).get("drift")
        self.say(f"drift {when}: {json.dumps(drift)}")
        return drift


class IamKillRun(Run):
    """SIGKILL inside each IAM call of ``create`` and of ``destroy`` (held 4 s by the sandbox); ``destroy``
    after each must leave nothing, the IAM role and instance profile included."""

    kind = "iam-kill-pcs"

    def execute(self) -> dict:
        # one call of create and one of destroy per run, rotating with the seed: seeds S..S+4 cover them all
        in_create = IAM_CREATE_CALLS[self.seed % len(IAM_CREATE_CALLS)]
        in_destroy = IAM_DESTROY_CALLS[(self.seed + 2) % len(IAM_DESTROY_CALLS)]
        self.sandbox.faults({"reset": True})
        self.say(f"pcs {self.name} seed {self.seed}: SIGKILL {IAM_KILL_AFTER_S}s into iam.{in_create} of create "
                 f"and iam.{in_destroy} of destroy (each held {IAM_HOLD_S:.0f}s), destroy after each")
        landed = self.killed_in_call(f"iam.{in_create}", "create", str(self.spec), "--yes", held=IAM_HOLD_S,
                                     kill_after=IAM_KILL_AFTER_S)
        clean = self.destroy_and_scan()
        matched = self.create().returncode == 0 and self.matches_spec("created")
        landed += self.killed_in_call(f"iam.{in_destroy}", "destroy", self.name, "--yes", held=IAM_HOLD_S,
                                      kill_after=IAM_KILL_AFTER_S)
        clean = self.destroy_and_scan() and clean
        return self.result(clean and matched and landed == 2, killed_in=[f"create iam.{in_create}",
                                                                         f"destroy iam.{in_destroy}"])


class PclusterEditRun(Run):
    """ParallelCluster: counts changed and a queue added through the spec file + ``create``; the deployed
    configuration (read from the stack's S3 bucket with boto3) must equal the spec."""

    kind, backend = "edits-parallelcluster", "parallelcluster"

    def execute(self) -> dict:
        self.sandbox.faults({"reset": True})
        self.say(f"parallelcluster {self.name} seed {self.seed}: counts and an added queue")
        if self.create().returncode != 0:
            return self.result(self.destroy_and_scan() and False)
        self.matches_spec("created")
        gpu = self.queue("gpu")
        gpu["nodes"] = {"min": 0, "max": gpu["nodes"]["max"] + self.rng.randint(1, 3)}
        self.data["queues"].append({"name": "cpu", "instance_type": OTHER_TYPE,
                                    "nodes": {"min": 0, "max": self.rng.randint(1, 4)}})
        self.write_spec()
        self.say(f"spec edit: gpu 0..{gpu['nodes']['max']}, queue cpu added")
        self.create()
        converged = self.matches_spec("after the last create")
        self.check_duplicates("after the last create")
        return self.result(self.destroy_and_scan() and converged)

    def live(self) -> dict:
        """Queues of the configuration ParallelCluster deployed: the stack's parameters name its S3 bucket,
        artifact directory and the object version of the cluster configuration (as ``pcluster`` reads it)."""
        cfn, s3 = self.sandbox.client("cloudformation"), self.sandbox.client("s3")
        stack = cfn.describe_stacks(StackName=self.name)["Stacks"][0]
        params = {p["ParameterKey"]: p["ParameterValue"] for p in stack.get("Parameters", [])}
        where = {"Bucket": params["ResourcesS3Bucket"],
                 "Key": f"{params['ArtifactS3RootDirectory']}/configs/cluster-config.yaml"}
        if params.get("ConfigVersion"):
            where["VersionId"] = params["ConfigVersion"]
        config = yaml.safe_load(s3.get_object(**where)["Body"].read())
        queues = {}
        for q in config["Scheduling"]["SlurmQueues"]:
            resources = q["ComputeResources"]
            queues[q["Name"]] = {"counts": [sum(r.get("MinCount", 0) for r in resources),
                                            sum(r.get("MaxCount", 10) for r in resources)],
                                 "instance_types": sorted(r.get("InstanceType") or r["Instances"][0]["InstanceType"]
                                                          for r in resources)}
        return {"status": stack["StackStatus"], "queues": queues}

    def matches_spec(self, when: str) -> bool:
        live = self.live()
        expected = {q["name"]: {"counts": [q["nodes"], q["nodes"]] if isinstance(q["nodes"], int)
                                else [q["nodes"]["min"], q["nodes"]["max"]], "instance_types": [q["instance_type"]]}
                    for q in self.data["queues"]}
        found = []
        if live["status"] not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
            found.append(f"stack is {live['status']}")
        if live["queues"] != expected:
            found.append(f"queues live {json.dumps(live['queues'], sort_keys=True)} "
                         f"!= spec {json.dumps(expected, sort_keys=True)}")
        self.say(f"{when}: live == spec" if not found else f"{when}: live != spec: {'; '.join(found)}")
        self.mismatches += [f"{when}: {f}" for f in found]
        return not found
