"""Who and where ``fmcluster ssh`` connects, decided from the spec and the node a backend reports (no AWS
call here: the backends' look-ups run against the sandbox in test_cluster_access.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from fmcluster.aws.login import (
    NodeNotFound,
    login_user,
    parse_host,
    target_for_host,
    target_for_node,
)
from fmcluster.backends.protocol import LoginNode
from fmcluster.errors import UsageError
from fmcluster.spec.models import Spec
from fmcluster.verbs.connect.ssh import command_line, config_block


def _spec(**network) -> Spec:
    return Spec.model_validate({"name": "c1", "backend": "pcs", "os": network.pop("os", "alinux2023"),
                                "network": network,
                                "queues": [{"name": "q", "instance_type": "p5.48xlarge", "nodes": 1}]})


@pytest.fixture(autouse=True)
def _homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    return tmp_path


@pytest.mark.parametrize(("os_name", "user"), [("alinux2023", "ec2-user"), ("ubuntu2204", "ubuntu"),
                                               ("ubuntu2404", "ubuntu"), ("rhel9", "ec2-user"), ("rocky9", "rocky")])
def test_login_user_follows_the_image_os(os_name: str, user: str) -> None:
    assert login_user(_spec(os=os_name)) == user


def test_open_ssh_and_a_public_address_go_direct_with_the_key(_homes: Path) -> None:
    (_homes / ".ssh").mkdir()
    (_homes / ".ssh" / "team-key.pem").write_text("key")
    spec = _spec(ssh={"key_name": "team-key", "allowed_cidr": "203.0.113.0/24"})
    node = LoginNode("i-0abc", "login node", "running", "198.51.100.7", "10.0.0.5")
    target = target_for_node(spec, "us-east-1", node, None)
    argv = shlex.split(command_line(target))
    assert argv[-1] == "ec2-user@198.51.100.7"
    assert argv[argv.index("-i") + 1] == str(_homes / ".ssh" / "team-key.pem")
    assert not any("ProxyCommand" in a for a in argv)
    assert target.notes == ()


def test_closed_ssh_or_no_public_address_goes_through_ssm() -> None:
    node = LoginNode("i-0abc", "head node", "running", "198.51.100.7", "10.0.0.5")
    closed = target_for_node(_spec(ssh={"key_name": "k"}), "eu-west-1", node, "prod")
    assert closed.host == "i-0abc" and closed.identity is None  # no ~/.ssh/k.pem: ssh picks
    assert closed.proxy_command == ("aws ssm start-session --target %h --document-name AWS-StartSSHSession "
                                    "--parameters portNumber=%p --region eu-west-1 --profile prod")
    private = target_for_node(_spec(ssh={"key_name": "k", "allowed_cidr": "10.0.0.0/8"}), "eu-west-1",
                              LoginNode("i-0abc", "head node", "running", None, "10.0.0.5"), None)
    assert private.proxy_command and "no public address" in " ".join(private.notes)
    block = config_block(private)
    assert block.startswith("Host c1\n    HostName i-0abc\n    User ec2-user\n")
    assert "    ProxyCommand aws ssm start-session --target %h" in block


def test_a_node_that_is_not_running_is_refused() -> None:
    with pytest.raises(NodeNotFound, match="is pending"):
        target_for_node(_spec(), "us-east-1", LoginNode("i-0abc", "login node", "pending"), None)


def test_host_option_skips_the_lookup() -> None:
    target = target_for_host(_spec(os="rocky9"), "bastion.example.com:2222", None, "/keys/id")
    argv = shlex.split(command_line(target, ["sinfo"]))
    assert argv[-2:] == ["rocky@bastion.example.com", "sinfo"]
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-i") + 1] == "/keys/id"


@pytest.mark.parametrize(("value", "parsed"), [("h", ("h", None)), ("h:22", ("h", 22)), ("[::1]:2200", ("::1", 2200)),
                                               ("[fe80::1]", ("fe80::1", None))])
def test_parse_host(value: str, parsed: tuple) -> None:
    assert parse_host(value) == parsed


@pytest.mark.parametrize("value", ["h:port", ":22"])
def test_parse_host_refuses_nonsense(value: str) -> None:
    with pytest.raises(UsageError):
        parse_host(value)
