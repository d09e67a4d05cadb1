"""End-to-end: two teammates' ``create``s of one spec, started together from two state directories, make one
cluster: the loser is refused before it makes anything, naming the holder. The cluster is visible to the loser
(found by its fmcluster tags in AWS) as the winner's, with the same live status and cost fields, and the loser can
destroy it, which gives the name back."""

from __future__ import annotations

import json
import subprocess

from fixtures.lifecycle import PcsCli, _fmcluster, _ok, cli_fixture

cli = cli_fixture(PcsCli)


def _tagged_ids(cli) -> dict[str, set[str]]:
    """Per kind, the fmcluster:cluster-id values of what the sandbox holds tagged for the cluster (read with boto3)."""
    ec2 = cli.sandbox.client("ec2")
    tag = [{"Name": "tag:fmcluster:cluster", "Values": [cli.name]}]

    def ids(items: list[dict]) -> set[str]:
        return {t["Value"] for item in items for t in item.get("Tags", []) if t["Key"] == "fmcluster:cluster-id"}

    return {"vpc": ids(ec2.describe_vpcs(Filters=tag)["Vpcs"]),
            "subnet": ids(ec2.describe_subnets(Filters=tag)["Subnets"]),
            "security_group": ids(ec2.describe_security_groups(Filters=tag)["SecurityGroups"]),
            "launch_template": ids(ec2.describe_launch_templates(Filters=tag)["LaunchTemplates"])}


def test_two_creates_make_one_cluster_and_the_other_state_directory_sees_it_as_theirs(cli, tmp_path):
    teammate = {**cli.env, "FMCLUSTER_HOME": str(tmp_path / "teammate")}
    command = [*_fmcluster(), "create", str(cli.spec), "--yes"]
    racers = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               stdin=subprocess.DEVNULL) for env in (cli.env, teammate)]
    outputs = [proc.communicate(timeout=300) for proc in racers]
    ended = [(proc.returncode, out, err) for proc, (out, err) in zip(racers, outputs, strict=True)]
    assert sorted(code for code, _, _ in ended) == [0, 1], [(c, e[-2000:]) for c, _, e in ended]
    won = next(i for i, (code, _, _) in enumerate(ended) if code == 0)
    winner, loser = (cli.env, teammate) if won == 0 else (teammate, cli.env)
    refusal = " ".join(ended[1 - won][2].split())
    assert f"cluster name {cli.name} in us-east-1 is claimed by arn:aws:" in refusal, refusal
    assert f"state directory {winner['FMCLUSTER_HOME']} on host" in refusal and "Nothing was created" in refusal
    # one cluster, one VPC: everything tagged for the name carries the winner's cluster id, none the loser's
    assert len(cli.inventory()["clusters"]) == 1
    tagged = _tagged_ids(cli)
    assert len(tagged["vpc"]) == 1 and all(ids == tagged["vpc"] for ids in tagged.values()), tagged
    assert "Traceback" not in ended[1 - won][2]

    mine = json.loads(_ok(cli.run("status", cli.name, "--json", env=winner)).stdout)
    for key in ("usd_so_far", "usd_per_hour_now", "usd_per_hour_max", "cost_by_queue", "cost_basis"):
        assert key in mine, mine
    assert mine["usd_per_hour_max"] >= mine["usd_per_hour_now"] > 0, mine
    assert mine["owner"]["yours"] is True and mine["owner"]["state_dir"] == winner["FMCLUSTER_HOME"], mine["owner"]

    teammate = loser
    listed = json.loads(_ok(cli.run("status", "--json", env=teammate)).stdout)
    row = next(r for r in listed if r["name"] == cli.name)
    assert (row["backend"], row["status"], row["source"]) == ("pcs", "ACTIVE", "aws"), row
    assert row["owner"] == {**mine["owner"], "yours": False}, row  # listed as the winner's
    table = _ok(cli.run("status", env=teammate))
    assert cli.name in table.stdout and "no local record" in table.stderr

    theirs = json.loads(_ok(cli.run("status", cli.name, "--json", env=teammate)).stdout)
    assert theirs["status"] == "ACTIVE"
    # shown as the winner's, never as the loser's own
    assert theirs["owner"] == {**mine["owner"], "yours": False}, theirs["owner"]
    assert {q["name"] for q in theirs["queues"]} == {q["name"] for q in mine["queues"]}
    assert theirs["usd_per_hour_now"] == mine["usd_per_hour_now"]

    destroyed = _ok(cli.run("destroy", cli.name, "--yes", env=teammate))
    assert "not this state directory's" in " ".join(destroyed.stderr.split()), destroyed.stderr
    cli.assert_nothing_left()
    # the name is free again: the claim went with the cluster
    claims = cli.sandbox.client("s3").list_objects_v2(Bucket="fmcluster-claims-123456789012-us-east-1")
    assert f"clusters/{cli.name}.json" not in {o["Key"] for o in claims.get("Contents", [])}
