"""End-to-end: re-running ``create`` converges any change, ``diff`` shows it first, ``status`` reports drift,
and ``scale`` always lands on the counts asked for. The installed ``fmcluster`` against the sandbox; every
assertion about AWS reads the sandbox directly, not fmcluster's own output.

Steps whose answer is what a test checks (a re-run after a kill, the destroy after a failed create, the reads
between) run through the entry point in this process (``create_here``, ``destroy_here``, ``run_in_process``;
fixtures/in_process.py); what only the installed command shows (its exit status, a signal, no traceback) stays
a subprocess.
"""

from __future__ import annotations

import json
import time

import yaml
from fixtures.lifecycle import PclusterCli, PcsCli, _ok, cli_fixture

cli = cli_fixture(PcsCli)
pc_cli = cli_fixture(PclusterCli)


def _edit(cli, change) -> None:
    data = yaml.safe_load(cli.spec.read_text())
    change(data)
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))


def _group(cli, name: str) -> dict:
    pcs = cli.sandbox.client("pcs")
    return pcs.get_compute_node_group(clusterIdentifier=cli.name, computeNodeGroupIdentifier=name)["computeNodeGroup"]


def _diff(cli) -> dict:
    return json.loads(_ok(cli.run_in_process("diff", str(cli.spec), "--json")).stdout)


def _changes(report: dict) -> dict[str, dict]:
    return {c["resource"]: c for c in report["changes"] if c["action"] != "no-op"}


def test_one_pcs_cluster_converges_drift_scale_backs_a_type_edit_and_a_removed_queue(cli):
    """Four convergence checks in turn on one PCS cluster (each once had its own create and destroy, seconds of
    the suite's time apiece): each leaves the cluster in sync with its spec, which is where the next begins. The
    first create and the destroy are the installed command's; the steps between run in this process."""
    _ok(cli.create())
    _a_queue_deleted_outside_fmcluster_is_drift_and_create_repairs_it(cli)
    _scale_back_to_an_earlier_count_really_changes_the_node_group(cli)
    _an_instance_type_edit_is_shown_as_replace_and_applied(cli)
    _a_queue_removed_from_the_spec_is_deleted_and_destroy_still_works(cli)
    _ok(cli.destroy())
    cli.assert_nothing_left()


def _scale_back_to_an_earlier_count_really_changes_the_node_group(cli) -> None:
    """Each scale is a new request: going back to a count used before must not replay the earlier one."""
    for count in (5, 6, 3, 5):
        result = _ok(cli.run_in_process("scale", cli.name, f"gpu={count}", "--yes"))
        assert "scaled" in result.stdout + result.stderr
        scaling = _group(cli, "gpu")["scalingConfiguration"]
        assert (scaling["minInstanceCount"], scaling["maxInstanceCount"]) == (count, count), (count, scaling)
    same = _ok(cli.run_in_process("scale", cli.name, "gpu=5", "--yes"))
    assert "already" in same.stdout + same.stderr  # a no-op is said, and true: the live group is 5..5


def _a_queue_deleted_outside_fmcluster_is_drift_and_create_repairs_it(cli) -> None:
    report = cli.status()
    assert report["drift"] == [], json.dumps(report["drift"], indent=1)
    pcs = cli.sandbox.client("pcs")
    pcs.delete_queue(clusterIdentifier=cli.name, queueIdentifier="burst")
    for _ in range(200):  # the sandbox keeps a queue DELETING for a moment, as PCS does
        if not [q for q in pcs.list_queues(clusterIdentifier=cli.name)["queues"] if q["name"] == "burst"]:
            break
        time.sleep(0.1)
    drifted = cli.status()
    drift = drifted["drift"]
    assert {"resource": "queue:burst", "expected": "exists", "actual": "missing"} in drift, drift
    # a part of the spec missing: the cluster is not ACTIVE but INCOMPLETE, and says which part (README's table)
    assert (drifted["status"], drifted["backend_status"]) == ("INCOMPLETE", "ACTIVE"), drifted
    assert "queue:burst" in drifted["missing"], drifted["missing"]
    text = _ok(cli.run_in_process("status", cli.name)).stdout
    assert "drift from the spec" in text and "queue:burst" in text
    assert "INCOMPLETE" in text and "missing from the spec: queue: burst" in text, text

    assert _changes(_diff(cli))["queue:burst"]["action"] == "create"
    _ok(cli.create_here())
    names = [q["name"] for q in pcs.list_queues(clusterIdentifier=cli.name)["queues"]]
    assert sorted(names) == ["burst", "gpu"], names
    assert cli.status()["drift"] == []


def _an_instance_type_edit_is_shown_as_replace_and_applied(cli) -> None:
    _edit(cli, lambda data: data["queues"][1].update(instance_type="m7i.2xlarge"))
    changes = _changes(_diff(cli))
    group = changes["compute_node_group:burst"]
    assert group["action"] == "replace", group
    assert group["reason"], group  # why PCS cannot change it in place
    assert "instanceConfigs" in json.dumps(group["attributes"]), group
    # the plain diff says the same, and nothing changed yet
    assert _group(cli, "burst")["instanceConfigs"] == [{"instanceType": "p5.4xlarge"}]

    _ok(cli.create_here())
    assert _group(cli, "burst")["instanceConfigs"] == [{"instanceType": "m7i.2xlarge"}]
    burst = next(q for q in cli.status()["queues"] if q["name"] == "burst")
    assert burst["instance_type"] == "m7i.2xlarge", burst
    assert _diff(cli)["in_sync"] is True


def _a_queue_removed_from_the_spec_is_deleted_and_destroy_still_works(cli) -> None:
    _edit(cli, lambda data: data["queues"].pop(1))
    changes = _changes(_diff(cli))
    assert changes["queue:burst"]["action"] == "delete"
    assert changes["compute_node_group:burst"]["action"] == "delete"
    _ok(cli.create_here())
    pcs = cli.sandbox.client("pcs")
    assert [q["name"] for q in pcs.list_queues(clusterIdentifier=cli.name)["queues"]] == ["gpu"]
    groups = sorted(g["name"] for g in pcs.list_compute_node_groups(clusterIdentifier=cli.name)["computeNodeGroups"])
    assert groups == ["gpu", "login"], groups


def test_parallelcluster_counts_and_an_added_queue_converge(pc_cli):
    cli = pc_cli
    _ok(cli.create())
    _edit(cli, lambda data: (data["queues"][0].update(nodes={"min": 0, "max": 4}),
                             data["queues"].append({"name": "cpu", "instance_type": "m7i.2xlarge",
                                                    "nodes": {"min": 0, "max": 3}})))
    change = _changes(_diff(cli))["pcluster_cluster:" + cli.name]
    assert change["action"] == "update", change
    _ok(cli.create_here())  # the converging re-run, in this process (the first create is the installed command)
    queues = {q["name"]: q for q in cli.status()["queues"]}  # read from the configuration ParallelCluster deployed
    assert (queues["gpu"]["min"], queues["gpu"]["max"]) == (0, 4), queues
    assert (queues["cpu"]["min"], queues["cpu"]["max"]) == (0, 3), queues
    assert _diff(cli)["in_sync"] is True
    _ok(cli.destroy_here())
    cli.wait_until_gone()


def test_create_does_not_call_ready_a_cluster_whose_nodes_cannot_register(cli):
    # 32 network interfaces get no public address in the default VPC's public subnet, and with no NAT the
    # nodes never reach PCS: PCS keeps the group ACTIVE and says so in errorInfo.
    ec2 = cli.sandbox.client("ec2")
    offered = {o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["p5.48xlarge"]}])[
        "InstanceTypeOfferings"]}
    public = next(s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "default-for-az",
                                                                        "Values": ["true"]}])["Subnets"]
                  if s["AvailabilityZone"] in offered)
    _edit(cli, lambda data: (data["queues"][0].update(instance_type="p5.48xlarge"),
                             data.setdefault("network", {}).update(subnet_id=public)))
    # preflight refuses this subnet for multi-interface nodes on PCS; past it, AWS must be heard
    refused = _ok(cli.create(), code=1)
    assert "preflight failed" in refused.stderr and not cli.inventory()["clusters"]
    result = _ok(cli.create_here("--skip-preflight"), code=1)  # the refusal above is the installed command's
    assert "reports problems" in result.stderr and "compute node group gpu" in result.stderr, result.stderr
    assert "is ready" not in result.stdout
    report = cli.status()
    assert any(p.startswith("compute node group gpu:") for p in report["problems"]), report
    _ok(cli.destroy_here())
    cli.assert_nothing_left()
