"""Fault model of the sandbox."""

from __future__ import annotations

import json
import threading
import urllib.error

import pytest

from fmcluster_sandbox.faults import Faults


def test_defaults_and_json_round_trip():
    faults = Faults()
    assert faults.to_json() == {
        "seed": 0,
        "latency": {"pcs.cluster": 0.0, "pcs.compute_node_group": 0.0, "pcs.queue": 0.0,
                    "eks.cluster": 0.0, "eks.nodegroup": 0.0, "eks.addon": 0.0},
        "throttle_rate": {},
        "insufficient_capacity": [],
        "fail_status": {},
        "capacity_block_health": {},
        "topology_move": {},
        "node_health": {},
        "slow_link": None,
        "nccl_replay_larger_runs": False,
        "held": {},
    }
    faults.update({"latency": {"pcs.cluster": 2}, "insufficient_capacity": ["p5.48xlarge"], "seed": 7,
                   "capacity_block_health": {"cb-0123456789abcdef0": {"interconnect_status": "impaired"}},
                   "node_health": {"i-0123456789abcdef0": {"gpus_missing": 1}}, "slow_link": ["a", "b", 0.5],
                   "nccl_replay_larger_runs": True})
    clone = Faults()
    clone.update(json.loads(json.dumps(faults.to_json())))
    assert clone.to_json() == faults.to_json()
    assert clone.insufficient_capacity == {"p5.48xlarge"}


def test_held_calls_are_counted_and_forgotten_on_reset():
    faults = Faults()
    faults.note_held("call.iam.CreateRole", "started")
    assert faults.to_json()["held"] == {"call.iam.CreateRole": {"started": 1, "answered": 0}}
    faults.note_held("call.iam.CreateRole", "answered")
    assert faults.to_json()["held"] == {"call.iam.CreateRole": {"started": 1, "answered": 1}}
    faults.update({"held": {}})  # read only: loading to_json's output back changes no count
    assert faults.to_json()["held"]["call.iam.CreateRole"] == {"started": 1, "answered": 1}
    faults.update({"reset": True})
    assert faults.to_json()["held"] == {}


def test_eks_latencies_and_failures():
    faults = Faults()
    faults.update({"latency": {"eks.nodegroup": 4}, "fail_status": {"eks_nodegroup:gpu": "DELETE_FAILED"}})
    assert faults.transition_latency("eks.nodegroup") == 4.0 and faults.transition_latency("eks.cluster") == 0.0
    assert faults.forced_status("eks_nodegroup", "gpu") == "DELETE_FAILED"
    for bad in ({"eks_cluster:c": "DELETE_FAILED"}, {"eks_addon:coredns": "SUSPENDED"}):
        with pytest.raises(ValueError):
            faults.update({"fail_status": bad})


def test_throttle_is_seeded_and_uses_star_fallback():
    a = Faults(seed=3, throttle_rate={"ec2": 0.5})
    b = Faults(seed=3, throttle_rate={"ec2": 0.5})
    draws_a = [a.should_throttle("ec2") for _ in range(50)]
    assert draws_a == [b.should_throttle("ec2") for _ in range(50)]
    assert 5 < sum(draws_a) < 45
    assert not a.should_throttle("iam")
    a.update({"throttle_rate": {"*": 1.0}})
    assert a.should_throttle("iam") and a.should_throttle("pcs")
    a.update({"throttle_rate": {"*": None, "ec2": 0.0}})
    assert not any(a.should_throttle(s) for s in ("iam", "ec2"))
    a.update({"throttle_rate": {"ec2": 0.5}, "seed": 3})  # re-seeding replays the sequence
    assert [a.should_throttle("ec2") for _ in range(50)] == draws_a


def test_call_delay_and_transition_latency():
    faults = Faults(latency={"call.ec2.RunInstances": 0.3, "call.pcs.*": 0.1, "pcs.queue": 1.5})
    assert faults.call_delay("ec2", "RunInstances") == 0.3
    assert faults.call_delay("ec2", "DescribeInstances") == 0.0
    assert faults.call_delay("pcs", "CreateCluster") == 0.1
    assert faults.transition_latency("queue") == 1.5
    assert faults.transition_latency("cluster") == 0.0


def test_update_merges_replaces_sets_and_resets():
    faults = Faults()
    faults.update({"fail_status": {"cluster:demo": "CREATE_FAILED"}, "insufficient_capacity": ["a", "b"]})
    faults.update(
        {"fail_status": {"compute_node_group:train": "UPDATE_FAILED"}, "insufficient_capacity": ["c"]}
    )
    assert faults.fail_status == {
        "cluster:demo": "CREATE_FAILED",
        "compute_node_group:train": "UPDATE_FAILED",
    }
    assert faults.insufficient_capacity == {"c"}
    assert faults.forced_status("cluster", "pcs_abc", "demo") == "CREATE_FAILED"
    assert not faults.has_capacity("c") and faults.has_capacity("a")
    faults.update({"reset": True, "latency": {"pcs.cluster": 1}})
    assert faults.fail_status == {} and faults.insufficient_capacity == set()
    assert faults.latency["pcs.cluster"] == 1.0 and faults.latency["pcs.queue"] == 0.0


@pytest.mark.parametrize(
    "changes",
    [
        {"bogus": 1},
        {"latency": {"pcs.cluster": -1}},
        {"latency": {"cluster": 1}},
        {"throttle_rate": {"ec2": 2}},
        {"fail_status": {"nodegroup:x": "CREATE_FAILED"}},
        {"fail_status": {"cluster:x": "ACTIVE"}},
        {"insufficient_capacity": "p5.48xlarge"},
        {"seed": "x"},
    ],
)
def test_bad_updates_are_refused_without_change(changes):
    faults = Faults(latency={"pcs.cluster": 3})
    before = faults.to_json()
    with pytest.raises(ValueError):
        faults.update(changes)
    assert faults.to_json() == before


def test_from_file_json_and_yaml(tmp_path):
    (tmp_path / "f.json").write_text(json.dumps({"seed": 4, "throttle_rate": {"pcs": 0.25}}))
    (tmp_path / "f.yaml").write_text(
        "latency:\n  pcs.cluster: 10\n  pcs.compute_node_group: 5\ninsufficient_capacity: [p5.48xlarge]\n"
        "fail_status:\n  compute_node_group:train: CREATE_FAILED\n"
    )
    from_json = Faults.from_file(tmp_path / "f.json")
    assert from_json.seed == 4 and from_json.throttle_rate == {"pcs": 0.25}
    from_yaml = Faults.from_file(tmp_path / "f.yaml")
    assert from_yaml.latency["pcs.cluster"] == 10.0 and from_yaml.insufficient_capacity == {"p5.48xlarge"}
    assert from_yaml.fail_status == {"compute_node_group:train": "CREATE_FAILED"}


def test_thread_safe_draws():
    faults = Faults(seed=1, throttle_rate={"*": 0.5})
    counts: list[int] = []

    def worker():
        counts.append(sum(faults.should_throttle("s3") for _ in range(2000)))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    serial = Faults(seed=1, throttle_rate={"*": 0.5})
    assert sum(counts) == sum(serial.should_throttle("s3") for _ in range(8000))


def test_a_reboot_clears_only_the_faults_set_to_last_until_one(sandbox):
    """``node_health`` ``until_reboot``: a fault a reboot fixes (what the burn-in gate tries first where replacing
    cannot get new capacity, issue 37). EC2 RebootInstances answers as moto does; only then do those faults go."""
    ec2 = sandbox.client("ec2", "us-east-1")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    first, second = (i["InstanceId"] for i in ec2.run_instances(ImageId=image, MinCount=2, MaxCount=2,
                                                                 InstanceType="c5.large")["Instances"])
    try:
        sandbox.faults({"node_health": {first: {"gpus_missing": 1, "until_reboot": True},
                                        second: {"gpus_missing": 1}}})
        ec2.reboot_instances(InstanceIds=[first, second])
        assert sandbox.control("GET", "/_fmcluster/faults")["node_health"] == {second: {"gpus_missing": 1}}
        with pytest.raises(urllib.error.HTTPError) as refused:  # a node name: EC2 reboots instances
            sandbox.faults({"node_health": {"ip-10-0-0-1.ec2.internal": {"gpus_missing": 1, "until_reboot": True}}})
        assert refused.value.code == 400
    finally:
        sandbox.faults({"node_health": {first: None, second: None}})
        ec2.terminate_instances(InstanceIds=[first, second])
