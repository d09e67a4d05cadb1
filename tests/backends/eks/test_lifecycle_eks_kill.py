"""End-to-end: kill -9 of the installed ``fmcluster`` at chosen points of an EKS ``create`` and then of its
``destroy``, each followed by the same command again, converges. The EKS example (p5.48xlarge × 2 on a Capacity
Block, Lustre) plus an on-demand queue, each pair of points with another scheduler. What the sandbox holds is read
with boto3 and the cluster's own Kubernetes API (``live_eks.py``), and leftovers with the scan the chaos
harness also uses (``leftovers.py``).

The kill lands inside an AWS call the sandbox holds (``call.eks.<Operation>`` latency, as
``test_ownership.py``'s kills inside IAM calls): the request still lands after its client died, as an in-flight
one would on AWS; the Kubernetes API cannot be held, so that kill lands right as an object's apply starts (the
scheduler's operator Deployment, once the release's hooks are done).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
import time
import uuid

import pytest
import yaml
from fixtures.leftovers import duplicates, inventory_of
from fixtures.lifecycle import REPO_ROOT, Cli, _ok, _wait_for_line
from fixtures.live_eks import eks_problems
from fixtures.tiers import E2E_FIXTURE_ATTR

pytest.importorskip("fmcluster_sandbox.eks")

HELD_S = 3.0  # how long the sandbox holds the call the kill lands in
SETTLE_S = 20.0


class EksCli(Cli):
    quickstart = REPO_ROOT / "configs" / "p5-kueue-eks.yaml"
    name_prefix = "e2e-eks"
    timeout = 180

    def __init__(self, sandbox, tmp_path):
        super().__init__(sandbox, tmp_path)
        self.data = yaml.safe_load(self.spec.read_text())
        self.reservation = f"cr-{uuid.uuid4().hex[:17]}"
        self.data["queues"][0]["capacity"]["reservation_id"] = self.reservation
        self.data["queues"].append({"name": "burst", "instance_type": "g5.48xlarge", "nodes": {"min": 1, "max": 2}})
        self.write()
        now = dt.datetime.now(dt.timezone.utc)
        sandbox.control("POST", "/_fmcluster/capacity-reservations", {
            "instance_type": "p5.48xlarge", "availability_zone": "us-east-1a", "count": 2, "type": "capacity-block",
            "start": (now - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": (now + dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ"), "reservation_id": self.reservation})

    def write(self, scheduler: str | None = None) -> None:
        if scheduler:
            self.data["kubernetes"] = {"scheduler": scheduler}
        # What a kill leaves and a re-run converges is this file's subject; the burn-in gate at create is
        # tests/backends/eks/test_eks_burn_in_gate.py's, so off here.
        for queue in self.data["queues"]:
            queue["burn_in"] = "off"
        self.spec.write_text(yaml.safe_dump(self.data, sort_keys=False))

    def inventory(self) -> dict[str, list[str]]:
        return inventory_of(self.sandbox.client, self.name)

    def has_cloud_resources(self) -> bool:
        return any(self.inventory().values())

    def killed_at(self, marker: str, *args: str, call: str | None = None) -> None:
        """Run ``fmcluster ARGS``; once its progress shows ``› MARKER`` (the engine starting that resource's
        create or delete), SIGKILL it: inside AWS's ``call`` (held HELD_S s) when one is named, else at once."""
        held = f"call.eks.{call}"
        if call:
            self.sandbox.faults({"latency": {held: HELD_S}})
        proc = self.popen(*args)
        try:
            _wait_for_line(proc, re.compile(f"› {marker}"), timeout=120)
            if call:
                # the node groups (one per queue, and `system`) are created and deleted at once: kill once all
                # are held
                groups = len(self.data["queues"]) + 1
                self.sandbox.wait_held(held, count=groups if "Nodegroup" in call else 1, timeout=120)
            assert proc.poll() is None, f"{args[0]} ended before the kill: {proc.communicate()}"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        if call:
            self.sandbox.wait_held_answered(held)  # the held requests still land, as in-flight ones would
            self.sandbox.faults({"reset": True})

    def assert_converged(self) -> None:
        assert eks_problems(self.sandbox.client, self.sandbox.endpoint_url, self.data) == []
        assert duplicates(self.inventory()) == {}
        report = self.status()
        assert report["status"] == "ACTIVE" and report["drift"] == [], (report["status"], report["drift"])

    def assert_nothing_left(self) -> None:
        deadline = time.monotonic() + SETTLE_S
        left = {k: v for k, v in self.inventory().items() if v}
        while left and time.monotonic() < deadline:  # a delete EKS or FSx is still finishing
            time.sleep(0.5)
            left = {k: v for k, v in self.inventory().items() if v}
        assert left == {}, f"still present for {self.name}: {left}"


def _cli(sandbox, tmp_path):
    """``cli_fixture``'s cleanup, but a destroy only when the sandbox still holds something of the cluster (its
    state file outlives a clean destroy, and a needless destroy costs seconds)."""
    runner = EksCli(sandbox, tmp_path)
    yield runner
    sandbox.faults({"reset": True})
    if runner.has_cloud_resources():
        runner.run("destroy", runner.name, "--yes")


setattr(_cli, E2E_FIXTURE_ATTR, True)  # tests/fixtures/tiers.py marks every test that uses it e2e
cli = pytest.fixture(_cli, name="cli")

# (scheduler, create's kill: progress marker, held EKS call or None; destroy's kill: the same).
# Markers are regular expressions; a Kubernetes object shows as kubectl names it, Kind/name.
POINTS = [
    ("kueue", ("eks_cluster:", "CreateCluster"), (r"[A-Z][A-Za-z]*/", None)),
    ("volcano", ("eks_nodegroup:train", "CreateNodegroup"), ("eks_nodegroup:", "DeleteNodegroup")),
    # inside the scheduler's install: KAI's pre-install hooks (CRDs, RBAC, Jobs, Config) applied, the operator next
    ("kai", ("Deployment/kai-operator", None), ("eks_cluster:", "DeleteCluster")),
]
IDS = ["create-in-CreateCluster,destroy-at-the-first-Kubernetes-delete",
       "create-in-CreateNodegroup,destroy-in-DeleteNodegroup",
       "create-at-the-scheduler-operator-after-its-hooks,destroy-in-DeleteCluster"]


@pytest.mark.parametrize(("scheduler", "create_kill", "destroy_kill"), POINTS, ids=IDS)
def test_a_kill_during_create_then_during_destroy_each_rerun_converges(cli, scheduler, create_kill, destroy_kill):
    cli.write(scheduler)
    marker, call = create_kill
    cli.killed_at(marker, "create", str(cli.spec), "--yes", call=call)
    eks = cli.sandbox.client("eks")
    if call == "CreateCluster":  # the request landed after its client died: the re-run must take it up, not redo it
        assert eks.describe_cluster(name=cli.name)["cluster"]["status"] in ("CREATING", "ACTIVE")
        assert eks.list_nodegroups(clusterName=cli.name)["nodegroups"] == []
    elif call == "CreateNodegroup":
        assert "train" in eks.list_nodegroups(clusterName=cli.name)["nodegroups"]
    if call:  # half made, and no create running: status says INCOMPLETE and names what is missing, not ACTIVE
        half = cli.status()
        assert half["status"] == "INCOMPLETE", (half["status"], half.get("state_reason"), half["drift_unknown"])
        if call == "CreateCluster":  # no node group yet: the spec's three (two queues and system) are missing
            assert {"eks_nodegroup:train", "eks_nodegroup:burst", "eks_nodegroup:system"} <= set(half["missing"])
            named = next(p for p in half["problems"] if p.startswith("missing from the spec: "))
            assert "eks_nodegroup: burst, system, train" in named, named
        else:  # the node groups landed; what comes after them (the scheduler's objects) did not
            assert half["missing"] and not any(m.startswith("eks_nodegroup:") for m in half["missing"]), half
    # The re-runs in this process (fixtures/in_process.py): their answer and what they leave are what is checked;
    # the killed runs are the installed command's, a signal and all.
    _ok(cli.run_in_process("create", str(cli.spec), "--yes"))
    cli.assert_converged()

    marker, call = destroy_kill
    cli.killed_at(marker, "destroy", cli.name, "--yes", call=call)
    assert cli.has_cloud_resources()  # the kill left work for the re-run
    _ok(cli.run_in_process("destroy", cli.name, "--yes"))
    cli.assert_nothing_left()
    listed = json.loads(_ok(cli.run_in_process("status", "--json")).stdout)
    assert cli.name not in {row["name"] for row in listed}, listed  # forgotten locally too
