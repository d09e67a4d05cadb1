"""Help that shows placeholders the way the docs write them (SPEC, NAME, QUEUE=N), not Typer's type tags
(``<bool>``, ``<str>``, ``{spec}``). Applied once to the built click command tree."""

from __future__ import annotations

from typing import Any


def tidy(command: Any) -> Any:
    """Rewrite every parameter's help placeholders in *command* and all its subcommands (the help option
    too, which click makes afresh each time it lists the parameters)."""
    original = command.get_params

    def get_params(ctx: Any) -> list[Any]:
        params = original(ctx)
        for param in params:
            _tidy_param(param)
        return params

    command.get_params = get_params
    for sub in (getattr(command, "commands", None) or {}).values():
        tidy(sub)
    return command


def _tidy_param(param: Any) -> None:
    if getattr(param, "param_type_name", "") == "argument":
        name = param.metavar or param.name.upper()
        label = name + ("…" if param.nargs != 1 and "…" not in name else "")
        usage = label if param.required else f"[{label}]"
        # Instance attributes win over Typer's methods of the same name; unknown names are simply unused.
        param._usage_display_name = lambda: usage
        param._rich_display_name = lambda: label
        param.display_type_rich = lambda ctx=None: None
        param.make_metavar = lambda ctx=None: usage
    elif getattr(param, "is_flag", False) or getattr(param, "count", False):
        param.display_type_rich = lambda ctx=None: None
    elif param.metavar is None:
        param.metavar = param.name.upper()
