"""The commands for a running cluster — ``ssh``, ``kubeconfig``, ``smoke``, ``logs`` — registered on the main app. Thin:
parse, call :mod:`fmcluster.connect`, render."""

from __future__ import annotations

from typing import Optional

import typer

_HOST_HELP = ("Connect to HOST[:PORT] instead of looking the login node up in AWS (through a VPN or a bastion, "
              "or any Slurm login host).")


def register(app: typer.Typer, name_argument: object) -> None:
    @app.command()
    def ssh(
        name: str = name_argument,  # type: ignore[assignment]
        command: Optional[list[str]] = typer.Argument(None, metavar="-- CMD…", show_default=False,
                                                      help="Run this on the node instead of a login shell."),
        print_only: bool = typer.Option(False, "--print", help="Print the ssh command instead of running it."),
        config: bool = typer.Option(False, "--config", help="With --print: an ~/.ssh/config Host block instead."),
        host: Optional[str] = typer.Option(None, "--host", metavar="HOST[:PORT]", help=_HOST_HELP),
        user: Optional[str] = typer.Option(None, "--user", metavar="USER",
                                           help="Log in as USER (default: the image's user, e.g. ec2-user)."),
        identity: Optional[str] = typer.Option(None, "--identity", "-i", metavar="KEYFILE",
                                               help="Private key (default: ~/.ssh/<network.ssh.key_name>.pem)."),
    ) -> None:
        """Open a shell on the login node (PCS) or head node (ParallelCluster), or run a command there.

        The user comes from the image's OS, the key from network.ssh.key_name; without a public address or
        with SSH closed (no network.ssh.allowed_cidr) the connection goes through SSM Session Manager.
        The exit status is ssh's (the remote command's).

        Examples: fmcluster ssh llama-pretrain   ·   fmcluster ssh llama-pretrain -- sinfo   ·
        fmcluster ssh llama-pretrain --print --config >> ~/.ssh/config
        """
        import os

        from fmcluster import ui
        from fmcluster.connect import ssh as ssh_lines
        from fmcluster.connect.resolve import resolve
        from fmcluster.errors import UsageError

        if config and not print_only:
            raise UsageError("--config goes with --print: fmcluster ssh NAME --print --config")
        _, target = resolve(name, host, user, identity)
        for note in target.notes:
            ui.note(note)
        if print_only:
            typer.echo(ssh_lines.config_block(target) if config else ssh_lines.command_line(target, command))
            return
        argv = ssh_lines.ssh_argv(target, command)
        try:
            os.execvp(argv[0], argv)
        except FileNotFoundError:
            raise UsageError("ssh is not installed here (install the OpenSSH client)") from None

    @app.command()
    def kubeconfig(
        name: str = name_argument,  # type: ignore[assignment]
        output: Optional[str] = typer.Option(None, "--output", "-o", metavar="FILE",
                                             help="Write it to FILE (readable by you alone) instead of stdout."),
        token: bool = typer.Option(False, "--token", help="Print a fresh bearer token as kubectl's exec plugin "
                                                          "protocol asks (what the kubeconfig's user runs)."),
    ) -> None:
        """Print a kubeconfig for an EKS cluster's Kubernetes API: its endpoint, the certificate authority EKS
        issued, and a user that gets each token from `fmcluster kubeconfig NAME --token` (an EKS token, made as
        `aws eks get-token` makes it, with the credentials fmcluster uses). The cluster's creator is its admin.

        Examples: fmcluster kubeconfig llama-eks -o ~/.kube/llama-eks && KUBECONFIG=~/.kube/llama-eks kubectl get
        nodes   ·   fmcluster kubeconfig llama-eks > ~/.kube/config
        """
        import json
        import os

        import yaml

        from fmcluster.connect import kubeconfig as kube
        from fmcluster.errors import UsageError

        if token:
            if output:
                raise UsageError("--token prints the credential kubectl reads; it takes no --output")
            typer.echo(json.dumps(kube.exec_credential(name)))
            return
        text = yaml.safe_dump(kube.kubeconfig(name), sort_keys=False)
        if output is None:
            typer.echo(text, nl=False)
            return
        try:
            fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(text)
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc.strerror}") from None

    @app.command()
    def smoke(
        name: str = name_argument,  # type: ignore[assignment]
        nodes: Optional[int] = typer.Option(None, "--nodes", "-N", min=1, metavar="N",
                                            help="Nodes to test (default: every static node of the queue, or 2)."),
        queue: Optional[str] = typer.Option(None, "--queue", "-q", metavar="QUEUE",
                                            help="Queue to test (default: the first with accelerators)."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (docs/smoke-json.md)."),
        timeout: float = typer.Option(30, "--timeout", min=1, metavar="MIN",
                                      help="Give up (and cancel the job) after MIN minutes."),
        host: Optional[str] = typer.Option(None, "--host", metavar="HOST[:PORT]", help=_HOST_HELP),
        user: Optional[str] = typer.Option(None, "--user", metavar="USER", help="Log in as USER."),
        identity: Optional[str] = typer.Option(None, "--identity", "-i", metavar="KEYFILE", help="Private key."),
        nccl_tests: Optional[str] = typer.Option(None, "--nccl-tests", metavar="PATH",
                                                 help="all_reduce_perf on the nodes (default: found on PATH, in "
                                                      "/opt/nccl-tests/build or the DLAMI's CUDA dirs)."),
    ) -> None:
        """Check that the cluster works: a Slurm job, submitted over ssh, that counts each node's GPUs
        (nvidia-smi), EFA provider (fi_info -p efa) and EFA devices against the catalog, then runs nccl-tests
        all_reduce_perf across the nodes and compares its bus bandwidth with the EFA bandwidth. A tool that
        is missing on the nodes counts as "absent", a failure. Exit 1 when any check fails.

        Example: fmcluster smoke llama-pretrain --nodes 2
        """
        from fmcluster import ui
        from fmcluster.connect import smoke as smoke_test
        from fmcluster.connect.view import print_smoke

        report = smoke_test.run(name, queue, nodes, host, user, identity, timeout, nccl_tests)
        if as_json:
            ui.print_json(report)
        else:
            print_smoke(report)
        if not report["ok"]:
            raise typer.Exit(1)

    @app.command()
    def logs(
        name: str = name_argument,  # type: ignore[assignment]
        follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines until Ctrl-C."),
        lines: int = typer.Option(200, "--lines", "-n", min=1, metavar="N",
                                  help="At most N lines per source to start with."),
    ) -> None:
        """fmcluster's own event log for the cluster, then the backend's: ParallelCluster's CloudFormation
        events and CloudWatch log streams, or PCS's scheduler logs where a CloudWatch Logs delivery is set up.

        Example: fmcluster logs llama-pretrain --follow
        """
        from fmcluster import ui
        from fmcluster.connect.logs import render, stream

        try:
            stream(name, follow, lines, lambda line: print(render(line), flush=True), ui.note)
        except KeyboardInterrupt:
            return
