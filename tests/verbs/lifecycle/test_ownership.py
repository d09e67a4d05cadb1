"""End-to-end: fmcluster neither adopts nor deletes what is not its own, a kill at any IAM call leaves
nothing that `destroy` cannot remove, and `destroy` works from AWS's tags when the local state is gone.
The installed ``fmcluster`` against the sandbox; what is left is read from the sandbox directly.

Steps whose answer is what a test checks (a re-run after a kill, the destroy after a failed create, the reads
between) run through the entry point in this process (``create_here``, ``destroy_here``, ``run_in_process``;
fixtures/in_process.py); what only the installed command shows (its exit status, a signal, no traceback) stays
a subprocess.
"""

from __future__ import annotations

import json
import signal

import pytest
from fixtures.lifecycle import PcsCli, _ok, _wait_for_line, cli_fixture

REGION = "us-east-1"


class Cli(PcsCli):
    @property
    def role_name(self) -> str:
        return f"AWSPCS-{self.name}-{REGION}"

    def iam_left(self) -> dict[str, bool]:
        iam = self.sandbox.client("iam")
        roles = {r["RoleName"] for page in iam.get_paginator("list_roles").paginate() for r in page["Roles"]}
        profiles = {p["InstanceProfileName"] for page in iam.get_paginator("list_instance_profiles").paginate()
                    for p in page["InstanceProfiles"]}
        return {"role": self.role_name in roles, "instance_profile": self.role_name in profiles}

    def assert_nothing_left(self) -> None:
        super().assert_nothing_left()
        assert self.iam_left() == {"role": False, "instance_profile": False}, self.iam_left()


cli = cli_fixture(Cli)


def test_resources_with_the_names_fmcluster_uses_are_neither_adopted_nor_deleted(cli):
    ec2, iam = cli.sandbox.client("ec2"), cli.sandbox.client("iam")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    group = ec2.create_security_group(GroupName=f"{cli.name}-cluster", Description="someone else's",
                                      VpcId=vpc)["GroupId"]
    template = ec2.create_launch_template(LaunchTemplateName=f"{cli.name}-login", LaunchTemplateData={
        "InstanceType": "t3.micro", "MetadataOptions": {"HttpTokens": "optional"}})["LaunchTemplate"]
    iam.create_role(RoleName=cli.role_name, Path="/", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                "Action": "sts:AssumeRole"}]}))
    iam.put_role_policy(RoleName=cli.role_name, PolicyName="everything", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    try:
        refused = _ok(cli.create(), code=1)
        assert "is not this cluster's" in refused.stderr and "neither adopt nor delete" in refused.stderr, \
            refused.stderr
        # refused before anything was made: no cluster, nothing tagged for it
        inventory = cli.inventory()
        assert not inventory["clusters"] and not inventory["instances"], inventory
        assert [g["GroupId"] for g in inventory["security_groups"]] == [], inventory["security_groups"]

        _ok(cli.destroy_here(), code=1)  # nothing of the cluster exists; says so, deletes nothing
        assert ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"]
        assert ec2.describe_launch_templates(LaunchTemplateIds=[template["LaunchTemplateId"]])["LaunchTemplates"]
        assert iam.list_role_policies(RoleName=cli.role_name)["PolicyNames"] == ["everything"]
        assert cli.iam_left()["role"]
    finally:
        iam.delete_role_policy(RoleName=cli.role_name, PolicyName="everything")
        iam.delete_role(RoleName=cli.role_name)
        ec2.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])
        ec2.delete_security_group(GroupId=group)


CREATE_CALLS = ["CreateRole", "AttachRolePolicy", "CreateInstanceProfile", "AddRoleToInstanceProfile"]
DESTROY_CALLS = ["RemoveRoleFromInstanceProfile", "DeleteInstanceProfile", "DetachRolePolicy", "DeleteRole"]
# How long the sandbox holds the call a kill lands in: each kill waits for it to be answered afterwards, so it is
# paid eight times; 2 s is still many signal round trips (a 50 ms poll, then one SIGKILL) under CI's load.
HELD_S = 2.0


def _kill_during(cli, call: str, *args: str) -> None:
    """Run ``fmcluster ARGS`` with IAM's ``call`` held for HELD_S, and SIGKILL it once the sandbox holds that call."""
    held = f"call.iam.{call}"
    cli.sandbox.faults({"latency": {held: HELD_S}})
    proc = cli.popen(*args)
    try:
        _wait_for_line(proc, "instance_profile:nodes", timeout=300)
        cli.sandbox.wait_held(held, timeout=300)
        assert proc.poll() is None, f"{args[0]} ended before the kill: {proc.communicate()}"
        # still unanswered just before the kill, so the kill lands inside the call (HELD_S too short fails here)
        counts = cli.sandbox.held(held)
        assert counts["answered"] < counts["started"], counts
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        cli.sandbox.wait_held_answered(held)  # the held request still lands, as an in-flight one would on AWS
        cli.sandbox.faults({"reset": True})


@pytest.mark.parametrize("call", CREATE_CALLS)
def test_a_kill_at_an_iam_call_of_create_leaves_nothing_destroy_cannot_remove(cli, call):
    _kill_during(cli, call, "create", str(cli.spec), "--yes")
    _ok(cli.destroy_here())  # in this process: what the killed installed command left is what is checked
    cli.assert_nothing_left()


def test_a_kill_at_each_iam_call_of_destroy_then_destroy_removes_everything(cli):
    for call in DESTROY_CALLS:
        _ok(cli.create_here())  # in this process: the installed command killed is the destroy
        _kill_during(cli, call, "destroy", cli.name, "--yes")
    _ok(cli.destroy_here())
    cli.assert_nothing_left()


def test_destroy_after_the_state_file_is_deleted_removes_everything(cli):
    _ok(cli.create_here())  # in this process; the destroy from AWS's tags below is the installed command's
    for path in cli.home.glob("state.db*"):
        path.unlink()
    listed = json.loads(_ok(cli.run_in_process("status", "--json")).stdout)
    assert any(row["name"] == cli.name for row in listed), listed  # found by its tags in AWS
    _ok(cli.destroy())
    cli.assert_nothing_left()


def test_ssh_is_open_on_the_login_node_only(cli):
    data = cli.spec.read_text() + "network: {ssh: {allowed_cidr: 203.0.113.0/24}}\n"
    cli.spec.write_text(data)
    _ok(cli.create_here())
    ec2 = cli.sandbox.client("ec2")

    def groups_of(template: str) -> list[dict]:
        version = ec2.describe_launch_template_versions(LaunchTemplateName=f"{cli.name}-{template}",
                                                        Versions=["$Latest"])["LaunchTemplateVersions"][0]
        data = version["LaunchTemplateData"]
        ids = data.get("SecurityGroupIds") or [g for nic in data.get("NetworkInterfaces", []) for g in nic["Groups"]]
        return ec2.describe_security_groups(GroupIds=sorted(set(ids)))["SecurityGroups"]

    def ssh_sources(groups: list[dict]) -> list[str]:
        return [r["CidrIp"] for g in groups for p in g["IpPermissions"] if p.get("FromPort") == 22
                for r in p.get("IpRanges", [])]

    assert ssh_sources(groups_of("login")) == ["203.0.113.0/24"]
    assert ssh_sources(groups_of("gpu")) == [] and ssh_sources(groups_of("burst")) == []
    _ok(cli.destroy_here())
    cli.assert_nothing_left()
