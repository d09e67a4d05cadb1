"""The ``fmcluster`` command. Thin: parse, call the core, render. Heavy imports happen inside commands
so that ``fmcluster --help`` stays fast."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from fmcluster import __version__
from fmcluster.errors import Aborted, FmclusterError, SpecError

app = typer.Typer(
    name="fmcluster",
    help=(
        "Launch and manage foundation-model training clusters on AWS from one short YAML spec.\n\n"
        "Start offline: [bold]fmcluster plan configs/quickstart-pcs.yaml[/] shows GPUs, HBM, EFA, storage and "
        "cost; [bold]fmcluster validate SPEC[/] checks the rendered config with the backend's own rules. "
        "No AWS account? Add [bold]--sandbox[/] to any command to use a local AWS-compatible endpoint. "
        "Global options may also come after the command: [bold]fmcluster status --sandbox[/]."
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    add_completion=False,  # ours take the shell as a value: `--show-completion zsh` prints zsh's script
)


class _State:
    verbose: bool = False


state = _State()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fmcluster {__version__}")
        raise typer.Exit()


def _completion_option(action: str):
    def callback(shell: Optional[str]) -> None:
        if shell:
            from fmcluster.cli import completion

            typer.echo(completion.for_shell(action, shell))
            raise typer.Exit()

    return callback


@app.callback()
def main_options(
    profile: Optional[str] = typer.Option(None, "--profile", metavar="NAME", help="AWS profile to use.",
                                          envvar="AWS_PROFILE"),
    region: Optional[str] = typer.Option(None, "--region", metavar="REGION",
                                         help="AWS region (overrides the spec's region)."),
    endpoint_url: Optional[str] = typer.Option(
        None, "--endpoint-url", metavar="URL", help="Send every AWS call here (also AWS_ENDPOINT_URL).",
        envvar="AWS_ENDPOINT_URL"
    ),
    sandbox: bool = typer.Option(
        False, "--sandbox", help="Start (or reuse) the local sandbox and point every AWS call at it."
    ),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Also print the AWS API calls the command made."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    show_completion: Optional[str] = typer.Option(
        None, "--show-completion", metavar="SHELL", callback=_completion_option("script"), is_eager=True,
        help="Print the completion script for bash, zsh or fish (default: your $SHELL).",
    ),
    install_completion: Optional[str] = typer.Option(
        None, "--install-completion", metavar="SHELL", callback=_completion_option("install"), is_eager=True,
        help="Install completion for bash, zsh or fish (default: your $SHELL).",
    ),
) -> None:
    # Importing the registry hands each backend's spec rules to the spec layer, which sits below the backends.
    import fmcluster.backends.registry  # noqa: F401
    from fmcluster.connection import aws

    state.verbose = verbose
    info: dict = {}
    if sandbox:
        from fmcluster.cli.sandbox_link import start_or_reuse

        info = start_or_reuse()
        endpoint_url = info["endpoint_url"]
    aws.configure(profile, region, endpoint_url, sandbox=str(info["started_at"]) if sandbox else "")


def _register_commands() -> None:
    from fmcluster.cli import capacity, cluster_access, lifecycle, sandbox_link, spec_commands
    from fmcluster.cli.options import NameArgument

    # The order ``fmcluster --help`` lists the commands in.
    spec_commands.register(app)
    lifecycle.register(app)
    capacity.register(app)
    cluster_access.register(app, NameArgument)
    sandbox_link.mount(app)


_register_commands()


def _report_api_calls() -> None:
    if not state.verbose or "fmcluster.connection.aws" not in sys.modules:
        return
    from fmcluster.connection import aws
    from fmcluster.output import ui

    calls = sorted(aws.api_calls.items(), key=lambda item: (-item[1], item[0]))
    ui.note(f"{sum(aws.api_calls.values())} AWS API calls" + (": " + ", ".join(f"{op} {n}" for op, n in calls)
                                                              if calls else ""))


def main() -> None:
    """Entry point: every user-facing failure becomes one message and an exit code, never a traceback."""
    import atexit

    from fmcluster.cli import argv as argv_rules
    from fmcluster.cli import completion, helptext
    from fmcluster.output import plain_text

    plain_text.degrade_standard_streams()
    atexit.register(_report_api_calls)
    command = helptext.tidy(typer.main.get_command(app))
    if completion.complete_var("fmcluster") in os.environ:
        completion.init()
    try:
        args = argv_rules.hoist_global_options(sys.argv[1:], set(command.commands))  # type: ignore[attr-defined]
        code = command.main(args=args, prog_name="fmcluster", standalone_mode=False)
        if code == 130:  # Typer turns Ctrl-C outside the engine into exit 130 before we see it
            sys.stderr.write("interrupted; re-run the same command to continue\n")
        if isinstance(code, int) and code:
            sys.exit(code)
    except Aborted as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(Aborted.exit_code)
    except SpecError as exc:
        from fmcluster.output import ui

        ui.errors(str(problem) for problem in exc.problems)
        sys.exit(exc.exit_code)
    except FmclusterError as exc:
        from fmcluster.output import ui

        ui.error(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        sys.exit(130)
    except SystemExit:
        raise
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        sys.exit(130)
    except argv_rules.click_exception_types() as exc:  # usage errors: bad flag, missing argument, unknown command
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    except Exception as exc:  # AWS errors a command did not translate still get one clear line
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(exc, (BotoCoreError, ClientError)):
            from fmcluster.connection.aws import describe_error
            from fmcluster.output import ui

            error = describe_error("AWS", exc)
            ui.error(str(error))
            sys.exit(error.exit_code)
        raise
