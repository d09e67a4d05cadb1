"""The arguments and options several commands share (a spec path, a cluster name, --json, --force-unlock), with
the completions and checks that go with them."""

from __future__ import annotations

from typing import Optional

import typer

ForceUnlockOption = typer.Option(
    False, "--force-unlock", help="Take the cluster's lock from a command that still holds it (it may be hung); "
    "warns loudly, since both may then change the cluster.",
)


def completion_names(incomplete: str) -> list[tuple[str, str]]:
    from fmcluster.cli.completion import cluster_names

    return cluster_names(incomplete)


def completion_queue_counts(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    from fmcluster.cli.completion import queue_counts

    return queue_counts(ctx, incomplete)


def cluster_name_given(value: Optional[str]) -> Optional[str]:
    """An empty NAME ('' from a shell variable that was never set) is a usage error here, before any AWS call: AWS
    would answer it with a validation error, or a tag scan would match clusters it should not."""
    if value is not None and not value.strip():
        raise typer.BadParameter("a cluster name cannot be empty (see `fmcluster status` for the known ones)")
    return value


SpecArgument = typer.Argument(..., metavar="SPEC", help="Path to the cluster spec (YAML).", show_default=False)
NameArgument = typer.Argument(..., metavar="NAME", help="Cluster name (see `fmcluster status`).", show_default=False,
                              autocompletion=completion_names, callback=cluster_name_given)
JsonOption = typer.Option(False, "--json", help="Print the stable JSON object (docs/checks-json.md).")
