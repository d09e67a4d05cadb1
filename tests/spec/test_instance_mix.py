"""Several instance types per queue and per-queue subnets (issue 14 item 6): rendered for each backend and
checked with its own rules (ParallelCluster's schema and validators, botocore's PCS model), refused at load
time where ParallelCluster's flexible-instance validators or one launch template would refuse them, and
created in the sandbox."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from fixtures.lifecycle import PcsCli, _ok

from fmcluster.backends import registry
from fmcluster.backends.registry import render
from fmcluster.preflight import run_preflight
from fmcluster.spec import load_spec
from fmcluster.spec.models import Spec
from fmcluster.validate.requests import check_document, with_stand_ins

SUBNET = "subnet-0123456789abcdef0"
QUEUE_SUBNET = "subnet-0123456789abcdef1"
# Where the sandbox (AWS's own offerings data) offers both p4d.24xlarge and p4de.24xlarge.
ZONE = "us-east-1b"


def _write(tmp_path: Path, backend: str, queue: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: mix\nbackend: {backend}\nnetwork: {{subnet_id: {SUBNET}}}\nqueues:\n{queue}")
    return path


MIX = ("  - name: train\n    instance_type: [p5.48xlarge, p5e.48xlarge]\n    nodes: {min: 0, max: 4}\n"
       f"    subnet_id: {QUEUE_SUBNET}\n")


def _errors(path: Path) -> list[str]:
    from fmcluster.errors import SpecError

    with pytest.raises(SpecError) as caught:
        load_spec(path)
    return [str(p) for p in caught.value.problems]


def test_parallelcluster_renders_instances_and_the_queue_subnet(tmp_path, monkeypatch):
    from fmcluster.backends.parallelcluster.config_checks import check_schema

    loaded = load_spec(_write(tmp_path, "parallelcluster", MIX))
    assert any("most expensive of its types" in str(w) for w in loaded.warnings)
    config = render(loaded.spec).one("pcluster_cluster").body
    queue = config["Scheduling"]["SlurmQueues"][0]
    resource = queue["ComputeResources"][0]
    assert resource["Instances"] == [{"InstanceType": "p5.48xlarge"}, {"InstanceType": "p5e.48xlarge"}]
    assert "InstanceType" not in resource
    assert queue["Networking"]["SubnetIds"] == [QUEUE_SUBNET]
    assert config["HeadNode"]["Networking"]["SubnetId"] == SUBNET
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    assert check_schema("mix", with_stand_ins(config), "us-east-1").errors == []


def test_pcs_renders_instance_configs_and_the_queue_subnet(tmp_path):
    rendered = render(load_spec(_write(tmp_path, "pcs", MIX)).spec)
    group = rendered.one("compute_node_group", "train").body
    assert group["instanceConfigs"] == [{"instanceType": "p5.48xlarge"}, {"instanceType": "p5e.48xlarge"}]
    assert group["subnetIds"] == [QUEUE_SUBNET]
    assert rendered.one("compute_node_group", "login").body["subnetIds"] == [SUBNET]
    for document in rendered.documents:
        assert check_document(document) == [], document.filename


def test_a_single_type_stays_a_string_and_a_list_survives_a_round_trip(tmp_path):
    spec = load_spec(_write(tmp_path, "pcs", MIX + "  - {name: one, instance_type: p5.4xlarge, nodes: 1}\n")).spec
    dumped = spec.model_dump(mode="json", exclude_defaults=True)
    assert [q["instance_type"] for q in dumped["queues"]] == [["p5.48xlarge", "p5e.48xlarge"], "p5.4xlarge"]
    again = Spec.model_validate(dumped)
    assert again.queues[0].instance_type.all == ("p5.48xlarge", "p5e.48xlarge")
    assert "anyOf" in Spec.model_json_schema()["$defs"]["Queue"]["properties"]["instance_type"]


@pytest.mark.parametrize(("types", "extra", "message"), [
    ("[p5.48xlarge, p5en.48xlarge]", "", "same EFA interface count (p5.48xlarge: 32, p5en.48xlarge: 16)"),
    ("[p5.48xlarge, p4d.24xlarge]", "", "the same vCPUs"),
    ("[p5.48xlarge, p5.48xlarge]", "", "'p5.48xlarge' is listed twice"),
    ("[p5.48xlarge, p5.48xlarg]", "", "unknown instance type 'p5.48xlarg'"),
    ("[p5.48xlarge, p5e.48xlarge]", "    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}\n",
     "a capacity block holds one instance type"),
    ("[]", "", "name at least one instance type"),
])
def test_mixes_the_backends_refuse_are_refused_at_the_line(tmp_path, types, extra, message):
    path = _write(tmp_path, "parallelcluster", f"  - name: train\n    instance_type: {types}\n    nodes: 2\n{extra}")
    errors = _errors(path)
    assert any(":6:" in e and "queues[0].instance_type" in e and message in e for e in errors), errors


def test_a_queue_subnet_needs_the_network_subnet(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: mix\nbackend: pcs\nqueues:\n  - name: train\n    instance_type: p5.48xlarge\n"
                    f"    nodes: 2\n    subnet_id: {QUEUE_SUBNET}\n")
    assert any(":7:16: queues[0].subnet_id: a queue's own subnet" in e for e in _errors(path))


def test_parallelcluster_validators_accept_the_mix_in_the_sandbox(sandbox, tmp_path):
    network = sandbox.private_network(zone=ZONE)
    cli = PcsCli(sandbox, tmp_path)
    path = tmp_path / "mix.yaml"
    path.write_text(f"name: mix-{uuid.uuid4().hex[:6]}\nbackend: parallelcluster\n"
                    f"network: {{subnet_id: {network['public_subnet']}}}\nqueues:\n  - name: train\n"
                    "    instance_type: [p4d.24xlarge, p4de.24xlarge]\n    nodes: {min: 0, max: 2}\n"
                    f"    placement_group: false\n    subnet_id: {network['private_subnet']}\n")
    result = cli.run("validate", str(path))
    # exit 0: every check passed or only warned; ParallelCluster's own validators ran on the types
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pcluster validators" in result.stdout and "ERROR" not in result.stdout, result.stdout


def test_preflight_checks_each_queue_subnet(sandbox):
    ours, other = sandbox.private_network(zone=ZONE), sandbox.private_network(zone=ZONE)
    spec = Spec.model_validate({"name": f"mix-{uuid.uuid4().hex[:6]}", "backend": "pcs",
                                "network": {"subnet_id": ours["public_subnet"]},
                                "queues": [{"name": "train", "instance_type": ["p4d.24xlarge", "p4de.24xlarge"],
                                            "nodes": 1, "subnet_id": ours["private_subnet"]},
                                           {"name": "other", "instance_type": "p5.48xlarge", "nodes": 1,
                                            "subnet_id": other["private_subnet"]}]})
    results = {r.name: r for r in run_preflight(spec, "us-east-1", lambda s: sandbox.client(s, "us-east-1"),
                                                    registry.get(spec.backend).checks)}
    assert results["subnet of train"].status == "passed", results["subnet of train"]
    assert results["subnet of other"].status == "failed" and ours["vpc"] in results["subnet of other"].summary
    reach = [r for r in results.values() if r.name == "node network"]
    assert reach and all(r.status == "passed" for r in reach), reach


def test_pcs_creates_a_mixed_queue_in_its_own_subnet(sandbox, tmp_path):
    network = sandbox.private_network(zone=ZONE)
    cli = PcsCli(sandbox, tmp_path)
    data = yaml.safe_load(cli.spec.read_text())
    data["network"] = {"subnet_id": network["public_subnet"]}
    data["queues"] = [{"name": "train", "instance_type": ["p4d.24xlarge", "p4de.24xlarge"], "nodes": 1,
                       "placement_group": False, "subnet_id": network["private_subnet"]}]
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        _ok(cli.create())
        pcs = sandbox.client("pcs")
        cluster = pcs.get_cluster(clusterIdentifier=cli.name)["cluster"]
        summary = next(g for g in pcs.list_compute_node_groups(clusterIdentifier=cluster["id"])["computeNodeGroups"]
                       if g["name"] == "train")
        group = pcs.get_compute_node_group(clusterIdentifier=cluster["id"],
                                           computeNodeGroupIdentifier=summary["id"])["computeNodeGroup"]
        assert [c["instanceType"] for c in group["instanceConfigs"]] == ["p4d.24xlarge", "p4de.24xlarge"]
        assert group["subnetIds"] == [network["private_subnet"]] and not group.get("errorInfo")
        status = cli.status()
        assert next(q for q in status["queues"] if q["name"] == "train")["instance_type"] == \
            "p4d.24xlarge, p4de.24xlarge"
    finally:
        _ok(cli.destroy())
    cli.assert_nothing_left()
