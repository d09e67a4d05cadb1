"""ssh command lines and ssh-config blocks for a :class:`~fmcluster.verbs.connect.login.SshTarget`."""

from __future__ import annotations

import shlex

from fmcluster.state.host_keys import known_hosts_file
from fmcluster.verbs.connect.login import SshTarget


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


def command_line(target: SshTarget, command: list[str] | None = None) -> str:
    return shlex.join(ssh_argv(target, command))


def config_block(target: SshTarget, alias: str | None = None) -> str:
    """A ``Host`` block for ~/.ssh/config: afterwards plain ``ssh <alias>`` (and scp, rsync, VS Code) work."""
    lines = [f"Host {alias or target.cluster}", f"    HostName {target.host}", f"    User {target.user}"]
    if target.port:
        lines.append(f"    Port {target.port}")
    if target.identity:
        lines.append(f"    IdentityFile {target.identity}")
    if target.proxy_command:
        lines.append(f"    ProxyCommand {target.proxy_command}")
    lines.append("    StrictHostKeyChecking accept-new")
    lines.append(f"    UserKnownHostsFile {known_hosts(target.cluster)}")
    return "\n".join(lines)

