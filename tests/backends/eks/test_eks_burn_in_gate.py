"""The burn-in gate at ``create`` on EKS (issue 37 item 1): a gated queue's node group carries the pending taint, the
gate tests its nodes, lifts the taint and labels each passed node, repairs a failed one as ``auto_repair`` says and
tests it again, and ``create`` exits 1 naming the nodes when the queue ends short of its node count.

ONE cluster, made by ``fmcluster create`` (in this process) from configs/p5-kueue-eks.yaml with 4 p5.48xlarge nodes
on a Capacity Block of 4, burn-in level quick (device counts, DCGM level 1, EFA; no all-reduce, which
tests/backends/eks/test_burn_in_eks.py covers). The later cases make a node pending again the way a replacement
arrives (the node-group taint back on the Node, its verdict label gone) and run ``create`` again, or run the gate's
core (:class:`fmcluster.backends.eks.burn_in.gate.Gate`) on the same cluster with the queue on On-Demand capacity.

Facts typed by hand, with their pages:

* the taint: EKS API reference, CreateNodegroup ``taints`` (``key``, ``value``, ``effect`` ``NO_SCHEDULE``); the
  kubelet registers it as ``NoSchedule`` (Kubernetes API reference, Taint; EKS User Guide, "Recipe: Prevent pods
  from being scheduled on specific nodes");
* p5.48xlarge: 8 NVIDIA H100 GPUs and 32 EFA interfaces (EC2 user guide, "Amazon EC2 P5 instances");
* a node's instance from ``spec.providerID`` (``aws:///<zone>/<instance id>``, the AWS cloud provider's form);
* reboot, not replace, on a Capacity Block: EKS User Guide, "Automatically repair nodes in EKS clusters" (repair
  action Reboot) and EC2 user guide, "Capacity Blocks" (an instance of the block is replaced only within the block).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
import subprocess
import uuid
from typing import Any

import pytest
import yaml
from fixtures.burn_in_gate import PENDING_GROUP, PENDING_NODE, REGION, World
from fixtures.eks_smoke import JOBS
from fixtures.interrupt import signal_once_started
from fixtures.lifecycle import CONFIGS, _fmcluster

from fmcluster.backends.eks.burn_in import gate
from fmcluster.backends.eks.smoke import submit
from fmcluster_sandbox.kube import launcher_run

PODS = "/api/v1/namespaces/default/pods"
# One cluster for the module, its cases in order (the first create makes it): one worker runs them all.
pytestmark = [pytest.mark.skipif(launcher_run.unavailable() is not None, reason=str(launcher_run.unavailable())),
              pytest.mark.xdist_group("test_eks_burn_in_gate")]

def _buy_block(sandbox, instances: int) -> str:
    """A p5.48xlarge Capacity Block that starts now, in the first AZ (by name) offering one and m7i.xlarge."""
    ec2 = sandbox.client("ec2", REGION)
    system = {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["m7i.xlarge"]}],
    )["InstanceTypeOfferings"]}
    offers = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=instances,
                                                   CapacityDurationHours=24)["CapacityBlockOfferings"]
    now = dt.datetime.now(dt.timezone.utc)
    offer = min((o for o in offers if o["StartDate"] <= now and o["AvailabilityZone"] in system),
                key=lambda o: o["AvailabilityZone"])
    return ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                      InstancePlatform="Linux/UNIX")["CapacityReservation"]["CapacityReservationId"]


@pytest.fixture(scope="module")
def world(sandbox, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate")
    data = yaml.safe_load((CONFIGS / "p5-kueue-eks.yaml").read_text())
    name = f"gate-{uuid.uuid4().hex[:8]}"
    data["name"] = name
    data.pop("storage")
    train = data["queues"][0]
    train.update(nodes=4, burn_in="quick")
    train["capacity"]["reservation_id"] = _buy_block(sandbox, 4)
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    made = World(sandbox, tmp / "state", spec, name)
    made.data = data  # type: ignore[attr-defined]
    yield made
    sandbox.faults({"reset": True})
    made.run("destroy", name, "--yes")


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch, sandbox):
    monkeypatch.setattr(submit, "POLL_S", 0.2)  # the product polls every 2 s; the sandbox's jobs take about one
    monkeypatch.setattr(gate, "JOB_TIMEOUT_S", 30)  # a job never placed (a taint not tolerated) fails in seconds
    yield
    sandbox.faults({"reset": True})


def test_a_healthy_queue_is_held_then_every_node_passes_and_is_released(world):
    created = world.create()
    assert created.returncode == 0, created.stderr
    group = world.eks.describe_nodegroup(clusterName=world.name, nodegroupName="train")["nodegroup"]
    assert group["taints"] == [PENDING_GROUP]
    system = world.eks.describe_nodegroup(clusterName=world.name, nodegroupName="system")["nodegroup"]
    assert PENDING_GROUP not in system["taints"]  # cluster software's nodes run no burn-in
    nodes = world.nodes()
    assert len(nodes) == 4
    for node in nodes.values():
        assert node["metadata"]["labels"]["fmcluster.io/burn-in"] == "passed"
        assert "fmcluster.io/burn-in-check" not in node["metadata"]["labels"]
        assert PENDING_NODE not in (node["spec"].get("taints") or [])
    assert "burn-in train" in created.stderr


def test_a_gpu_lost_until_reboot_on_the_capacity_block_is_rebooted_retested_and_passes(world):
    """On a Capacity Block the gate reboots (a replacement would need a free slot of the block): the fault that a
    reboot clears goes, the node is tested again and released."""
    name, node = sorted(world.nodes().items())[1]
    instance = world.instance(node)
    world.make_pending(name)
    world.sandbox.faults({"node_health": {instance: {"gpus_missing": 1, "until_reboot": True}}})
    created = world.create()
    assert created.returncode == 0, created.stderr
    assert instance not in world.sandbox.faults({}).get("node_health", {})  # cleared: EC2 RebootInstances ran
    after = world.nodes()
    assert sorted(after) == sorted(world.nodes())  # the same nodes: rebooted, not replaced
    assert after[name]["metadata"]["labels"]["fmcluster.io/burn-in"] == "passed"
    assert PENDING_NODE not in (after[name]["spec"].get("taints") or [])
    assert f"rebooting {name}" in created.stderr


def _core(world, spec_data: dict[str, Any], monkeypatch) -> tuple[Any, Any]:
    """The gate's core (:class:`gate.Gate`) on this cluster with ``spec_data``: (the spec, a Context), fmcluster's
    AWS calls pointed at the sandbox for this test."""
    from fmcluster.connection import aws
    from fmcluster.engine import Context
    from fmcluster.spec import load_spec

    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, REGION, world.sandbox.endpoint_url)
    path = world.spec.with_name("core.yaml")
    path.write_text(yaml.safe_dump(spec_data, sort_keys=False))
    return load_spec(path).spec, Context(cluster=world.name, region=REGION,
                                         client=lambda service: aws.client(service, REGION))


def test_a_check_job_the_scheduler_cannot_place_ends_in_minutes_and_its_node_fails_saying_why(world, sandbox_env,
                                                                                             monkeypatch):
    """A burn-in job is pinned to nodes that exist: a pod with no place (on a real node, fewer GPUs advertised than
    the type has; here, not tolerating the pending taint) ends the job after sweep.UNPLACEABLE_S, not after the job
    timeout, and the node fails check ``job`` with the scheduler's reason (rebooted, retested, still failed)."""
    from fmcluster.backends.eks.burn_in import jobs, sweep
    from fmcluster.backends.eks.kubernetes.access import KubeApi
    from fmcluster.engine.waiting import Stop

    spec, ctx = _core(world, world.data, monkeypatch)
    name, node = sorted(world.nodes().items())[0]
    world.make_pending(name)
    monkeypatch.setattr(sweep, "UNPLACEABLE_S", 1.0)
    tolerates = jobs.TOLERATION
    monkeypatch.setattr(jobs, "TOLERATION", {**tolerates, "key": "example.com/other"})
    said: list[str] = []
    verdict = gate.Gate(KubeApi.of(ctx, world.name), ctx.client("ec2"), world.name, spec, spec.queues[0], 4, Stop(),
                        said.append).run()
    assert (list(verdict.failed), verdict.pending) == ([name], []), said
    assert verdict.failed[name].startswith("job: the check job brought nothing back from this node (UNSCHEDULABLE: "
                                           "pod fmcluster-burn-in-train-worker-0 cannot be placed"), verdict.failed
    assert sum(line.startswith(f"burn-in train: rebooting {name}") for line in said) == gate.MAX_REPAIRS, said
    assert PENDING_NODE in world.nodes()[name]["spec"]["taints"]
    monkeypatch.setattr(jobs, "TOLERATION", tolerates)  # the real one: the same gate passes the node, releases it
    world.make_pending(name)
    verdict = gate.Gate(KubeApi.of(ctx, world.name), ctx.client("ec2"), world.name, spec, spec.queues[0], 4, Stop(),
                        said.append).run()
    assert (len(verdict.passed), verdict.pending) == (4, []), said


def test_a_missing_efa_device_on_demand_is_replaced_and_the_replacement_passes(world, sandbox_env, monkeypatch):
    """Off a reservation the gate terminates the instance; the node group launches a replacement, which registers
    pending and is tested. The gate's core on this cluster, its queue read as On-Demand capacity."""
    from fmcluster.backends.eks.kubernetes.access import KubeApi
    from fmcluster.engine.waiting import Stop

    data = json.loads(json.dumps(world.data))
    data["queues"][0]["capacity"] = {"type": "on-demand"}
    spec, ctx = _core(world, data, monkeypatch)
    api = KubeApi.of(ctx, world.name)
    before = world.nodes()
    name, node = sorted(before.items())[2]
    world.make_pending(name)
    world.sandbox.faults({"node_health": {world.instance(node): {"efa_devices_missing": 1}}})
    monkeypatch.setattr(gate, "NODE_WAIT_S", 30)  # the sandbox replaces at once; a hang fails in seconds
    said: list[str] = []
    verdict = gate.Gate(api, ctx.client("ec2"), world.name, spec, spec.queues[0], 4, Stop(), said.append).run()
    after = world.nodes()
    old = {world.instance(n) for n in before.values()}
    # replaced: a new instance (its Node may take the old one's private IP, and so its name)
    (fresh,) = [n for n, node in after.items() if world.instance(node) not in old]
    assert len(after) == 4, said
    assert (sorted(verdict.passed), verdict.failed, verdict.pending) == (sorted(after), {}, [])
    assert after[fresh]["metadata"]["labels"]["fmcluster.io/burn-in"] == "passed"
    terminated = world.ec2.describe_instances(InstanceIds=[world.instance(node)])["Reservations"][0]["Instances"][0]
    assert terminated["State"]["Name"] in ("shutting-down", "terminated")
    assert any(line.startswith(f"burn-in train: replacing {name}") for line in said), said
    # status: the replacement passed; the old instance, which EC2 still describes, replaced with what it failed
    shown = json.loads(world.run("status", world.name, "--json").stdout)
    (queue,) = [q for q in shown["queues"] if q["name"] == "train"]
    replaced = [n for n in queue["burn_in"]["nodes"] if n["state"] == "replaced"]
    assert [n["instance"] for n in replaced] == [world.instance(node)]
    assert replaced[0]["detail"].startswith("efa"), replaced
    assert queue["burn_in"]["replaced"] == 1 and queue["burn_in"]["passed"] == 4
    rows = {row["id"]: row for row in shown["instances"]}
    assert rows[world.instance(after[fresh])]["burn_in"] == "passed"
    assert world.instance(node) not in rows  # a terminated instance is no live node


def test_a_lone_pending_node_runs_its_all_reduce_with_the_nearest_node_that_passed(world, sandbox_env, monkeypatch):
    """One node tested alone (a replacement, a rebooted node) is not released on its own checks: an all-reduce needs
    two nodes, and the nearest node of the queue that passed before (the deepest network node they share, from
    EKS's topology labels) joins its pair, keeping its own verdict. The gate's core at level standard."""
    from fmcluster.backends.eks.kubernetes.access import KubeApi
    from fmcluster.engine.waiting import Stop

    data = json.loads(json.dumps(world.data))
    data["queues"][0]["burn_in"] = "standard"
    spec, ctx = _core(world, data, monkeypatch)
    assert world.create().returncode == 0  # every node judged once (the module's cluster: they may already be)
    nodes = world.nodes()
    # p5.48xlarge: "Returns 3 network nodes" (EC2 user guide, topology prerequisites); EKS labels each layer
    assert all(node["metadata"]["labels"].get("topology.k8s.aws/network-node-layer-3") for node in nodes.values())

    def shared(a: str, b: str) -> int:
        """How many network layers, from the top, the two nodes' EKS labels share."""
        labels = [nodes[n]["metadata"]["labels"] for n in (a, b)]
        layers = [[lab.get(f"topology.k8s.aws/network-node-layer-{i}") for i in (1, 2, 3)] for lab in labels]
        return next((i for i, (x, y) in enumerate(zip(*layers, strict=True)) if x != y or x is None), 3)

    def nearest(node: str) -> set[str]:
        depths = {other: shared(node, other) for other in nodes if other != node}
        return {other for other, depth in depths.items() if depth == max(depths.values())}

    # preferably a node whose first other node by name is not among its nearest, so that a partner picked by name
    # would show; the layout depends on the module's earlier tests (a replacement moves), and the choice itself is
    # held layout-free by tests/backends/burn_in/test_pairs.py
    name = next((n for n in sorted(nodes) if min(o for o in nodes if o != n) not in nearest(n)), sorted(nodes)[0])
    world.make_pending(name)
    said: list[str] = []
    verdict = gate.Gate(KubeApi.of(ctx, world.name), ctx.client("ec2"), world.name, spec, spec.queues[0], 4, Stop(),
                        said.append).run()
    assert (len(verdict.passed), verdict.failed, verdict.pending) == (4, {}, []), said
    [pair] = [line.split("all-reduce round: ", 1)[1].split(" + ") for line in said if "all-reduce round: " in line]
    (partner,) = set(pair) - {name}
    assert name in pair and partner in nearest(name), (said, nearest(name))
    after = world.nodes()
    assert after[partner]["metadata"]["labels"]["fmcluster.io/burn-in"] == "passed"
    assert PENDING_NODE not in (after[partner]["spec"].get("taints") or [])


def test_without_auto_repair_a_failed_node_stays_held_and_create_exits_1_naming_it(world):
    """auto_repair: false: no repair; the queue is one node short of its 4, so create fails, naming the node and its
    check, and leaves the cluster as it is (the node tainted and labelled); create again says the same."""
    data = json.loads(json.dumps(world.data))
    data["queues"][0]["auto_repair"] = False
    world.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    name, node = sorted(world.nodes().items())[3]
    world.make_pending(name)
    # DCGM level 1 runs the "software" test (DCGM docs, "dcgmi diag": run level 1, "Deployment" plugins)
    world.sandbox.faults({"node_health": {world.instance(node): {"dcgm_failures": [{"gpu": 5, "test": "software"}]}}})
    created = world.create()
    assert created.returncode == 1, created.stderr
    assert f"3 of 4 needed node(s) passed; failed: {name} (dcgm: " in created.stderr, created.stderr
    assert "terminate a failed node's instance" in created.stderr
    after = world.nodes()[name]
    assert PENDING_NODE in after["spec"]["taints"]
    labels = after["metadata"]["labels"]
    assert (labels["fmcluster.io/burn-in"], labels["fmcluster.io/burn-in-check"]) == ("failed", "dcgm")
    assert "rebooting" not in created.stderr and "replacing" not in created.stderr
    assert world.eks.describe_cluster(name=world.name)["cluster"]["status"] == "ACTIVE"  # nothing torn down
    again = world.create()
    # the figures come back from the Node's annotation: the second create says what the first saw
    assert again.returncode == 1 and f"failed: {name} (dcgm: " in again.stderr, again.stderr
    shown = world.run("status", world.name, "--json")
    (queue,) = [q for q in json.loads(shown.stdout)["queues"] if q["name"] == "train"]
    (failed,) = [n for n in queue["burn_in"]["nodes"] if n["state"] == "failed"]
    assert (failed["node"], failed["instance"], failed["checks"]) == (name, world.instance(node), "dcgm")
    assert failed["detail"].startswith("dcgm: "), failed
    assert (queue["burn_in"]["passed"], queue["burn_in"]["failed"], queue["burn_in"]["pending"]) == (3, 1, 0)
    text = world.run("status", world.name).stdout
    assert "burn-in train: 3 passed, 1 failed" in text, text
    assert f"{name} ({world.instance(node)}): failed: dcgm: " in text, text


def test_ctrl_c_during_the_gate_deletes_its_job_and_leaves_the_nodes_held(world):
    """Ctrl-C while the gate's all-reduce job runs (the installed command, in a terminal's place): create exits 130
    and the job is gone from the cluster at once, not left holding the nodes' GPUs until its deadline (an hour); the
    nodes stay held, untested, for the next create. The job runs on: the sandbox's all_reduce_perf never finishes on
    one of its two nodes (level standard pairs the two after their own checks)."""
    data = json.loads(json.dumps(world.data))
    data["queues"][0]["burn_in"] = "standard"
    world.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    (first, node), (second, _) = sorted(world.nodes().items())[:2]
    for name in (first, second):
        world.make_pending(name)
    world.sandbox.faults({"node_health": {world.instance(node): {"never_finishes": True}}})
    proc = subprocess.Popen([*_fmcluster(), "create", str(world.spec), "--yes"], env=world.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    all_reduce = re.compile(r"fmcluster-burn-in-train-\d+$")
    err = signal_once_started(proc, lambda: any(all_reduce.match(job["metadata"]["name"])
                                                for job in world.http("GET", JOBS)[1]["items"]), signal.SIGINT)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert world.http("GET", JOBS)[1]["items"] == []
    assert [p["metadata"]["name"] for p in world.http("GET", PODS)[1]["items"] if "burn-in" in p["metadata"]["name"]
            ] == []
    for name in (first, second):
        after = world.nodes()[name]
        assert PENDING_NODE in after["spec"]["taints"] and "fmcluster.io/burn-in" not in after["metadata"]["labels"]
