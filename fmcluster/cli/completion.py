"""Shell completion: cluster names from the state store, queue names of the named cluster from its recorded
spec, and the completion scripts for bash, zsh and fish. A completer never raises: a broken or missing
state store completes nothing."""

from __future__ import annotations

from typing import Any

SHELLS = ("bash", "zsh", "fish")


def cluster_names(incomplete: str) -> list[tuple[str, str]]:
    try:
        from fmcluster.state.store import StateStore

        records = StateStore().clusters()
    except Exception:  # completion must stay quiet; the command itself will explain
        return []
    seen: dict[str, str] = {}
    for record in records:
        if record.name.startswith(incomplete):
            seen.setdefault(record.name, f"{record.backend}, {record.region}, {record.status}")
    return sorted(seen.items())


def queue_counts(ctx: Any, incomplete: str) -> list[tuple[str, str]]:
    """``scale NAME <TAB>`` → ``gpu=`` ``burst=`` (the queues of NAME's recorded spec)."""
    target = (ctx.params or {}).get("target") if ctx is not None else None
    if not target:
        return []
    try:
        import yaml

        from fmcluster.state.store import StateStore

        record = StateStore().cluster(target)
        queues = (yaml.safe_load(record.spec) or {}).get("queues", []) if record else []
    except Exception:  # as above
        return []
    done = {item.partition("=")[0] for item in (ctx.params.get("counts") or [])}
    out = []
    for queue in queues:
        name = str(queue.get("name", ""))
        nodes = queue.get("nodes")
        now = f"{nodes['min']}:{nodes['max']}" if isinstance(nodes, dict) else str(nodes)
        if name and name not in done and f"{name}=".startswith(incomplete):
            out.append((f"{name}=", f"{queue.get('instance_type', '')}, now {now}"))
    return out


def for_shell(action: str, shell: str) -> str:
    """``--show-completion SHELL`` (action ``script``) or ``--install-completion SHELL`` (``install``)."""
    import typer

    if shell not in SHELLS:
        raise typer.BadParameter(f"{shell!r}: completion is for {', '.join(SHELLS)}")
    return script(shell) if action == "script" else install(shell)


def script(shell: str, prog_name: str = "fmcluster") -> str:
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=prog_name, complete_var=complete_var(prog_name), shell=shell)


def install(shell: str, prog_name: str = "fmcluster") -> str:
    from typer._completion_shared import install as typer_install

    installed_shell, path = typer_install(shell=shell, prog_name=prog_name, complete_var=complete_var(prog_name))
    return f"{installed_shell} completion installed in {path}; it takes effect in a new shell"


def complete_var(prog_name: str) -> str:
    return "_{}_COMPLETE".format(prog_name.replace("-", "_").upper())


def init() -> None:
    """Register Typer's completion classes (its scripts speak their protocol, not click's)."""
    from typer.completion import completion_init

    completion_init()
