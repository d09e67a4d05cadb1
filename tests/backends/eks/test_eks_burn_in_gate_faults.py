"""Issue 37's "done when" on EKS: in a queue of 8 p5.48xlarge On-Demand nodes, a GPU that fails DCGM, a missing EFA
device and a slow link between two nodes; ``create``'s gate at level ``standard`` catches all three, replaces the four
nodes (off a reservation the gate replaces), tests the replacements and ends ready with 8 passed nodes, the link
narrowed to its two ends in at most 4 rounds (⌈log2 8⌉ + 1).

ONE cluster, made by ``fmcluster create`` (in this process) from configs/p5-kueue-eks.yaml with burn-in off; then the
spec's level is raised to ``standard``, the faults are put on the nodes' instances (so a replacement is healthy, as a
new instance is), every node is made pending the way a new one registers, and ``create`` runs again.

Facts typed by hand, with their pages:

* p5.48xlarge: 8 NVIDIA H100 GPUs and 32 EFA interfaces (EC2 user guide, "Amazon EC2 P5 instances");
* DCGM level 2 runs the memory test (DCGM docs, "dcgmi diag": run levels; "Memory" plugin at level 2);
* off a Capacity Block or ODCR a failed node is replaced: EKS User Guide, "Automatically repair nodes in EKS
  clusters" (repair action Replace); a replacement is a new instance with a new id.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest
import yaml
from fixtures.burn_in_faults import link_off_the_neighbour_round
from fixtures.burn_in_gate import PENDING_NODE, World
from fixtures.lifecycle import CONFIGS

from fmcluster.backends.eks.burn_in import gate
from fmcluster.backends.eks.smoke import submit
from fmcluster_sandbox.kube import launcher_run

pytestmark = [pytest.mark.skipif(launcher_run.unavailable() is not None, reason=str(launcher_run.unavailable())),
              pytest.mark.xdist_group("test_eks_burn_in_gate_faults")]


@pytest.fixture(scope="module")
def world(sandbox, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate-faults")
    data = yaml.safe_load((CONFIGS / "p5-kueue-eks.yaml").read_text())
    data["name"] = f"gate8-{uuid.uuid4().hex[:8]}"
    data.pop("storage")
    train = data["queues"][0]
    train.update(nodes=8, burn_in="off", capacity={"type": "on-demand"})
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    made = World(sandbox, tmp / "state", spec, data["name"])
    made.data = data  # type: ignore[attr-defined]
    created = made.create()
    assert created.returncode == 0, created.stderr
    yield made
    sandbox.faults({"reset": True})
    made.run("destroy", made.name, "--yes")


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch):
    monkeypatch.setattr(submit, "POLL_S", 0.2)  # the product polls every 2 s; the sandbox's jobs take about one
    monkeypatch.setattr(gate, "JOB_TIMEOUT_S", 60)  # a job that hangs fails in a minute


def _bottoms(world, nodes: dict[str, dict]) -> dict[str, str]:
    """Node name -> the network node it hangs off, from EC2 DescribeInstanceTopology (plain boto3)."""
    instance = {name: world.instance(node) for name, node in nodes.items()}
    found = world.ec2.describe_instance_topology(InstanceIds=list(instance.values()))["Instances"]
    bottom = {i["InstanceId"]: i["NetworkNodes"][-1] for i in found}
    return {name: bottom[instance[name]] for name in nodes}


def test_a_gpu_an_efa_device_and_a_slow_link_are_caught_replaced_retested_and_8_nodes_pass(world):
    nodes = world.nodes()
    assert len(nodes) == 8
    bottoms = _bottoms(world, nodes)
    a, b, dcgm, efa = link_off_the_neighbour_round(sorted(nodes), bottoms)  # no neighbour pair holds the link
    instance = {name: world.instance(node) for name, node in nodes.items()}
    world.sandbox.faults({"node_health": {instance[dcgm]: {"dcgm_failures": [{"gpu": 3, "test": "memory"}]},
                                          instance[efa]: {"efa_devices_missing": 1}},
                          "slow_link": [instance[a], instance[b], 0.5],
                          "nccl_replay_larger_runs": True})
    data = json.loads(json.dumps(world.data))
    data["queues"][0]["burn_in"] = "standard"
    world.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    for name in nodes:
        world.make_pending(name)

    created = world.create()
    said = " ".join(created.stderr.split())
    assert created.returncode == 0, created.stderr
    # caught, each with its check and figure
    assert re.search(rf"{re.escape(dcgm)} failed \(dcgm: [^)]*GPU 3", said), said
    assert re.search(rf"{re.escape(efa)} failed \(efa: [^)]*31", said), said
    for end in (a, b):
        assert f"{end} failed (nccl: " in said, said
    # replaced: the four instances terminated, four new ones in their place, the other four kept
    replaced = {instance[n] for n in (dcgm, efa, a, b)}
    after = world.nodes()
    assert len(after) == 8
    kept = {world.instance(node) for node in after.values()}
    assert kept & replaced == set() and kept >= set(instance.values()) - replaced
    gone = world.ec2.describe_instances(InstanceIds=sorted(replaced))["Reservations"]
    assert {i["State"]["Name"] for r in gone for i in r["Instances"]} <= {"shutting-down", "terminated"}
    # ready: every node passed and released
    for node in after.values():
        assert node["metadata"]["labels"]["fmcluster.io/burn-in"] == "passed"
        assert PENDING_NODE not in (node["spec"].get("taints") or [])
    assert "burn-in train: 8 of 8 needed node(s) passed" in said, said
    # status: 8 passed, 4 replaced, and the link's ends say what the narrowing found and in how many rounds
    shown = json.loads(world.run("status", world.name, "--json").stdout)
    (queue,) = [q for q in shown["queues"] if q["name"] == "train"]
    assert (queue["burn_in"]["passed"], queue["burn_in"]["replaced"], queue["burn_in"]["failed"]) == (8, 4, 0)
    details = {n["instance"]: n["detail"] for n in queue["burn_in"]["nodes"] if n["state"] == "replaced"}
    assert set(details) == replaced
    link = details[instance[a]]
    assert link == details[instance[b]] and a in link and b in link, details
    rounds = int(re.search(r"found in (\d+) round", link).group(1))
    assert rounds <= 4, link  # narrowing rounds after the pairs; 0 when a pair across layers was the link
