"""Slurm's network tree on ParallelCluster (issue 39). Every head node carries the topology step
(slurm_topology.py: an empty topology.conf OnNodeStart, the timer and first pass OnNodeConfigured, from the
cluster's bucket), because ParallelCluster cannot add it to a running cluster's head node; what turns the tree on
is ``TopologyPlugin=topology/tree`` in the cluster's CustomSlurmSettings and the head-node policy that allows
ec2:DescribeInstanceTopology, both changed in place, rendered when a queue's type is one EC2 gives a topology, not
over a TopologyPlugin of the user's own nor over ParallelCluster's own GB200 blocks. ParallelCluster's validators
judge the rendered config in tests/validate/test_validate_examples.py (configs/p5-odcr-parallelcluster.yaml is a
topology cluster)."""

from __future__ import annotations

from pathlib import Path

import yaml
from fixtures.lifecycle import PclusterCli, _ok, cli_fixture

from fmcluster.backends.registry import render
from fmcluster.backends.slurm.node_software import shipped
from fmcluster.spec import load_spec

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
SCRIPT = "s3://${bucket.scripts.name}/fmcluster/scripts/slurm_topology.py"
# AWS's managed read-only EC2 policy (IAM, "AWS managed policies for Amazon EC2": ec2:Describe*).
EC2_READ_ONLY = "arn:aws:iam::aws:policy/AmazonEC2ReadOnlyAccess"


def _config(path: Path) -> tuple[dict, dict]:
    rendered = render(load_spec(path).spec, str(path))
    return rendered.one("pcluster_cluster").body, rendered.one("bucket", "scripts").body


def _copy(tmp_path: Path, example: str, **changes) -> Path:
    data = yaml.safe_load((CONFIGS / example).read_text())
    data.update(changes)
    path = tmp_path / example
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_p5_queue_gets_topology_tree_and_the_head_node_step():
    config, bucket = _config(CONFIGS / "p5-odcr-parallelcluster.yaml")  # p5.48xlarge: "Returns 3 network nodes"
    assert config["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"] == [{"TopologyPlugin": "topology/tree"}]
    head = config["HeadNode"]
    assert head["CustomActions"]["OnNodeStart"] == {"Sequence": [{"Script": SCRIPT, "Args": ["placeholder"]}]}
    assert head["CustomActions"]["OnNodeConfigured"]["Sequence"][-1] == {
        "Script": SCRIPT, "Args": ["install", "llama-pretrain", "us-east-1"]}
    assert {"Policy": EC2_READ_ONLY} in head["Iam"]["AdditionalIamPolicies"]
    assert "fmcluster/scripts/slurm_topology.py" in {o["Key"] for o in bucket["objects"]}
    # the compute nodes run nothing of it: the head node's slurmctld is the one reader of topology.conf
    for queue in config["Scheduling"]["SlurmQueues"]:
        scripts = [s["Script"] for e in (queue.get("CustomActions") or {}).values() for s in e["Sequence"]]
        assert SCRIPT not in scripts
        assert EC2_READ_ONLY not in [p["Policy"] for p in (queue.get("Iam") or {}).get("AdditionalIamPolicies", [])]


def test_a_type_without_a_topology_turns_nothing_on():
    config, bucket = _config(CONFIGS / "quickstart-parallelcluster.yaml")  # p5.4xlarge: not on EC2's list
    assert "CustomSlurmSettings" not in config["Scheduling"]["SlurmSettings"]
    assert EC2_READ_ONLY not in yaml.safe_dump(config)
    # the step is there all the same (idle while Slurm runs no topology/tree), so a topology queue added later
    # changes the cluster in place
    assert config["HeadNode"]["CustomActions"]["OnNodeStart"] == {"Sequence": [{"Script": SCRIPT,
                                                                                  "Args": ["placeholder"]}]}
    assert "fmcluster/scripts/slurm_topology.py" in {o["Key"] for o in bucket["objects"]}


def test_the_users_own_topology_plugin_wins(tmp_path):
    spec = _copy(tmp_path, "p5-odcr-parallelcluster.yaml",
                 slurm={"scaledown_idle_minutes": 10, "custom_settings": {"topologyplugin": "topology/flat"}})
    config, _ = _config(spec)
    assert config["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"] == [{"topologyplugin": "topology/flat"}]
    assert EC2_READ_ONLY not in yaml.safe_dump(config)


def test_one_topology_queue_among_others_turns_it_on(tmp_path):
    data = yaml.safe_load((CONFIGS / "quickstart-parallelcluster.yaml").read_text())
    queue = dict(data["queues"][0], name="big", instance_type="trn1.32xlarge")  # trn1.32xlarge: 3 network nodes
    spec = _copy(tmp_path, "quickstart-parallelcluster.yaml", queues=[*data["queues"], queue])
    config, _ = _config(spec)
    assert {"TopologyPlugin": "topology/tree"} in config["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"]


def test_gb200_ultraservers_keep_parallelclusters_own_blocks(tmp_path):
    # ParallelCluster 3.14+ makes each p6e-gb200 UltraServer a Slurm block itself (topology/block); one cluster has
    # one TopologyPlugin, so fmcluster adds no tree over it.
    queue = {"name": "train", "instance_type": "p6e-gb200.36xlarge", "nodes": 36,
             "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0",
                          "ultraserver": "u-p6e-gb200x72"}}
    spec = _copy(tmp_path, "p5-odcr-parallelcluster.yaml", queues=[queue], os="alinux2023",
                 head_node={"instance_type": "m7g.8xlarge"})  # ParallelCluster: one architecture on every node
    config, _ = _config(spec)
    assert "CustomSlurmSettings" not in config["Scheduling"]["SlurmSettings"]
    assert EC2_READ_ONLY not in yaml.safe_dump(config)


def _tags(s3, bucket: str) -> list[dict]:
    try:
        return s3.get_bucket_tagging(Bucket=bucket)["TagSet"]
    except s3.exceptions.ClientError:  # NoSuchTagSet: another test's bucket
        return []


class TopologyCli(PclusterCli):
    """The quickstart with a queue of a type EC2 gives a topology."""

    name_prefix = "e2e-topo"

    def __init__(self, sandbox, tmp_path):
        super().__init__(sandbox, tmp_path)
        data = yaml.safe_load(self.spec.read_text())
        data["queues"][0]["instance_type"] = "p5.48xlarge"
        self.spec.write_text(yaml.safe_dump(data, sort_keys=False))


topology_cli = cli_fixture(TopologyCli)


def test_create_ships_the_step_parallelcluster_runs_from_the_bucket(topology_cli):
    """ParallelCluster's create (in the sandbox) takes the config with the head node's OnNodeStart and
    OnNodeConfigured steps, and the cluster's bucket holds the script they name, byte for byte."""
    _ok(topology_cli.create())
    [stack] = topology_cli.stacks()
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack
    s3 = topology_cli.sandbox.client("s3")
    [bucket] = [b for b in (b["Name"] for b in s3.list_buckets()["Buckets"])
                if {"Key": "fmcluster:cluster", "Value": topology_cli.name} in _tags(s3, b)]
    body = s3.get_object(Bucket=bucket, Key="fmcluster/scripts/slurm_topology.py")["Body"].read()
    assert body == shipped("slurm_topology.py").read_bytes()
    _ok(topology_cli.destroy())


plain_cli = cli_fixture(PclusterCli)


def test_a_topology_queue_added_later_changes_the_cluster_in_place(plain_cli):
    """The head node's step is there from the start, so the first queue of a type with a topology changes only
    what ParallelCluster updates in place (CustomSlurmSettings, the head node's policies): an update, not the new
    cluster a head-node CustomActions change would take (update policy UNSUPPORTED in ParallelCluster's schema)."""
    import json

    _ok(plain_cli.create())
    data = yaml.safe_load(plain_cli.spec.read_text())
    data["queues"].append(dict(data["queues"][0], name="big", instance_type="p5.48xlarge"))
    plain_cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    diff = json.loads(_ok(plain_cli.run("diff", str(plain_cli.spec), "--json")).stdout)
    [change] = [c for c in diff["changes"] if c["resource"].startswith("pcluster_cluster:")]
    assert change["action"] == "update", change
    # ParallelCluster's change set gives values as text
    assert "'TopologyPlugin': 'topology/tree'" in str(
        change["attributes"]["Scheduling.SlurmSettings.CustomSlurmSettings"]["new"])
    assert EC2_READ_ONLY in str(change["attributes"]["HeadNode.Iam.AdditionalIamPolicies"]["new"])
    assert not any(path.startswith("HeadNode.CustomActions") for path in change["attributes"])
    _ok(plain_cli.destroy())
