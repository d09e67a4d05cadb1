"""``fmcluster topology NAME [--json]``: the pure tree builder on hand-made places, the EC2 read (ids in chunks of
100, paged; a refusal is one clear error), and end to end on a PCS cluster in the sandbox, checked against what
plain boto3 DescribeInstanceTopology says of the same instances.

Expected values are hand-typed: from the places made here, or from the sandbox's documented layout
(docs/sandbox-fidelity.md, "EC2 topology": 2 instances per bottom node, 2 bottom nodes per middle node, 2 middle
nodes per spine; p5.48xlarge returns 3 network nodes)."""

from __future__ import annotations

import json

import pytest
import yaml
from fixtures.lifecycle import PcsCli, _ok
from fixtures.tiers import E2E_FIXTURE_ATTR

from fmcluster.aws.topology import InstancePlace, instance_topology
from fmcluster.errors import AwsError
from fmcluster.verbs.connect.topology import build, text

# --- the pure tree builder -----------------------------------------------------------------------------


def _place(instance_id: str, *nodes: str, instance_type: str = "p5.48xlarge", zone: str = "us-east-1a",
           block: str | None = None) -> InstancePlace:
    return InstancePlace(instance_id, instance_type, zone, "use1-az1", tuple(nodes), capacity_block_id=block)


def _row(instance_id: str, queue: str = "gpu", instance_type: str = "p5.48xlarge", state: str = "running") -> dict:
    return {"id": instance_id, "queue": queue, "instance_type": instance_type, "state": state, "launch_time": None}


def _leaf(node: str, layer: int, *ids: str, zone: str = "us-east-1a", block: str | None = None) -> dict:
    return {"network_node": node, "layer": layer, "zone": zone, "instance_count": len(ids), "children": [],
            "instances": [{"id": i, "instance_type": "p5.48xlarge", "capacity_block_id": block, "group_name": None}
                          for i in ids]}


def _inner(node: str, layer: int, count: int, *children: dict, zone: str = "us-east-1a") -> dict:
    return {"network_node": node, "layer": layer, "zone": zone, "instance_count": count, "children": list(children),
            "instances": []}


REPORT = {"name": "llama", "backend": "pcs", "region": "us-east-1", "status": "ACTIVE",
          "queues": [{"name": "gpu"}, {"name": "burst"}, {"name": "spare"}],
          "instances": [
              _row("i-5"), _row("i-1"), _row("i-3"), _row("i-2"), _row("i-4"),
              _row("i-6", instance_type="m5.large"),
              _row("i-7", state="pending"),
              _row("i-8", state="terminated"),
              _row("i-9", queue="burst", instance_type="p5.4xlarge"),
              _row("i-10", queue="login", instance_type="m7i.xlarge")]}
PLACES = {p.instance_id: p for p in (
    _place("i-1", "nn-a", "nn-a1", "nn-a1x"), _place("i-2", "nn-a", "nn-a1", "nn-a1x"),
    _place("i-3", "nn-a", "nn-a1", "nn-a1y"), _place("i-4", "nn-a", "nn-a2", "nn-a2x"),
    _place("i-5", "nn-b", "nn-b1", "nn-b1x", zone="us-east-1b", block="cb-1"))}


def test_the_tree_groups_each_queue_spine_down_to_the_bottom_node():
    answer = build(REPORT, PLACES)
    assert {k: answer[k] for k in ("name", "backend", "region", "status", "instance_count")} == {
        "name": "llama", "backend": "pcs", "region": "us-east-1", "status": "ACTIVE", "instance_count": 9}
    gpu, burst, spare, login = answer["queues"]
    assert [q["name"] for q in answer["queues"]] == ["gpu", "burst", "spare", "login"]
    assert gpu["instance_count"] == 7  # i-1..i-7; the terminated i-8 is gone
    assert gpu["tree"] == [
        _inner("nn-a", 1, 4,
               _inner("nn-a1", 2, 3, _leaf("nn-a1x", 3, "i-1", "i-2"), _leaf("nn-a1y", 3, "i-3")),
               _inner("nn-a2", 2, 1, _leaf("nn-a2x", 3, "i-4"))),
        _inner("nn-b", 1, 1, _inner("nn-b1", 2, 1, _leaf("nn-b1x", 3, "i-5", zone="us-east-1b", block="cb-1"),
                                    zone="us-east-1b"), zone="us-east-1b")]
    assert gpu["without_topology"] == [
        {"id": "i-6", "instance_type": "m5.large", "state": "running",
         "reason": "AWS publishes no network topology for m5.large"},
        {"id": "i-7", "instance_type": "p5.48xlarge", "state": "pending",
         "reason": "pending: AWS gives a network topology for running instances only"}]
    assert burst == {"name": "burst", "instance_count": 1, "tree": [], "without_topology": [
        {"id": "i-9", "instance_type": "p5.4xlarge", "state": "running",
         "reason": "AWS publishes no network topology for p5.4xlarge"}]}
    assert spare == {"name": "spare", "instance_count": 0, "tree": [], "without_topology": []}
    assert login["without_topology"][0]["reason"] == "AWS publishes no network topology for m7i.xlarge"
    json.dumps(answer)  # the --json answer is plain JSON


def test_a_four_layer_instance_hangs_one_layer_lower():
    report = {**REPORT, "queues": [{"name": "gpu"}], "instances": [_row("i-1"), _row("i-2")]}
    places = {"i-1": _place("i-1", "nn-a", "nn-a1", "nn-a1x"), "i-2": _place("i-2", "nn-a", "nn-a1", "nn-a1x", "nn-q")}
    [gpu] = build(report, places)["queues"]
    bottom = gpu["tree"][0]["children"][0]["children"][0]
    assert (bottom["network_node"], bottom["instance_count"], [i["id"] for i in bottom["instances"]]) == \
        ("nn-a1x", 2, ["i-1"])
    assert bottom["children"] == [_leaf("nn-q", 4, "i-2")]


def test_the_text_is_an_indented_tree_with_counts():
    report = {**REPORT, "queues": [{"name": "gpu"}], "instances": [_row("i-1"), _row("i-2"), _row("i-3"),
                                                                    _row("i-6", instance_type="m5.large")]}
    assert text(build(report, PLACES)) == (
        "llama (pcs, us-east-1, ACTIVE)\n"
        "queue gpu: 4 instances, 3 placed\n"
        "  spine nn-a (us-east-1a, 3 instances)\n"
        "    layer 2 nn-a1 (3 instances)\n"
        "      bottom node nn-a1x (2 instances)\n"
        "        i-1 (p5.48xlarge)\n"
        "        i-2 (p5.48xlarge)\n"
        "      bottom node nn-a1y (1 instance)\n"
        "        i-3 (p5.48xlarge)\n"
        "  i-6 (m5.large): AWS publishes no network topology for m5.large\n")


def test_a_cluster_with_no_instances_yet_says_so():
    answer = build({**REPORT, "instances": []}, {})
    assert answer["instance_count"] == 0
    assert [q["tree"] for q in answer["queues"]] == [[], [], []]
    assert text(answer) == "llama (pcs, us-east-1, ACTIVE): no instances yet, so nothing is placed in AWS's network\n"


# --- the EC2 read ----------------------------------------------------------------------------------------


@pytest.fixture
def stubbed_ec2():
    import boto3
    from botocore.stub import Stubber

    ec2 = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x",
                                region_name="us-east-1").client("ec2")
    with Stubber(ec2) as stub:
        yield ec2, stub
        stub.assert_no_pending_responses()


def _answer(*ids: str, token: str | None = None) -> dict:
    items = [{"InstanceId": i, "InstanceType": "p5.48xlarge", "NetworkNodes": ["nn-a", "nn-a1", f"nn-{i}"],
              "AvailabilityZone": "us-east-1a", "ZoneId": "use1-az1"} for i in ids]
    return {"Instances": items, **({"NextToken": token} if token else {})}


def test_ids_go_100_per_request_and_every_page_is_read(stubbed_ec2):
    ec2, stub = stubbed_ec2
    ids = [f"i-{n:017x}" for n in range(230)]  # 100 + 100 + 30: the API reference's "Maximum 100"
    stub.add_response("describe_instance_topology", _answer(*ids[:20], token="t1"), {"InstanceIds": ids[:100]})
    stub.add_response("describe_instance_topology", _answer(*ids[20:100]),
                      {"InstanceIds": ids[:100], "NextToken": "t1"})
    stub.add_response("describe_instance_topology", _answer(*ids[100:200]), {"InstanceIds": ids[100:200]})
    stub.add_response("describe_instance_topology", _answer(*ids[200:229]), {"InstanceIds": ids[200:]})
    places = instance_topology(ec2, ids)
    assert len(places) == 229 and ids[229] not in places  # the last one has no topology: absent
    assert places[ids[0]] == InstancePlace(ids[0], "p5.48xlarge", "us-east-1a", "use1-az1",
                                           ("nn-a", "nn-a1", f"nn-{ids[0]}"))


def test_aws_refusing_the_read_is_one_clear_error(stubbed_ec2):
    ec2, stub = stubbed_ec2
    stub.add_client_error("describe_instance_topology", service_error_code="UnauthorizedOperation",
                          service_message="You are not authorized to perform this operation.")
    with pytest.raises(AwsError) as refused:
        instance_topology(ec2, ["i-0123456789abcdef0"])
    assert refused.value.code == "UnauthorizedOperation" and refused.value.exit_code == 1
    assert str(refused.value).startswith("EC2 DescribeInstanceTopology: AWS said UnauthorizedOperation")
    assert "ec2:DescribeInstanceTopology" in str(refused.value)


# --- end to end, in the sandbox ------------------------------------------------------------------------

P5_NODES = 4  # a p5.48xlarge queue of a few nodes


def _p5_pcs(sandbox, tmp_path_factory):
    """One PCS cluster (configs/quickstart-pcs.yaml) whose queue gpu is P5_NODES p5.48xlarge (3 network nodes) and
    whose queue burst keeps one p5.4xlarge (no topology), shared by this module's read-only tests."""
    cli = PcsCli(sandbox, tmp_path_factory.mktemp("topology-pcs"))
    data = yaml.safe_load(cli.spec.read_text())
    data["queues"] = [{"name": "gpu", "instance_type": "p5.48xlarge", "nodes": P5_NODES},
                      {"name": "burst", "instance_type": "p5.4xlarge", "nodes": 1}]
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    _ok(cli.create("--skip-preflight"))
    yield cli
    _ok(cli.destroy())


setattr(_p5_pcs, E2E_FIXTURE_ATTR, True)  # tests/fixtures/tiers.py marks every test that uses it e2e
p5_pcs = pytest.fixture(_p5_pcs, scope="module", name="p5_pcs")
SHARED = pytest.mark.xdist_group("test_topology-p5-pcs")


def _paths(node: dict, above: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    """Instance id -> its network nodes top-down, read back from a JSON tree."""
    here = (*above, node["network_node"])
    found = {i["id"]: here for i in node["instances"]}
    for child in node["children"]:
        found.update(_paths(child, here))
    return found


def _nodes_at(tree: list[dict], layer: int) -> list[dict]:
    return [n for n in tree if n["layer"] == layer] + [m for n in tree for m in _nodes_at(n["children"], layer)]


@SHARED
def test_topology_json_is_what_ec2_says_of_the_same_instances(p5_pcs, sandbox):
    answer = json.loads(_ok(p5_pcs.run_in_process("topology", p5_pcs.name, "--json")).stdout)
    queues = {q["name"]: q for q in answer["queues"]}
    gpu = queues["gpu"]
    assert (answer["name"], answer["backend"], gpu["instance_count"], gpu["without_topology"]) == \
        (p5_pcs.name, "pcs", P5_NODES, [])
    placed = {i: path for spine in gpu["tree"] for i, path in _paths(spine).items()}
    assert len(placed) == P5_NODES
    # the test's own read: plain boto3, the same instances
    ec2 = sandbox.client("ec2")
    said = {i["InstanceId"]: tuple(i["NetworkNodes"]) for page in ec2.get_paginator(
        "describe_instance_topology").paginate(InstanceIds=sorted(placed)) for i in page["Instances"]}
    assert placed == said
    assert all(len(path) == 3 for path in placed.values())  # p5.48xlarge: 3 network nodes
    # the documented layout bounds each node's count: 2 per bottom node, 4 per middle node, 8 per spine
    for layer, most in ((1, 8), (2, 4), (3, 2)):
        counts = [n["instance_count"] for n in _nodes_at(gpu["tree"], layer)]
        assert sum(counts) == P5_NODES and all(0 < c <= most for c in counts), (layer, counts)
    assert queues["burst"]["tree"] == []
    [burst] = queues["burst"]["without_topology"]
    assert (burst["instance_type"], burst["reason"]) == ("p5.4xlarge", "AWS publishes no network topology for "
                                                                       "p5.4xlarge")


@SHARED
def test_pcs_got_no_topology_setting_from_fmcluster(p5_pcs, sandbox):
    """PCS keeps Slurm's topology ("AWS PCS tells Slurm where each compute node sits in the network", PCS user guide
    "Network topology-aware scheduling in AWS PCS"): what fmcluster sent, read back with plain boto3, names none."""
    pcs = sandbox.client("pcs")
    cluster = pcs.get_cluster(clusterIdentifier=p5_pcs.name)["cluster"]
    settings = [s["parameterName"] for s in cluster.get("slurmConfiguration", {}).get("slurmCustomSettings", [])]
    for summary in pcs.list_queues(clusterIdentifier=p5_pcs.name)["queues"]:
        queue = pcs.get_queue(clusterIdentifier=p5_pcs.name, queueIdentifier=summary["id"])["queue"]
        settings += [s["parameterName"] for s in queue.get("slurmConfiguration", {}).get("slurmCustomSettings", [])]
    assert "OverSubscribe" in settings  # the GPU queue's job_exclusive: the read sees what fmcluster sent
    assert [name for name in settings if name.lower().startswith("topology")] == []


@SHARED
def test_topology_text_shows_the_tree_per_queue(p5_pcs):
    shown = _ok(p5_pcs.run_in_process("topology", p5_pcs.name)).stdout
    assert f"queue gpu: {P5_NODES} instances, {P5_NODES} placed\n" in shown, shown
    assert "queue burst: 1 instance, 0 placed\n" in shown, shown
    assert shown.count("\n  spine nn-") >= 1 and "bottom node nn-" in shown, shown
    assert "(p5.4xlarge): AWS publishes no network topology for p5.4xlarge" in shown, shown


def test_an_unknown_cluster_is_the_error_of_the_other_read_commands(sandbox, tmp_path):
    cli = PcsCli(sandbox, tmp_path)
    topology = cli.run_in_process("topology", "no-such-cluster")
    logs = cli.run_in_process("logs", "no-such-cluster")
    assert topology.returncode == logs.returncode == 1, (topology, logs)
    assert "no cluster named 'no-such-cluster' is known here" in topology.stderr, topology.stderr
    assert topology.stderr == logs.stderr and "Traceback" not in topology.stderr
