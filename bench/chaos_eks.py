"""The EKS chaos run: SIGKILL the installed CLI at a seeded random moment of ``create`` (even seeds) or of
``destroy`` (odd seeds), once or twice in a row, re-run the same command, and check that it converged.

Each run makes the example ``configs/p5-kueue-eks.yaml`` (p5.48xlarge × 2 on a Capacity Block, Lustre) with the
seed's scheduler (Kueue, Volcano or KAI) and a second, on-demand queue that scales ``{min: 1, max: 2}``, on a
Capacity Block seeded in the sandbox for the run. The sandbox holds EKS resources in their CREATING and DELETING
states (``EKS_LATENCY``) so that kills land while fmcluster waits on them, and throttles 20 % of AWS calls.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_run import THROTTLE, Run  # noqa: E402
from eks_live import eks_problems  # noqa: E402

# EKS transitions slow enough that a kill lands mid-wait (docs/sandbox-fidelity.md "EKS": held CREATING/DELETING)
EKS_LATENCY = {"eks.cluster": 2.0, "eks.nodegroup": 2.0, "eks.addon": 1.0}
SCHEDULERS = ("kueue", "volcano", "kai")
SECOND_QUEUE = {"name": "burst", "instance_type": "g5.48xlarge", "nodes": {"min": 1, "max": 2}}
# Where a kill may land, from the CLI's start (a kill before the first call must converge too): under THROTTLE a
# create takes ~65 s and a destroy ~75 s in the sandbox.
CREATE_S, DESTROY_S = 55.0, 55.0


def _iso(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class EksKillRun(Run):
    """kill -9 during an EKS create or destroy, then the same command again: create must converge to the spec
    (the cluster, node groups with their instances, add-ons, the scheduler's queue objects, no drift), destroy
    must leave nothing tagged, named or labelled for the cluster."""

    kind = "kill-eks"
    backend = "eks"

    def __init__(self, sandbox, directory: Path, seed: int):
        super().__init__(sandbox, directory, seed)
        self.scheduler = SCHEDULERS[seed % len(SCHEDULERS)]
        self.data["kubernetes"] = {"scheduler": self.scheduler}
        self.data["queues"].append(dict(SECOND_QUEUE))
        self.reservation = f"cr-{self.rng.getrandbits(68):017x}"
        self.data["queues"][0]["capacity"]["reservation_id"] = self.reservation
        self.write_spec()

    def seed_capacity_block(self) -> None:
        """The run's Capacity Block, active now, for the first queue's nodes (as PurchaseCapacityBlock leaves it)."""
        first = self.data["queues"][0]
        now = dt.datetime.now(dt.timezone.utc)
        self.sandbox.control("POST", "/_fmcluster/capacity-reservations", {
            "instance_type": first["instance_type"], "availability_zone": "us-east-1a", "count": first["nodes"],
            "type": "capacity-block", "start": _iso(now - dt.timedelta(hours=1)),
            "end": _iso(now + dt.timedelta(days=2)), "reservation_id": self.reservation})

    def execute(self) -> dict:
        sb = self.sandbox
        sb.faults({"reset": True})
        sb.faults({"throttle_rate": {"*": THROTTLE}, "seed": self.seed, "latency": EKS_LATENCY})
        self.seed_capacity_block()
        kill_in = ("create", "destroy")[self.seed % 2]
        kills = self.rng.choice((1, 2))
        self.say(f"eks {self.name} seed {self.seed}: {self.scheduler}, {kills} kill(s) during {kill_in}, "
                 f"throttle {THROTTLE:.0%}, latency {EKS_LATENCY}")
        if kill_in == "create":
            for _ in range(kills):
                self.killed("create", str(self.spec), "--yes", within=CREATE_S)
        created = self.create().returncode == 0
        if created:
            self.check_duplicates("after create")
            self.matches_spec("after the last create")
            self.check_drift()
        if kill_in == "destroy":
            for _ in range(kills):
                self.killed("destroy", self.name, "--yes", within=DESTROY_S)
        destroyed = self.destroy_and_scan()
        return self.result(created and destroyed, kill_in=kill_in, kills=kills, scheduler=self.scheduler,
                           created=created, destroyed=destroyed)

    def matches_spec(self, when: str) -> bool:
        found = eks_problems(self.sandbox.client, self.sandbox.info["endpoint_url"], self.data)
        self.say(f"{when}: live == spec" if not found else f"{when}: live != spec: {'; '.join(found)}")
        self.mismatches += [f"{when}: {f}" for f in found]
        return not found

    def check_drift(self) -> None:
        # asked under the run's throttling: reads wait out throttled answers (fmcluster/connection/aws.py READING)
        status = self.must("status", self.name, "--json")
        if status.returncode != 0:
            return
        report = json.loads(status.stdout)
        if report.get("status") != "ACTIVE":
            self.problems.append(f"status says {report.get('status')} after a successful create")
        if report.get("drift"):
            self.problems.append(f"drift right after create: {report['drift']}")
