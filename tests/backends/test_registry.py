"""The backend registry is the one place that knows the backends by name: the names are written once (the spec's
``backend`` values repeat them, checked here), every registered backend satisfies the Backend protocol, an unknown
name is one clear error, generic code never switches on a backend's name, and a new backend needs its folder and
the registry (a fourth backend, registered for one test, renders and plans)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from fmcluster.backends import registry
from fmcluster.backends.lazy import LoadsLifecycle
from fmcluster.backends.profile import BackendProfile
from fmcluster.backends.protocol import Backend, Capability
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
    if isinstance(node, ast.Constant) and node.value in registry.names():
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in registry.names()]
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
            keyed = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in registry.names()]
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


def test_the_names_are_the_registry_s_and_the_spec_s() -> None:
    from fmcluster.spec.models import Backend as SpecBackend

    assert registry.names() and len(set(registry.names())) == len(registry.names())
    # The spec's `backend:` values are the one other place the names are written (the spec sits below the
    # backends), in the same order: the first is the spec's default.
    assert get_args(SpecBackend) == registry.names()


def test_every_name_has_a_profile_and_a_backend() -> None:
    for name in registry.names():
        profile = registry.profile(name)
        assert isinstance(profile, BackendProfile) and profile.name == name
        assert profile.display and profile.login_role and profile.login_where and profile.anchor_kind
        backend = registry.get(name)
        assert backend.name == name and backend.profile is profile
    assert [p.name for p in registry.profiles()] == list(registry.names())
    # destroy falls back to exactly one backend when no anchor is found
    assert len([b for b in registry.backends() if Capability.FINDS_EVERYTHING in b.capabilities]) == 1


@pytest.mark.parametrize("name", registry.names())
def test_every_backend_has_each_part_the_layers_below_it_take(name: str) -> None:
    """spec, preflight, validate and render get these handed in; a backend without one would fail only when a
    spec for it is first loaded, rendered or checked. mypy checks the types against the protocol (pyproject)."""
    from fmcluster.backends.protocol import Lifecycle
    from fmcluster.backends.slurm.node_software import NodeLayout
    from fmcluster.preflight.common import BackendChecks
    from fmcluster.spec.backend_rules import BackendSpecRules, backend_rules, runs_head_node

    backend: Backend = registry.get(name)
    assert isinstance(backend.spec_rules, BackendSpecRules) and backend_rules(name) is backend.spec_rules
    assert isinstance(backend.checks, BackendChecks)
    assert isinstance(backend.capabilities, Capability)
    for method in ("render", "validate", "tagged_clusters", *(m for m in vars(Lifecycle) if not m.startswith("_"))):
        assert callable(getattr(backend, method)), method
    # Where nodes run fmcluster's node scripts (the Slurm backends), the render part says how they are laid out;
    # EKS nodes run none. The HEAD_NODE capability says the same, once, and the spec layer is told it.
    head_node = Capability.HEAD_NODE in backend.capabilities
    assert runs_head_node(name) == head_node
    from fmcluster.backends.parallelcluster import render as parallelcluster_render
    from fmcluster.backends.pcs import render as pcs_render

    layout = {"pcs": pcs_render, "parallelcluster": parallelcluster_render}.get(name)
    layout = getattr(layout, "NODE_LAYOUT", None)
    assert layout is None or (isinstance(layout, NodeLayout) and layout.backend == name)
    assert (layout is None) == (not head_node)


def test_profiles_map_into_the_common_statuses() -> None:
    from fmcluster.backends.protocol import STATUSES

    for profile in registry.profiles():
        assert set(profile.status.values()) <= set(STATUSES), profile.name
        assert profile.common_status("A_STATUS_NO_BACKEND_HAS") == "UPDATING"


@pytest.mark.parametrize("call", [registry.profile, registry.get, registry.check_name])
def test_an_unknown_name_is_a_usage_error_naming_the_known_ones(call) -> None:
    with pytest.raises(UsageError) as caught:
        call("slurm-on-k8s")
    message = str(caught.value)
    assert "slurm-on-k8s" in message and all(name in message for name in registry.names())


def test_profiles_are_light() -> None:
    """status and connect read profiles for any backend, and spec/plan load specs through the backends' spec rules:
    building the backends loads neither boto3 nor pcluster nor a Kubernetes client."""
    code = ("import sys\nfrom fmcluster.backends import registry\n[registry.profile(n) for n in registry.names()]\n"
            "[(b.spec_rules, b.capabilities) for b in registry.backends()]\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'pcluster', 'lightkube',"
            " 'kubernetes')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_scan_finds_each_kind_of_switch() -> None:
    pcs, other = registry.names()[-1], registry.names()[0]
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
    pcs = registry.names()[-1]
    source = "\n".join([f"client = aws.client({pcs!r}, region)", f"data = {{{pcs!r}: {{'size': 'auto'}}}}",
                        f"raise UsageError({pcs!r} + ' is slow')", "if backend == registry.names()[0]: pass"])
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


# --- a fourth backend ------------------------------------------------------------------------------------------

TOY_SPEC = """name: toy-one
region: us-east-1
backend: toy
queues:
  - name: cpu
    instance_type: m7i.2xlarge
    nodes: 2
"""


@pytest.fixture
def toy_backend(monkeypatch: pytest.MonkeyPatch):
    """A minimal backend registered for one test through the registry's public ``register``, as a new backend's
    folder would be. Its name is allowed in the spec by patching only the spec's ``backend`` values (the one other
    place a backend's name is written: ``Backend`` in spec/field_types.py) and rebuilding the model."""
    from typing import Literal

    from fmcluster.render.documents import Document, RenderedDocuments
    from fmcluster.spec import models
    from fmcluster.spec.backend_rules import BackendSpecRules, TagBudget

    class ToyRules(BackendSpecRules):
        default_os = "al2023"
        stock_images = "the toy images"

        def compute_resource_name(self, queue):
            return queue.name

        def check(self, spec, error, warn) -> None:
            pass

        def tag_budget(self) -> TagBudget:
            return TagBudget(own=(), budget=40, why="a toy keeps 10 tags")

        def build_advice(self, family: str, source: str) -> str:
            return "build it on the toy"

        def nodes_without_internet(self, path, message, remedy, error, warn) -> None:
            warn(path, message)

    class ToyBackend(LoadsLifecycle):
        profile = BackendProfile(name="toy", display="Toy", login_role="head node", login_where="head node")
        spec_rules = ToyRules()
        capabilities = Capability.NONE

        @property
        def checks(self):
            from fmcluster.preflight.common import BackendChecks

            return BackendChecks(run=lambda ctx, answered: [], display="Toy")

        def render(self, spec, spec_file="spec.yaml", subnet_id=None) -> RenderedDocuments:
            body = {"name": spec.name, "queues": [q.name for q in spec.queues]}
            return RenderedDocuments("toy", [Document("toy-cluster.yaml", "cluster", spec.name, "ec2", {}, str(body),
                                                      body)])

        def validate(self, loaded, rendered, region, online, zone):
            return []

        def tagged_clusters(self, region: str):
            return []

    spec_field = models.Spec.model_fields["backend"]
    monkeypatch.setattr(spec_field, "annotation", Literal[(*registry.names(), "toy")])
    models.Spec.model_rebuild(force=True)
    registry.register(ToyBackend())
    try:
        yield
    finally:
        registry.unregister("toy")
        monkeypatch.undo()
        models.Spec.model_rebuild(force=True)


def test_a_fourth_backend_renders_and_plans(toy_backend, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fmcluster.cli.app import app

    spec = tmp_path / "toy.yaml"
    spec.write_text(TOY_SPEC)
    assert registry.names()[-1] == "toy"
    rendered = CliRunner().invoke(app, ["render", str(spec)])
    assert rendered.exit_code == 0, rendered.output
    assert "toy-one" in rendered.output and "cpu" in rendered.output
    planned = CliRunner().invoke(app, ["plan", str(spec), "--json"])
    assert planned.exit_code == 0, planned.output
    assert '"toy"' in planned.output and "m7i.2xlarge" in planned.output


def test_the_fourth_backend_is_gone_after_its_test() -> None:
    from fmcluster.errors import SpecError
    from fmcluster.spec import load_spec_data

    assert "toy" not in registry.names()
    with pytest.raises((SpecError, ValueError)):
        load_spec_data({"name": "toy-one", "backend": "toy", "queues": []}, "toy.yaml")


def test_the_connection_drops_the_clients_each_backend_s_library_keeps_when_their_patience_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry hands each backend's ``forget_default_clients`` to the connection layer (below the backends),
    which calls it whenever the clients of boto3's default session change config (ParallelCluster's AWSApi)."""
    import types

    from fmcluster.connection import aws

    assert set(aws._default_client_keepers) == set(registry.names())
    calls: list[str] = []
    monkeypatch.setitem(aws._default_client_keepers, "parallelcluster", lambda: calls.append("forgot"))
    with aws.read_only():
        assert calls == ["forgot"]
    assert calls == ["forgot", "forgot"]  # and again for the writers after it
    # ParallelCluster's own: AWSApi.reset, only when pcluster is loaded (a command on another backend never imports it)
    resets: list[bool] = []
    api = types.SimpleNamespace(AWSApi=types.SimpleNamespace(reset=lambda: resets.append(True)))
    monkeypatch.setitem(sys.modules, "pcluster.aws.aws_api", api)
    registry.get("parallelcluster").forget_default_clients()
    assert resets == [True]
    monkeypatch.delitem(sys.modules, "pcluster.aws.aws_api")
    registry.get("parallelcluster").forget_default_clients()
    assert resets == [True]
