"""No silent field: every leaf of ``fmcluster schema`` (the JSON Schema of Spec), on every backend, either changes
what fmcluster renders (the documents; for ``workload.*``, which only feeds ``plan``, the plan report) or is
refused at load time with ``file:line:col`` and a reason that names the backend.

The walk is generic: a field added to the spec is walked without touching this file. A value is made from the
schema (a flipped bool, another enum member, a number inside the bounds, a key added to a map); where the schema
cannot say what a valid value looks like (ids, paths, fields whose value other fields constrain), ``PATCHES``
gives one. A new field that fails here either needs a patch (its generic value is invalid) or needs rendering.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.edits_after_create import EDITS_HEADING, IDENTITY, SPEC_FIELDS, cell, planned, verdict

from fmcluster.backends.registry import render
from fmcluster.cost_report import plan_report
from fmcluster.errors import SpecError
from fmcluster.pricing.rates import PriceBook
from fmcluster.spec import load_spec
from fmcluster.spec.models import Spec

SETUP = "#!/bin/bash\necho setup \"$@\"\n"

# Rich bases: every optional section present, so each leaf has something to change.
BASE: dict[str, Any] = {
    "name": "walk",
    "region": "us-east-1",
    "network": {"subnet_id": "subnet-0123456789abcdef0", "head_subnet_id": "subnet-0123456789abcdef1",
                "ssh": {"key_name": "walk-key", "allowed_cidr": "203.0.113.0/24"}},
    "head_node": {"instance_type": "m7i.2xlarge", "root_volume_gib": 200},
    "queues": [{"name": "train", "instance_type": "p5.48xlarge", "nodes": {"min": 0, "max": 4}}],
    "storage": {"lustre": {"mount": "/fsx", "capacity_gib": 1200, "s3_import": "s3://walk-data/in"},
                "home": {"type": "openzfs", "mount": "/home", "capacity_gib": 256}},
    "software": {"containers": True, "monitoring": False},
    "slurm": {"scaledown_idle_minutes": 10},
    "workload": {"model_params_b": 7, "checkpoint_every_min": 30, "tokens_per_second": 1000, "sequence_length": 4096},
    "bootstrap": [{"run": "./setup.sh", "args": ["one"], "on": "compute"}],
    "tags": {"team": "walk"},
}
# EKS has no head node, Slurm, node scripts or /home (each refused with its reason): its base leaves them out, so
# setting them is the change the walk judges.
EKS_BASE: dict[str, Any] = {k: v for k, v in BASE.items() if k not in ("head_node", "slurm", "software", "bootstrap")}
EKS_BASE["network"] = {"subnet_id": "subnet-0123456789abcdef0", "ssh": {"key_name": "walk-key"}}
EKS_BASE["storage"] = {"lustre": {k: v for k, v in BASE["storage"]["lustre"].items() if k != "mount"}}
BASES = {"parallelcluster": BASE, "pcs": BASE, "eks": EKS_BASE}
# Leaf path → the change to make (paths → values), where the schema alone cannot give a valid one.
PATCHES: dict[str, dict[str, Any]] = {
    "name": {"name": "walk-two"},
    "region": {"region": "us-west-2"},
    "network.subnet_id": {"network.subnet_id": "subnet-0123456789abcdef2"},
    "network.head_subnet_id": {"network.head_subnet_id": "subnet-0123456789abcdef3"},
    "network.ssh.key_name": {"network.ssh.key_name": "other-key"},
    "network.ssh.allowed_cidr": {"network.ssh.allowed_cidr": "198.51.100.0/24"},
    "head_node.instance_type": {"head_node.instance_type": "m7i.4xlarge"},
    "kubernetes.system_instance_type": {"kubernetes.system_instance_type": "m7i.2xlarge"},
    "image.ami": {"image.ami": "ami-0123456789abcdef0"},
    "queues[].name": {"queues[0].name": "pretrain"},
    "queues[].instance_type": {"queues[0].instance_type": "p5en.48xlarge"},
    "queues[].nodes": {"queues[0].nodes": 3},
    "queues[].capacity.type": {"queues[0].capacity.type": "spot"},
    "queues[].capacity.reservation_id": {"queues[0].capacity": {"type": "reservation",
                                                                "reservation_id": "cr-0123456789abcdef0"}},
    "queues[].compute_resource": {"queues[0].compute_resource": "gpus"},
    "queues[].slurm_settings": {"queues[0].slurm_settings": {"MaxTime": "1-00:00:00"}},
    "queues[].scratch_mount": {"queues[0].scratch_mount": "/scratch"},
    "queues[].burn_in.floors": {"queues[0].burn_in": {"level": "standard", "floors": {2: 300}}},
    "storage.lustre.mount": {"storage.lustre.mount": "/data"},
    "storage.lustre.capacity_gib": {"storage.lustre.capacity_gib": 2400},
    "storage.lustre.metadata_iops": {"storage.lustre.metadata_iops": 3000},
    "storage.lustre.s3_import": {"storage.lustre.s3_import": "s3://walk-data/other"},
    "storage.lustre.s3_export": {"storage.lustre.s3_export": "s3://walk-data/out"},
    "storage.lustre.existing_id": {"storage.lustre": {"existing_id": "fs-0123456789abcdef0"}},
    "storage.home.mount": {"storage.home.mount": "/shared"},
    "storage.home.type": {"storage.home": {"type": "efs"}},
    "queues[].nodes.min": {"queues[0].nodes.min": 2},
    "storage.home.capacity_gib": {"storage.home.capacity_gib": 512},
    "storage.home.existing_id": {"storage.home": {"existing_id": "fsvol-0123456789abcdef0"}},
    "slurm.version": {"slurm.version": "25.11"},
    "slurm.custom_settings": {"slurm.custom_settings": {"PriorityWeightAge": 1000}},
    "slurm.database.uri": {"slurm.accounting": True, "slurm.database": {
        "uri": "db.example:3306", "user": "slurm",
        "password_secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdb"}},
    "tags": {"tags": {"team": "walk", "project": "x"}},
    "kubernetes.version": {"kubernetes.version": "1.35"},
    "bootstrap[].run": {"bootstrap[0].run": "s3://walk-data/setup.sh"},
    "bootstrap[].args": {"bootstrap[0].args": ["two"]},
    # A created network replaces the given subnets: these compare against a base without them.
    "network.create_vpc": {"__base__": {"network": {"ssh": {"key_name": "walk-key"}}}, "network.create_vpc": False},
    "network.vpc_cidr": {"__base__": {"network": {"ssh": {"key_name": "walk-key"}}},
                         "network.vpc_cidr": "10.8.0.0/16"},
    "network.additional_security_groups": {"network.additional_security_groups": ["sg-0123456789abcdef0"]},
    "network.security_groups": {"network.security_groups": ["sg-0123456789abcdef0"]},
    "queues[].subnet_id": {"queues[0].subnet_id": "subnet-0123456789abcdef4"},
    "iam.additional_policies": {"iam.additional_policies": ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"]},
    "queues[].iam.additional_policies": {
        "queues[0].iam": {"additional_policies": ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"]}},
    "queues[].capacity.resource_group_arn": {
        "__base__": {"queues[0].capacity": {"type": "reservation", "reservation_id": "cr-0123456789abcdef0"}},
        "queues[0].capacity": {"type": "reservation",
                               "resource_group_arn": "arn:aws:resource-groups:us-east-1:123456789012:group/walk"}},
    # UltraServers come only as Capacity Blocks of their own type, in whole UltraServers (arm64: an arm64 head).
    "queues[].capacity.ultraserver": {
        "__base__": {"head_node.instance_type": "m7g.2xlarge", "queues[0]": {
            "name": "train", "instance_type": "p6e-gb200.36xlarge", "nodes": 18, "efa": False,
            "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}}},
        "queues[0].capacity.ultraserver": "u-p6e-gb200x72"},
}
# A budget needs a limit; the guard's moment and settings show in the plan report (``budget``).
PATCHES["budget.expires"] = {"budget.expires": "72h"}
PATCHES["budget.on_limit"] = {"__base__": {"budget.max_usd": 100}, "budget.on_limit": "destroy-compute"}
PATCHES["budget.notify"] = {"__base__": {"budget.max_usd": 100}, "budget.notify": ["ops@example.com"]}
# Where EKS's base (no head node, no node scripts) needs another change to reach the field.
EKS_PATCHES: dict[str, dict[str, Any]] = {
    "queues[].capacity.ultraserver": {
        "__base__": {"queues[0]": {"name": "train", "instance_type": "p6e-gb200.36xlarge", "nodes": 18, "efa": False,
                                   "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}}},
        "queues[0].capacity.ultraserver": "u-p6e-gb200x72"},
    "bootstrap[].run": {"bootstrap": [{"run": "./setup.sh"}]},
    "bootstrap[].args": {"bootstrap": [{"run": "./setup.sh", "args": ["two"]}]},
    "bootstrap[].on": {"bootstrap": [{"run": "./setup.sh", "on": "head"}]},
}
# A patch's "__base__": other fields the change needs, set on both sides of the comparison.
BASE_KEY = "__base__"
# One change covers a section whose fields only come together.
PATCHES["slurm.database.user"] = PATCHES["slurm.database.password_secret_arn"] = PATCHES["slurm.database.uri"]
# Fields with one allowed value have nothing to change to (deployment_type: PERSISTENT_2 only).
# queues[].burn_in: the gate at create is not built yet; the level and floors feed the plan report.
PLAN_ONLY = ("workload.", "budget.", "queues[].burn_in")
# What _judge says of an edit refused at load time as the walk requires.
REFUSED = "refused at load time"


def _leaves(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    defs = schema.get("$defs", {})

    def deref(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].split("/")[-1]]
        return node

    found: list[tuple[str, dict[str, Any]]] = []

    def walk(node: dict[str, Any], path: str) -> None:
        node = deref(node)
        options = [deref(o) for o in node.get("anyOf", []) if o.get("type") != "null"] or [node]
        objects = [o for o in options if o.get("type") == "object" and "properties" in o]
        if len(objects) < len(options) or not objects:
            found.append((path, node))  # a value: a scalar, a list of scalars, a map, or a union's scalar form
        for obj in objects:
            for name, child in obj["properties"].items():
                walk(child, f"{path}.{name}" if path else name)
        for option in options:
            items = deref(option.get("items", {})) if option.get("type") == "array" else {}
            if items.get("type") == "object" and "properties" in items:
                found.remove((path, node)) if (path, node) in found else None
                for name, child in items["properties"].items():
                    walk(child, f"{path}[].{name}")

    walk(schema, "")
    return found


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    parts: list[Any] = []
    for part in path.replace("]", "").split("."):
        if "[" in part:
            name, index = part.split("[")
            parts += [name, int(index)]
        else:
            parts.append(part)
    node: Any = data
    for part in parts[:-1]:
        if isinstance(part, int):
            node = node[part]
        else:
            node = node.setdefault(part, {})
    node[parts[-1]] = value


def _get(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.replace("[]", "[0]").replace("]", "").split("."):
        name, _, index = part.partition("[")
        if not isinstance(node, dict) or name not in node:
            return None
        node = node[name]
        if index:
            node = node[int(index)]
    return node


def _generic(path: str, node: dict[str, Any], current: Any) -> list[dict[str, Any]]:
    """Candidate changes: every other enum member and both booleans (a default of None is decided from other
    fields, so either may be the one that differs), a number inside the bounds, a key added to a map."""
    options = [o for o in node.get("anyOf", []) if o.get("type") != "null"] or [node]
    where = path.replace("[]", "[0]")
    candidates: list[dict[str, Any]] = []
    for option in options:
        if "enum" in option or "const" in option:
            values = option.get("enum") or [option["const"]]
            candidates += [{where: v} for v in values if v != current]
            continue
        kind = option.get("type")
        if kind == "boolean":
            candidates += [{where: v} for v in (True, False) if v != current]
        elif kind in ("integer", "number"):
            low = option.get("minimum", option.get("exclusiveMinimum", 0))
            high = option.get("maximum", option.get("exclusiveMaximum", low + 1000))
            base = current if isinstance(current, (int, float)) else node.get("default") or low
            value = base * 2 if base and low <= base * 2 <= high else (low + high) // 2 or 1
            candidates.append({where: value})
        elif kind == "object" and "additionalProperties" in option:
            candidates.append({where: {**(current or {}), "fmcluster-walk": "1"}})
        elif kind == "array":
            candidates.append({where: [*(current or []), "walk"]})
    if not candidates:
        raise AssertionError(f"{path}: the schema does not say what a valid value looks like; add it to PATCHES "
                             f"in {Path(__file__).name}")
    return candidates


def _backends_named(message: str) -> list[str]:
    """The backends a refusal names as words, not inside a field's dotted path (``pcs.size`` names no backend)."""
    words = re.sub(r"[\w-]+(?:\.[\w\[\]-]+)+", " ", message.lower())
    return [name for name in BASES if re.search(rf"\b{name}\b", words)]


def _with(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(base)
    for where, value in changes.items():
        if where != "backend":
            _set(changed, where, value)
    return changed


def _outcome(tmp_path: Path, data: dict[str, Any], backend: str) -> tuple[str, Any]:
    """('refused', problems) or ('rendered', (documents, plan report))."""
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump({**data, "backend": backend}, sort_keys=False))
    try:
        spec = load_spec(spec_file).spec
    except SpecError as exc:
        return "refused", exc.problems
    rendered = render(spec, str(spec_file))
    documents = {d.filename: d.body for d in rendered.documents}
    return "rendered", (documents, plan_report(spec, PriceBook(spec.region)).to_json(), spec, rendered.documents)


SCHEMA_LEAVES = _leaves(Spec.model_json_schema())


def test_the_walk_sees_every_field() -> None:
    paths = {p for p, _ in SCHEMA_LEAVES}
    for expected in ("queues[].gpu_health_checks", "storage.home.existing_id", "bootstrap[].on",
                     "slurm.custom_settings", "network.ssh.allowed_cidr", "workload.model_params_b"):
        assert expected in paths, sorted(paths)


@pytest.fixture(scope="module")
def walk_base(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A backend's directory and its base spec's outcome there, made once per module: the walk's cases differ only
    in the patch (an EKS render takes most of a second). Every outcome a case compares is made in that directory,
    so the spec file's path is the same in the base's documents and the patched ones."""
    made: dict[str, tuple[Path, str, Any]] = {}

    def base(backend: str) -> tuple[Path, str, Any]:
        if backend not in made:
            directory = tmp_path_factory.mktemp(f"walk-{backend}")
            (directory / "setup.sh").write_text(SETUP)
            made[backend] = (directory, *_outcome(directory, copy.deepcopy(BASES[backend]), backend))
        return made[backend]
    yield base
    for backend, (directory, _, out) in made.items():  # no case changed the shared base: it is still a fresh one
        assert _outcome(directory, copy.deepcopy(BASES[backend]), backend)[1][:2] == out[:2], backend


@pytest.mark.parametrize("backend", list(BASES))
@pytest.mark.parametrize("path,node", SCHEMA_LEAVES, ids=[p for p, _ in SCHEMA_LEAVES])
def test_every_field_changes_the_output_or_is_refused(walk_base: Any, backend: str, path: str, node: dict) -> None:
    tmp_path, kind, base_out = walk_base(backend)
    base = copy.deepcopy(BASES[backend])
    assert kind == "rendered", f"the {backend} base spec must load: {base_out}"
    if path in IDENTITY:
        assert cell(path, backend) == "new cluster", f"{path}: an edit is another cluster ({SPEC_FIELDS.name})"
    if path == "backend":
        candidates = [{"backend": "pcs" if backend == "parallelcluster" else "parallelcluster"}]
    elif "enum" in node and len(node["enum"]) == 1 or node.get("const") is not None:
        pytest.skip(f"{path} has one allowed value ({node.get('enum') or node.get('const')}): nothing to change")
    else:
        patches = {**PATCHES, **EKS_PATCHES} if backend == "eks" else PATCHES
        candidates = [patches[path]] if path in patches else _generic(path, node, _get(base, path))
    said = cell(path, backend)
    problems = [_judge(tmp_path, base, base_out, backend, path, patch, said) for patch in candidates]
    if not any(p is None or p == REFUSED for p in problems):
        pytest.fail("\n".join(p for p in problems if p))
    if all(p == REFUSED for p in problems) and said != "refused":
        pytest.fail(f"{path} on {backend}: refused at load time, but {SPEC_FIELDS.name} says {said!r}")


def _judge(tmp_path: Path, base: dict, base_out: Any, backend: str, path: str, patch: dict,
           said: str | None = None) -> str | None:
    """None when ``patch`` changes the output or is refused as the walk requires, and (``said``: the field's cell
    of the "Edits after create" table) diff compares the edit as the table says; else why not."""
    patch = dict(patch)
    context = patch.pop(BASE_KEY, None)
    if context is not None:  # the field needs other fields set: compare against a base with those set too
        base = copy.deepcopy(base)
        for where, value in context.items():
            _set(base, where, value)
        kind, base_out = _outcome(tmp_path, base, backend)
        assert kind == "rendered", f"{path}: the base of its patch must load on {backend}: {base_out}"
    changed = copy.deepcopy(base)
    for where, value in patch.items():
        _set(changed, where, value)
    kind, out = _outcome(tmp_path, changed, patch.get("backend", backend))
    if kind == "refused":
        located = [p for p in out if p.line is not None]
        if not located:
            return f"{path} on {backend}: {patch} refused without a position: {out}"
        judged = patch.get("backend", backend)
        named = _backends_named(" ".join(p.message for p in located))
        if not named:
            return (f"{path} on {judged}: {patch} refused, but the reason does not say which backend cannot do it: "
                    + "; ".join(str(p) for p in located))
        if judged in named:
            return REFUSED
        # The reason points at other backends ("X is for the pcs backend"): one of them must then accept the
        # field, or it is refused everywhere with each refusal naming another backend.
        others = {name: _with(BASES[name], {**(context or {}), **patch}) for name in named}
        if any(_outcome(tmp_path, data, name)[0] == "rendered" for name, data in others.items()):
            return REFUSED
        return (f"{path} on {judged}: {patch} refused as a field of {', '.join(named)}, but "
                f"{' and '.join(named)} refuse it too: " + "; ".join(str(p) for p in located))
    documents, report = out[:2]
    base_documents, base_report = base_out[:2]
    if path.startswith(PLAN_ONLY):
        return None if report != base_report else f"{path} on {backend}: changes neither documents nor the plan"
    if documents == base_documents:
        return (f"{path} on {backend}: {patch} loads, but every rendered document is the same: the field is silently "
                "dropped. Render it, or refuse it at load time with the reason")
    if path in IDENTITY or said is None:
        return None
    found = verdict(planned(base_out[2], base_out[3]), planned(out[2], out[3]))
    if found == "not compared":
        return (f"{path} on {backend}: {patch} changes what create sends, but no resource compares it: diff would "
                "never see the edit. Compare it (the resource's desired) or refuse it")
    if found == said or (said == "compared" and found in ("update", "replace")):
        return None
    return f"{path} on {backend}: diff finds {found!r}, {SPEC_FIELDS.name} '{EDITS_HEADING}' says {said!r}"


def test_every_field_has_a_description() -> None:
    """``fmcluster schema`` is what editors show: every property says what it does."""
    schema = Spec.model_json_schema()
    missing = []

    def walk(node: dict[str, Any], path: str) -> None:
        for name, child in node.get("properties", {}).items():
            if not child.get("description"):
                missing.append(f"{path}{name}")
    for name, definition in schema.get("$defs", {}).items():
        walk(definition, f"{name}.")
    walk(schema, "Spec.")
    assert missing == [], f"fields without a description: {', '.join(missing)}"
