"""ssh command lines and ssh-config blocks for a :class:`~fmcluster.aws.login.SshTarget` (its argv is
:func:`fmcluster.aws.login.ssh_argv`, which the Slurm smoke test uses too)."""

from __future__ import annotations

import shlex

from fmcluster.aws.login import SshTarget, known_hosts, ssh_argv


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

