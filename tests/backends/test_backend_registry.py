"""The backend registry is the one place that knows the backends by name: every name in it has a profile and a
lifecycle class, an unknown name is one clear error, and generic code never switches on a backend's name."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.backends import registry
from fmcluster.backends.base import Backend
from fmcluster.backends.profile import BackendProfile
from fmcluster.errors import UsageError
from fmcluster.render.documents import Document

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fmcluster"

# Everything outside the backends' own folder must ask the registry or the backend's parts instead of naming a
# backend.
GENERIC = sorted(p.name for p in PACKAGE.iterdir()
                 if p.name not in ("backends", "__pycache__") and (p.is_dir() or p.suffix == ".py"))


def _names_in(node: ast.AST) -> list[str]:
    """The registry names ``node`` spells out: a string constant, or one inside a literal tuple/list/set."""
    if isinstance(node, ast.Constant) and node.value in registry.NAMES:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in registry.NAMES]
    return []


def backend_switches(source: str, filename: str = "<source>") -> list[str]:
    """Where ``source`` decides by a backend's name: a comparison with a registry name (``== "pcs"``,
    ``in ("pcs", …)``), a loop over literal registry names, a ``case "pcs":``, or a dict keyed by two or more
    of them (a dispatch table)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        names: list[str] = []
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                names += _names_in(side)
        elif isinstance(node, (ast.For, ast.comprehension)):
            names = _names_in(node.iter)
        elif isinstance(node, ast.MatchValue):
            names = _names_in(node.value)
        elif isinstance(node, ast.Dict):
            keyed = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in registry.NAMES]
            names = keyed if len(set(keyed)) > 1 else []
        if names:
            line = (node.iter if isinstance(node, ast.comprehension) else node).lineno
            found.append((line, f"{filename}:{line}: {', '.join(names)}"))
    return [where for _, where in sorted(found)]


def scan(parts: list[str]) -> list[str]:
    """:func:`backend_switches` over every module of ``parts`` (files or folders under fmcluster/)."""
    found = []
    for part in parts:
        path = PACKAGE / part
        for module in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            found += backend_switches(module.read_text(), str(module.relative_to(ROOT)))
    return found


def test_every_name_has_a_profile_and_a_backend() -> None:
    assert registry.NAMES and len(set(registry.NAMES)) == len(registry.NAMES)
    for name in registry.NAMES:
        profile = registry.profile(name)
        assert isinstance(profile, BackendProfile) and profile.name == name
        assert profile.display and profile.login_role and profile.login_where and profile.anchor_kind
        backend = registry.backend(name)
        assert isinstance(backend, Backend) and backend.name == name
    assert [p.name for p in registry.profiles()] == list(registry.NAMES)
    # destroy falls back to exactly one backend when no anchor is found
    assert len([p for p in registry.profiles() if p.finds_everything]) == 1


@pytest.mark.parametrize("name", registry.NAMES)
def test_every_backend_has_each_part_code_below_it_reaches_by_name(name: str) -> None:
    """spec, preflight, validate and render reach these through backend_parts; a backend without one would
    fail only when a spec for it is first loaded, rendered or checked."""
    from fmcluster.backends.parts import backend_part
    from fmcluster.backends.slurm.node_software import NodeLayout
    from fmcluster.preflight.common import BackendChecks
    from fmcluster.spec.backend_rules import BackendSpecRules

    assert isinstance(backend_part(name, "spec_rules").RULES, BackendSpecRules)
    assert isinstance(backend_part(name, "preflight").CHECKS, BackendChecks)
    assert callable(backend_part(name, "validate").checks)
    render = backend_part(name, "render")
    assert callable(render.render)
    # Where nodes run fmcluster's node scripts (the Slurm backends), the render part says how they are laid out;
    # EKS nodes run none.
    layout = getattr(render, "NODE_LAYOUT", None)
    assert layout is None or (isinstance(layout, NodeLayout) and layout.backend == name)
    assert (layout is None) == (not backend_part(name, "spec_rules").RULES.runs_head_node)


def test_profiles_map_into_the_common_statuses() -> None:
    from fmcluster.backends.base import STATUSES

    for profile in registry.profiles():
        assert set(profile.status.values()) <= set(STATUSES), profile.name
        assert profile.common_status("A_STATUS_NO_BACKEND_HAS") == "UPDATING"


@pytest.mark.parametrize("call", [registry.profile, registry.backend, registry.check_name,
                                  lambda name: registry.tagged_clusters(name, "us-east-1")])
def test_an_unknown_name_is_a_usage_error_naming_the_known_ones(call) -> None:
    with pytest.raises(UsageError) as caught:
        call("slurm-on-k8s")
    message = str(caught.value)
    assert "slurm-on-k8s" in message and all(name in message for name in registry.NAMES)


def test_profiles_are_light() -> None:
    """status and connect read profiles for any backend: that loads neither boto3 nor pcluster."""
    code = ("import sys\nfrom fmcluster.backends import registry\n[registry.profile(n) for n in registry.NAMES]\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'pcluster')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_scan_finds_each_kind_of_switch() -> None:
    pcs, other = registry.NAMES[-1], registry.NAMES[0]
    source = "\n".join([
        f"if spec.backend == {pcs!r}: pass",
        f"x = 1 if {other!r} != backend else 2",
        f"ok = backend in ({pcs!r}, {other!r})",
        f"for name in ({other!r}, {pcs!r}): pass",
        f"seen = [n for n in [{pcs!r}] if n]",
        f"table = {{{pcs!r}: 1, {other!r}: 2}}",
        f"match backend:\n    case {pcs!r}:\n        pass",
    ])
    assert [line.split(":")[1] for line in backend_switches(source)] == ["1", "2", "3", "4", "5", "6", "8"]


def test_the_scan_leaves_other_uses_of_the_words_alone() -> None:
    """A boto3 service name, a spec field and a message are not switches."""
    pcs = registry.NAMES[-1]
    source = "\n".join([f"client = aws.client({pcs!r}, region)", f"data = {{{pcs!r}: {{'size': 'auto'}}}}",
                        f"raise UsageError({pcs!r} + ' is slow')", "if backend == registry.NAMES[0]: pass"])
    assert backend_switches(source) == []


def test_generic_code_never_switches_on_a_backend_name() -> None:
    assert scan(GENERIC) == []


def _document(kind: str, key: str) -> Document:
    return Document(f"{kind}-{key}.yaml", kind, key, "ec2", {"": "CreateThing"}, "", {})


def test_build_makes_each_document_by_its_kind_and_refuses_an_unknown_one() -> None:
    from fmcluster.aws.build import SHARED, build
    from fmcluster.aws.ec2 import SecurityGroup

    made = build([_document("security_group", "nodes")], SHARED, "Test")
    assert [(type(r), r.name) for r in made] == [(SecurityGroup, "security_group:nodes")]
    with pytest.raises(ValueError, match="the Test backend has no resource for widget documents"):
        build([_document("widget", "x")], SHARED, "Test")
