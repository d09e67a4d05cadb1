"""The one door from fmcluster to the sandbox: ``fmcluster sandbox …`` and ``--sandbox``.

The sandbox is its own distribution (``fmcluster-sandbox``, package ``fmcluster_sandbox``, brought by the
``sandbox`` extra), so ``pip install fmcluster`` carries no emulator code. This is the only module in fmcluster
that imports it (an import-linter contract in .importlinter holds that), and only once the extra is known to be there;
without it, both entry points end in one line naming the extra, exit 2.
"""

from __future__ import annotations

import os

import typer

from fmcluster import extras

_MISSING_HELP = f"Run a local AWS-compatible endpoint (needs the sandbox extra: {extras.install_hint('sandbox')})."


def mount(app: typer.Typer) -> None:
    """Add ``fmcluster sandbox``: the sandbox's own commands, or one that names the extra to install."""
    if extras.available("sandbox"):
        from fmcluster_sandbox.cli import app as sandbox_app

        app.add_typer(sandbox_app, name="sandbox")
        return

    # Takes every word after `sandbox` (--help included), so `sandbox start --port 1` and `sandbox --help`
    # get the same one line rather than a usage error about commands that are not installed.
    @app.command("sandbox", help=_MISSING_HELP, add_help_option=False,
                 context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def sandbox_missing(ctx: typer.Context) -> None:
        extras.require("sandbox", "fmcluster sandbox")


def start_or_reuse() -> dict:
    """For ``--sandbox``: the running sandbox (started if needed), with this process's AWS settings pointed at
    it; its info has ``endpoint_url`` and ``started_at``."""
    extras.require("sandbox", "--sandbox")
    from fmcluster_sandbox import manager

    info = manager.ensure_running()
    # pcluster.lib and any boto3 client read these, so the whole command talks to the sandbox.
    os.environ.update(manager.env_vars(info))
    return info
