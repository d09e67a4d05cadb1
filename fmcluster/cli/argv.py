"""Global options may come after the command too (``fmcluster status --sandbox``): one rewrite of argv
moves them in front of the command before Typer parses it, so no command repeats them."""

from __future__ import annotations

import os

from fmcluster.errors import UsageError

# Global options of the main callback: those that take a value, and flags.
VALUE_OPTIONS = ("--profile", "--region", "--endpoint-url")
FLAG_OPTIONS = ("--sandbox", "-v", "--verbose")
COMPLETION_OPTIONS = ("--show-completion", "--install-completion")
SHELLS = ("bash", "zsh", "fish")


def hoist_global_options(argv: list[str], commands: set[str]) -> list[str]:
    """``[cmd, …, --sandbox, …]`` → ``[--sandbox, cmd, …]``. Stops at ``--``: what follows belongs to a remote
    command."""
    command_at = _command_index(argv, commands)
    if command_at is None:
        return _complete_shell_option(argv, commands)
    front, rest = list(argv[:command_at]), argv[command_at:]
    kept: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            kept += rest[i:]
            break
        name = arg.split("=", 1)[0]
        if arg in FLAG_OPTIONS:
            front.append(arg)
        elif name in VALUE_OPTIONS and "=" in arg:
            front.append(arg)
        elif arg in VALUE_OPTIONS:
            if i + 1 == len(rest) or rest[i + 1].startswith("-"):
                raise UsageError(f"{arg} needs a value: {arg} {arg.removeprefix('--').upper().replace('-', '_')}")
            front += [arg, rest[i + 1]]
            i += 1
        else:
            kept.append(arg)
        i += 1
    return _complete_shell_option(front, commands) + kept


def _command_index(argv: list[str], commands: set[str]) -> int | None:
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg in VALUE_OPTIONS:
            skip = True  # its value may spell a command name (--profile plan)
        elif arg in commands:
            return i
    return None


def _complete_shell_option(argv: list[str], commands: set[str]) -> list[str]:
    """``--show-completion`` with no shell after it gets the user's shell (from ``$SHELL``), so the option
    always carries its value: ``--show-completion zsh`` prints zsh's script, never bash's."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        following = argv[i + 1] if i + 1 < len(argv) else None
        if arg in COMPLETION_OPTIONS and (following is None or following.startswith("-") or following in commands):
            out.append(detected_shell())
    return out


def detected_shell() -> str:
    shell = os.path.basename(os.environ.get("SHELL", ""))
    return shell if shell in SHELLS else "bash"


def click_exception_types() -> tuple[type[BaseException], ...]:
    """Typer ≥ 0.2x carries its own copy of click; older ones use click itself. Catch whichever is live."""
    types: list[type[BaseException]] = []
    try:
        from typer._click.exceptions import ClickException as TyperClickException

        types.append(TyperClickException)
    except ImportError:
        pass
    try:
        from click import ClickException

        types.append(ClickException)
    except ImportError:
        pass
    return tuple(types)
