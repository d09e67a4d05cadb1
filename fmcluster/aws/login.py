"""Who and where to ssh to: the login node a backend reports, the user its image's OS logs in as, the key
from the spec, and the route (its public address, or SSM Session Manager when SSH is closed); and the ssh command
line for it. Below the backends, so that the Slurm smoke test (:mod:`fmcluster.backends.slurm.smoke`) and the
``ssh`` command reach a login node the same way."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fmcluster.errors import FmclusterError, UsageError
from fmcluster.spec.decisions import operating_system
from fmcluster.spec.models import Spec
from fmcluster.state.host_keys import known_hosts_file

if TYPE_CHECKING:
    from fmcluster.backends.protocol import LoginNode

# The default login user of the OS images fmcluster launches (PCS sample AMIs, ParallelCluster AMIs, and
# the vendors' own images for RHEL and Rocky).
LOGIN_USERS = {"alinux2023": "ec2-user", "ubuntu2204": "ubuntu", "ubuntu2404": "ubuntu", "rhel9": "ec2-user",
               "rocky9": "rocky"}


class NodeNotFound(FmclusterError):
    exit_code = 1


@dataclass(frozen=True)
class SshTarget:
    cluster: str
    host: str  # an address, or the instance id when SSM carries the connection
    user: str
    port: int | None = None
    identity: str | None = None
    proxy_command: str | None = None
    via: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)


def login_user(spec: Spec) -> str:
    return LOGIN_USERS[operating_system(spec)]


def key_file(spec: Spec) -> str | None:
    """``~/.ssh/<key_name>.pem`` when it exists; otherwise ssh picks from its agent and defaults."""
    name = spec.network.ssh.key_name
    if not name:
        return None
    path = Path(os.path.expanduser("~/.ssh")) / f"{name}.pem"
    return str(path) if path.is_file() else None


def parse_host(value: str) -> tuple[str, int | None]:
    """``HOST``, ``HOST:PORT`` or ``[IPV6]:PORT``."""
    host, port = value, None
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest.removeprefix(":") or None
    elif value.count(":") == 1:
        host, port = value.split(":")
    if not host:
        raise UsageError(f"--host {value!r}: write HOST or HOST:PORT")
    try:
        return host, int(port) if port else None
    except ValueError:
        raise UsageError(f"--host {value!r}: the port must be a number") from None


def ssm_proxy_command(region: str, profile: str | None) -> str:
    command = ("aws ssm start-session --target %h --document-name AWS-StartSSHSession "
               f"--parameters portNumber=%p --region {region}")
    return command + (f" --profile {profile}" if profile else "")


def target_for_node(spec: Spec, region: str, node: LoginNode, profile: str | None,
                    user: str | None = None, identity: str | None = None) -> SshTarget:
    """Direct to the public address when the spec opens SSH to a network and the node has one; else SSM."""
    if node.state not in (None, "running"):
        raise NodeNotFound(f"the {node.role} of {spec.name} ({node.instance_id}) is {node.state}; "
                           "try again once it is running")
    user = user or login_user(spec)
    identity = identity or key_file(spec)
    notes = []
    if not spec.network.ssh.key_name and identity is None:
        notes.append(f"the spec names no key pair (network.ssh.key_name), so ssh needs a key installed some other "
                     f"way; `aws ssm start-session --target {node.instance_id} --region {region}` opens a shell "
                     "without one")
    if spec.network.ssh.allowed_cidr and node.public_ip:
        return SshTarget(spec.name, node.public_ip, user, None, identity, None,
                         f"{node.role} {node.instance_id}, public address", tuple(notes))
    reason = "SSH is closed to outside networks (no network.ssh.allowed_cidr)" if not spec.network.ssh.allowed_cidr \
        else "the node has no public address"
    notes.append(f"through SSM Session Manager because {reason}: needs the AWS CLI and its session-manager-plugin")
    return SshTarget(spec.name, node.instance_id, user, None, identity, ssm_proxy_command(region, profile),
                     f"{node.role} {node.instance_id}, SSM", tuple(notes))


def target_for_host(spec: Spec, host: str, user: str | None, identity: str | None) -> SshTarget:
    address, port = parse_host(host)
    return SshTarget(spec.name, address, user or login_user(spec), port, identity or key_file(spec), None,
                     f"--host {host}")


def known_hosts(cluster: str) -> str:
    """The cluster's own known_hosts file (:mod:`fmcluster.state.host_keys`), its directory made."""
    path = known_hosts_file(cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path)


def ssh_options(target: SshTarget, batch: bool = False) -> list[str]:
    # A fresh cluster's host key is new by definition: accept it once, refuse a changed one.
    options = ["-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={known_hosts(target.cluster)}"]
    if target.identity:
        options += ["-i", target.identity]
    if target.port:
        options += ["-p", str(target.port)]
    if target.proxy_command:
        options += ["-o", f"ProxyCommand={target.proxy_command}"]
    if batch:  # never stop at a password or passphrase prompt nobody will answer
        options += ["-o", "BatchMode=yes", "-o", "ConnectTimeout=20"]
    return options


def ssh_argv(target: SshTarget, command: list[str] | None = None, batch: bool = False) -> list[str]:
    return ["ssh", *ssh_options(target, batch), f"{target.user}@{target.host}", *(command or [])]
