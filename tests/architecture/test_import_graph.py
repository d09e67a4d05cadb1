"""fmcluster's own modules import one another without cycles, counting function-local imports.

A function-local import hides a cycle from Python (the import runs after both modules have loaded) but not
from the reader: the two modules still cannot be understood, tested or moved apart. So the graph here is built
from the source, with every ``import fmcluster.x`` / ``from fmcluster.x import y`` wherever it sits, except
under ``if TYPE_CHECKING:`` (never executed). Two granularities are checked:

- modules: no module reaches itself again (``fmcluster.engine`` -> ``fmcluster.engine.graph`` -> ``fmcluster.engine``);
- packages, the first level under ``fmcluster`` (``fmcluster.spec``, ``fmcluster.state.store``, ...): no package
  reaches itself through another one (``spec`` -> ``catalog`` -> ``spec``), even when no module cycle exists.

The sandbox is its own distribution (``sandbox/fmcluster_sandbox``), reached through one module only (a test
below holds that). ``fmcluster.cli.app`` and
``fmcluster.cli`` are the top: they import everything, and a test below proves nothing imports them.

    python tests/architecture/test_import_graph.py    # prints every cycle with the import lines that make it
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "fmcluster"
TOP = ("fmcluster.cli.app", "fmcluster.cli", "fmcluster.__main__")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # "fmcluster/x.py:12" (why the edge exists, for the message)
    local: bool  # inside a function body


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import node that can run, and whether it sits in a function body."""

    def visit(node: ast.AST, local: bool) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:  # only the else branch runs
                    yield from visit(ast.Module(body=[other], type_ignores=[]), local)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, local
            yield from visit(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                  ast.Lambda)))

    yield from visit(tree, False)


def _resolve_from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies inside."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def edges() -> list[Edge]:
    known = modules()
    every = set(known)
    found: list[Edge] = []
    for source, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, local in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve_from(source, is_package, node)
                # `from fmcluster.spec import models` imports the submodule; `from fmcluster.spec import
                # Spec` imports the package only.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in every else base
                           for alias in node.names]
            for target in targets:
                if not (target == "fmcluster" or target.startswith("fmcluster.")):
                    continue
                owner = _owner(target, known)
                if owner and owner != source:
                    where = f"{path.relative_to(ROOT.parent)}:{node.lineno}"
                    found.append(Edge(source, owner, where, local))
    return found


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components with more than one member, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _one_cycle(graph: dict[str, set[str]], members: list[str]) -> list[str]:
    """A shortest cycle through the component's first member, for the message."""
    inside = set(members)
    start = members[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & inside):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return members


def cycles(granularity: str) -> list[tuple[list[str], list[Edge]]]:
    """Each cycle as (a sample path, the import lines inside its component)."""
    name = (lambda m: m) if granularity == "module" else package_of
    graph: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], list[Edge]] = {}
    for edge in edges():
        source, target = name(edge.source), name(edge.target)
        graph.setdefault(source, set())
        graph.setdefault(target, set())
        if source != target:
            graph[source].add(target)
            lines.setdefault((source, target), []).append(edge)
    found = []
    for members in _strongly_connected(graph):
        path = _one_cycle(graph, members)
        found.append((path, [edge for step in zip(path, path[1:], strict=False) for edge in lines[step]]))
    return found


def describe(granularity: str) -> str:
    out = []
    for path, lines in cycles(granularity):
        out.append(f"{granularity} cycle: {' -> '.join(path)}")
        out.extend(f"    {e.where}: {e.source} imports {e.target}{' (function-local)' if e.local else ''}"
                   for e in lines)
    return "\n".join(out)


def test_no_module_cycles() -> None:
    assert not cycles("module"), "\n" + describe("module")


def test_no_package_cycles() -> None:
    assert not cycles("package"), "\n" + describe("package")


# (module or package, what it must never reach, even through others): the layering the cycles hid.
LAYERS = [
    ("fmcluster.state.store", "fmcluster.spec"),  # the store keeps spec text; fmcluster.spec.stored reads it
    ("fmcluster.engine", "fmcluster.render"),  # references are fmcluster.engine.references
    ("fmcluster.engine.graph", "fmcluster.render"),
    ("fmcluster.preflight", "fmcluster.validate"),  # CheckResult is fmcluster.checks
    ("fmcluster.verbs.lifecycle", "fmcluster.verbs.connect"),  # host keys are fmcluster.state.host_keys
]


def _reach(start: str) -> set[str]:
    graph: dict[str, set[str]] = {}
    for edge in edges():
        graph.setdefault(edge.source, set()).add(edge.target)
    seen: set[str] = set()
    todo = [m for m in graph if m == start or m.startswith(start + ".")]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def test_layers() -> None:
    wrong = [f"{low} reaches {high}: {sorted(m for m in _reach(low) if m == high or m.startswith(high + '.'))}"
             for low, high in LAYERS if any(m == high or m.startswith(high + ".") for m in _reach(low))]
    assert not wrong, "\n".join(wrong)


def test_nothing_imports_the_command_line() -> None:
    """cli and commandline may import everything only because they are the top: nothing imports them."""
    wrong = [e for e in edges() if any(e.target == t or e.target.startswith(t + ".") for t in TOP)
             and not any(e.source == t or e.source.startswith(t + ".") for t in TOP)]
    assert not wrong, "\n".join(f"{e.where}: {e.source} imports {e.target}" for e in wrong)


def test_only_the_sandbox_link_imports_the_sandbox() -> None:
    """``pip install fmcluster`` has no emulator: one module imports it, after checking the extra is there."""
    importers = set()
    for name, path in modules().items():
        for node, _ in _imports(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == "fmcluster_sandbox" or n.startswith("fmcluster_sandbox.") for n in names):
                importers.add(name)
    assert importers == {"fmcluster.cli.sandbox_link"}


def test_graph_sees_local_and_submodule_imports() -> None:
    """The graph is only as good as its reading: function-local imports and `from pkg import submodule`
    both make edges, and TYPE_CHECKING imports do not."""
    found = edges()
    assert any(e.local for e in found)
    assert {"fmcluster.cli.app"} <= {e.source for e in found}
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fmcluster.x\n"
                     "def f():\n    from fmcluster import y\n")
    seen = [(type(node).__name__, local) for node, local in _imports(tree)]
    assert seen == [("ImportFrom", False), ("ImportFrom", True)]


if __name__ == "__main__":
    report = "\n".join(filter(None, (describe("module"), describe("package"))))
    print(report or "no cycles", flush=True)
    local = [e for e in edges() if e.local]
    print(f"{len(local)} function-local imports of fmcluster modules ", file=sys.stderr)
    sys.exit(1 if report else 0)
