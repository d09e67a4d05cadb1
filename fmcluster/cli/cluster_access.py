"""The commands for a running cluster — ``ssh``, ``kubeconfig``, ``smoke``, ``logs``, ``topology`` — registered on
the main app. Thin: parse, call :mod:`fmcluster.verbs.connect`, render."""

from __future__ import annotations

from typing import Optional

import typer

_HOST_HELP = ("Connect to HOST[:PORT] instead of looking the login node up in AWS (through a VPN or a bastion, "
              "or any Slurm login host).")
# The ssh options of the commands that run jobs on a Slurm cluster (smoke, burn-in).
_JOB_HOST = typer.Option(None, "--host", metavar="HOST[:PORT]", help=_HOST_HELP)
_JOB_USER = typer.Option(None, "--user", metavar="USER", help="Log in as USER.")
_JOB_IDENTITY = typer.Option(None, "--identity", "-i", metavar="KEYFILE", help="Private key.")
_NCCL_TESTS_HELP = ("all_reduce_perf on the nodes (default: found on PATH, in /opt/nccl-tests/build or the DLAMI's "
                    "CUDA dirs).")


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

        from fmcluster.errors import UsageError
        from fmcluster.output import ui
        from fmcluster.verbs.connect import ssh as ssh_lines
        from fmcluster.verbs.connect.resolve import resolve

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
        output: Optional[str] = typer.Option(
            None, "--output", "-o", metavar="FILE",
            help="Merge it into the kubeconfig FILE (created if missing; other clusters and contexts kept, this one "
                 "made current, the file made readable by you alone) instead of printing it."),
        token: bool = typer.Option(False, "--token", help="Print a fresh bearer token as kubectl's exec plugin "
                                                          "protocol asks (what the kubeconfig's user runs)."),
    ) -> None:
        """Print a kubeconfig for an EKS cluster's Kubernetes API: its endpoint, the certificate authority EKS
        issued, and a user that gets each token from `fmcluster kubeconfig NAME --token` (an EKS token, made as
        `aws eks get-token` makes it, with the credentials fmcluster uses). The cluster's creator is its admin.

        The user's command is the absolute path of the fmcluster you ran (e.g. /home/me/fmcluster/.venv/bin/fmcluster),
        so kubectl finds it without that venv on PATH; write the kubeconfig again after moving fmcluster. With -o the
        file is merged into, as `aws eks update-kubeconfig` does.

        Examples: fmcluster kubeconfig llama-eks -o ~/.kube/config && kubectl get nodes   ·
        fmcluster kubeconfig llama-eks -o ~/.kube/llama-eks && KUBECONFIG=~/.kube/llama-eks kubectl get nodes
        """
        import json

        import yaml

        from fmcluster.errors import UsageError
        from fmcluster.verbs.connect import kubeconfig as kube

        if token:
            if output:
                raise UsageError("--token prints the credential kubectl reads; it takes no --output")
            typer.echo(json.dumps(kube.exec_credential(name)))
            return
        document = kube.kubeconfig(name)
        if output is None:
            typer.echo(yaml.safe_dump(document, sort_keys=False), nl=False)
            return
        kube.write(output, document)

    @app.command()
    def smoke(
        name: str = name_argument,  # type: ignore[assignment]
        nodes: Optional[int] = typer.Option(None, "--nodes", "-N", min=1, metavar="N",
                                            help="Nodes to test (default: every static node of the queue, or 2)."),
        queue: Optional[str] = typer.Option(None, "--queue", "-q", metavar="QUEUE",
                                            help="Queue to test (default: the first with accelerators; on EKS "
                                                 "the first with NVIDIA GPUs)."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (docs/smoke-json.md); on "
                                                           "EKS also when the job could not run."),
        timeout: float = typer.Option(30, "--timeout", min=0.01, metavar="MIN",
                                      help="Give up (and cancel or delete the job) after MIN minutes."),
        host: Optional[str] = _JOB_HOST,
        user: Optional[str] = _JOB_USER,
        identity: Optional[str] = _JOB_IDENTITY,
        nccl_tests: Optional[str] = typer.Option(None, "--nccl-tests", metavar="PATH", help=_NCCL_TESTS_HELP),
        image: Optional[str] = typer.Option(None, "--image", metavar="IMAGE",
                                            help="EKS: the nccl-tests image (default: AWS's public "
                                                 "public.ecr.aws/hpc-cloud/nccl-tests, pinned; docs/smoke-json.md)."),
        print_only: bool = typer.Option(False, "--print", help="EKS: print the MPIJob it would submit, and stop."),
    ) -> None:
        """Check that the cluster works: each node's GPUs (nvidia-smi), EFA provider (fi_info -p efa) and EFA
        devices against the catalog, then nccl-tests all_reduce_perf across the nodes, whose bus bandwidth is
        compared with the EFA bandwidth. A tool that is missing on the nodes counts as "absent", a failure.
        Exit 1 when any check fails.

        Slurm (ParallelCluster, PCS): a Slurm job submitted over ssh. EKS: an MPIJob (the MPI Operator's) sent to
        the queue's scheduler (Kueue, Volcano or KAI), one worker per node holding every GPU and EFA device, deleted
        when it ends, fails or times out.

        Examples: fmcluster smoke llama-pretrain --nodes 2   ·   fmcluster smoke llama-eks --print
        """
        from fmcluster.output import ui
        from fmcluster.verbs.connect import smoke_command
        from fmcluster.verbs.connect.view import print_smoke

        if print_only:
            typer.echo(smoke_command.manifest_text(name, queue, nodes, timeout, image), nl=False)
            return
        report = smoke_command.run(name, queue, nodes, host, user, identity, timeout, nccl_tests, image)
        if as_json:
            ui.print_json(report)
        elif report.get("error"):  # the job never produced a result: one line says why
            ui.error(f"smoke test of {name}: {report['error']}")
        else:
            print_smoke(report)
        if not report["ok"]:
            raise typer.Exit(1)

    @app.command("burn-in")
    def burn_in(
        name: str = name_argument,  # type: ignore[assignment]
        queue: Optional[str] = typer.Option(None, "--queue", "-q", metavar="QUEUE",
                                            help="Queue to burn in (default: the first with accelerators)."),
        level: Optional[str] = typer.Option(None, "--level", "-l", metavar="LEVEL",
                                            help="quick | standard | long (below: what each runs; default: the "
                                                 "queue's burn_in in the spec)."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (docs/burn-in-json.md)."),
        timeout: float = typer.Option(30, "--timeout", min=0.01, metavar="MIN",
                                      help="Give up on a job (and delete it) after MIN minutes."),
        image: Optional[str] = typer.Option(None, "--image", metavar="IMAGE",
                                            help="EKS: the image of the check and all-reduce jobs (default: the "
                                                 "smoke test's nccl-tests image; the checks need dcgmi in it)."),
        host: Optional[str] = _JOB_HOST,
        user: Optional[str] = _JOB_USER,
        identity: Optional[str] = _JOB_IDENTITY,
        nccl_tests: Optional[str] = typer.Option(None, "--nccl-tests", metavar="PATH",
                                                 help="Slurm: " + _NCCL_TESTS_HELP),
    ) -> None:
        """Check the idle nodes of a running cluster, as a new node is checked before it takes jobs: each node's
        GPUs (nvidia-smi -L) and EFA devices (fi_info -p efa) against the catalog and DCGM's diagnostics
        (dcgmi diag), then nccl-tests all-reduce in pairs against the catalog's 2-node floor, a slow result narrowed
        to the node or link that causes it in at most ⌈log2 N⌉ + 1 rounds. A node running a job is never touched:
        it is listed as busy. Every job it submits is deleted when it ends, fails, times out or is interrupted.

        Levels (every node's checks run at once; times from DCGM's and
        nccl-tests' documentation):

        quick: device counts, DCGM level 1 (seconds), EFA; no all-reduce.

        standard: DCGM level 2 (about 2 minutes), EFA, all-reduce of 20
        iterations (seconds per run).

        long: DCGM level 3 (about 15 minutes), EFA, all-reduce of 100
        iterations.

        Without --level, the queue's burn_in from the spec (its default:
        standard for a queue of GPUs that holds 2 nodes or more and has a
        2-node floor, quick for other accelerated queues). A type with no
        2-node all-reduce floor (the catalog's, or the spec's
        burn_in.floors) is refused at standard and long: use --level quick.
        Where the nodes carry EC2's network topology, pairs are neighbours
        first, then one per layer crossed, and the report gives the bus
        bandwidth per layer.

        Exit 0 every checked node passed; 1 a node failed (named with its
        check and figure); 2 bad input (an unknown level or queue, a cluster
        not ready, no floor). EKS: MPIJobs through the queue's scheduler.
        Slurm (ParallelCluster, PCS): over ssh to the login node, the
        queue's idle nodes held in a maintenance reservation while the jobs
        run in it; a failed node is drained with a reason naming its check
        and figure (sinfo -R), the rest go back to work.

        Example: fmcluster burn-in llama-eks --level quick

        fmcluster burn-in llama-eks --json | jq .nccl.finding
        """
        from fmcluster.backends.burn_in.report import failures
        from fmcluster.output import ui
        from fmcluster.verbs.connect import burn_in_command
        from fmcluster.verbs.connect.view import print_burn_in

        report = burn_in_command.run(name, queue, level, timeout, image, host, user, identity, nccl_tests)
        if as_json:
            ui.print_json(report)
        else:
            print_burn_in(report)
        if not report["passed"]:
            for line in failures(report):
                ui.error(line)
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
        from fmcluster.output import ui
        from fmcluster.verbs.connect.logs import render, stream

        try:
            stream(name, follow, lines, lambda line: print(render(line), flush=True), ui.note)
        except KeyboardInterrupt:
            return

    @app.command()
    def topology(
        name: str = name_argument,  # type: ignore[assignment]
        as_json: bool = typer.Option(False, "--json", help="Print the tree as JSON (the shape below)."),
    ) -> None:
        """Show where each queue's instances sit in AWS's network: the tree EC2 DescribeInstanceTopology reports
        for the running instances that `status` lists, the same on ParallelCluster, PCS and EKS. Read-only.

        The layers: AWS gives each instance its network nodes top-down, 3 for most types (p5, p4d, trn1, ...), 4 for
        some (p6-b200). Layer 1 is the spine, the top; the last is the bottom node the instance hangs off. Instances
        under the same bottom node are the closest neighbours; those under different spines are the furthest apart,
        so a job that spans two spines pays the slowest hops. Each node shows how many instances are below it.
        Instances AWS gives no topology for (an instance type it publishes none for, an instance not running)
        are listed apart, with the reason.

        --json: {"name", "backend", "region", "status", "instance_count", "queues": [{"name", "instance_count",
        "tree": [NODE...], "without_topology": [{"id", "instance_type", "state", "reason"}...]}]}, where
        NODE is {"network_node", "layer" (1 = spine), "zone", "instance_count", "children": [NODE...], "instances":
        [{"id", "instance_type", "capacity_block_id", "group_name"}...]}.

        Example: fmcluster topology llama-pretrain   ·   fmcluster topology llama-pretrain --json | jq '.queues[0].tree'

        Output (abridged): queue gpu: 4 instances, 4 placed / spine nn-… (us-east-1a, 4 instances) / layer 2 nn-…
        (4 instances) / bottom node nn-… (2 instances) / i-… (p5.48xlarge)
        """
        from fmcluster.output import ui
        from fmcluster.verbs.connect import topology as tree

        answer = tree.topology(name)
        if as_json:
            ui.print_json(answer)
            return
        typer.echo(tree.text(answer), nl=False)
