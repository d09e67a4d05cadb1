"""The ``fmcluster`` command, offline (no AWS credentials, no endpoint): help, version, schema, render and
validate, and bad command lines (exit 2, one message, no traceback). The installed command runs for what is about
it (top-level help, version, bad command lines, the environment); per-command and per-example cases run the same
entry point in this process (fixtures/in_process.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures.in_process import run_in_process

from fmcluster import __version__
from fmcluster.backends.registry import render
from fmcluster.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
QUICKSTART_PCS = ROOT / "configs" / "quickstart-pcs.yaml"
COMMANDS = ["plan", "render", "validate", "preflight", "create", "scale", "status", "destroy", "ssh", "smoke",
            "burn-in", "logs", "topology", "sandbox", "schema", "capacity"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "HOME": str(tmp_path),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    })
    return env


def run(tmp_path: Path, *args: str | Path, installed: bool = True) -> subprocess.CompletedProcess[str]:
    if not installed:
        return run_in_process([str(arg) for arg in args], _env(tmp_path), cwd=tmp_path)
    return subprocess.run([FMCLUSTER, *map(str, args)], capture_output=True, text=True, env=_env(tmp_path),
                          cwd=tmp_path, timeout=180)


def _flat(text: str) -> str:
    return " ".join(text.split())


# --- help and version ---------------------------------------------------------------------------------

def test_help(tmp_path: Path) -> None:
    result = run(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    text = _flat(result.stdout)
    assert "fmcluster plan configs/quickstart-pcs.yaml" in text  # the example to start from
    for command in COMMANDS:
        assert f" {command} " in text, command
    for option in ("--profile", "--region", "--endpoint-url", "--sandbox", "--verbose", "--version"):
        assert option in text


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help(tmp_path: Path, command: str) -> None:
    result = run(tmp_path, command, "--help", installed=command == "plan")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    text = _flat(result.stdout)
    assert f"Usage: fmcluster {command}" in text
    assert "Example" in text, f"`fmcluster {command} --help` shows no example"


def test_version(tmp_path: Path) -> None:
    result = run(tmp_path, "--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"fmcluster {__version__}"


# --- schema -------------------------------------------------------------------------------------------

def test_schema_is_json_schema(tmp_path: Path) -> None:
    import jsonschema

    result = run(tmp_path, "schema")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert {"name", "queues"} <= set(schema["required"])
    assert "queues" in schema["properties"]
    assert schema["properties"]["queues"]["type"] == "array"
    assert schema["additionalProperties"] is False
    validator = jsonschema.Draft202012Validator(schema)
    for config in CONFIGS:  # every example is valid under the schema editors use
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(config.read_text()))]
        assert errors == [], config.name
    assert list(validator.iter_errors({"name": "x", "queues": [{"name": "q", "instance_type": "p5.48xlarge",
                                                                "nodes": 1, "instance_typ": "x"}]}))


# --- render -------------------------------------------------------------------------------------------

def test_render_to_directory(tmp_path: Path) -> None:
    out = tmp_path / "docs"
    result = run(tmp_path, "render", QUICKSTART_PCS, "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    expected = render(load_spec(QUICKSTART_PCS).spec, str(QUICKSTART_PCS))
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(d.filename for d in expected.documents)
    for document in expected.documents:
        assert yaml.safe_load((out / document.filename).read_text()) == document.body
        assert f"wrote {out / document.filename}" in _flat(result.stderr)
    # the note about the network fmcluster creates for a spec without a subnet
    assert "network: fmcluster creates a VPC (10.0.0.0/16)" in _flat(result.stderr)


def test_render_to_stdout(tmp_path: Path) -> None:
    result = run(tmp_path, "render", QUICKSTART_PCS)
    assert result.returncode == 0, result.stderr
    expected = render(load_spec(QUICKSTART_PCS).spec, str(QUICKSTART_PCS))
    assert [b for b in yaml.safe_load_all(result.stdout)] == [d.body for d in expected.documents]
    for document in expected.documents:
        assert f"--- # {document.filename}" in result.stdout


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_render_every_example(tmp_path: Path, config: Path) -> None:
    result = run(tmp_path, "render", config, "-o", tmp_path / "out", installed=False)  # installed: render_to_directory
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert any((tmp_path / "out").iterdir())


# --- validate -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_validate_offline(tmp_path: Path, config: Path) -> None:
    result = run(tmp_path, "validate", config, installed=config.stem == "quickstart-parallelcluster")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()

    def row(check: str) -> str:
        found = [line for line in lines if re.match(rf"^\S\s+{re.escape(check)}\s\s", line)]
        assert found, f"no '{check}' row in:\n{result.stdout}"
        return found[0]

    assert row("render").startswith("✓")
    assert row("instance types").startswith("–") and "needs an AWS endpoint" in row("instance types")
    if yaml.safe_load(config.read_text())["backend"] == "parallelcluster":
        assert row("pcluster schema").startswith("✓")
        skipped = row("pcluster validators")
        assert skipped.startswith("–") and "no AWS endpoint or credentials" in skipped
    else:
        assert row("botocore shapes").startswith("✓")
    assert "✗" not in result.stdout


# --- bad command lines: exit 2, one message, no traceback -------------------------------------------------

@pytest.mark.parametrize("args", [
    ("render", "--bogus", "x"),
    ("render",),
    ("validate", "a.yaml", "b.yaml"),
    ("no-such-command",),
    ("plan", "--json=maybe", "x.yaml"),
], ids=["bad-flag", "missing-spec", "extra-argument", "unknown-command", "bad-flag-value"])
def test_bad_command_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = run(tmp_path, *args)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip()


def test_no_arguments_prints_help(tmp_path: Path) -> None:
    result = run(tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    assert "Usage: fmcluster" in result.stdout + result.stderr


@pytest.mark.parametrize("region", ["moon-1", "us-esat-1", "US-EAST-1"])
def test_unknown_region_flag(tmp_path: Path, region: str) -> None:
    result = run(tmp_path, "--region", region, "plan", QUICKSTART_PCS)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    assert f"--region {region}: unknown region '{region}' (did you mean" in _flat(result.stderr)
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["render", "validate", "plan"])
def test_missing_spec_file(tmp_path: Path, command: str) -> None:
    result = run(tmp_path, command, "missing.yaml", installed=command == "plan")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "missing.yaml: no such file" in result.stderr
    assert result.stdout == ""


# --- AWS_CA_BUNDLE naming no file ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ("status",), ("status", "demo"), ("preflight", QUICKSTART_PCS),
    ("validate", ROOT / "configs" / "quickstart-parallelcluster.yaml"), ("create", QUICKSTART_PCS, "--yes"),
], ids=["status", "status-name", "preflight", "validate", "create"])
def test_missing_ca_bundle_is_a_usage_error(tmp_path: Path, args: tuple) -> None:
    """botocore would fail each HTTPS call with a TLS error that names neither the variable nor the file (and
    preflight would file it as a credentials row): one line before any AWS call instead."""
    bundle = tmp_path / "gone" / "ca.pem"
    env = {**_env(tmp_path), "AWS_CA_BUNDLE": str(bundle), "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing"}
    result = subprocess.run([FMCLUSTER, "--endpoint-url", "http://127.0.0.1:9", *map(str, args)],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"error: AWS_CA_BUNDLE names {bundle}, which is not a file: point it at a CA bundle, or unset it"]
    assert result.stdout == ""


def test_missing_ca_bundle_leaves_offline_commands_alone(tmp_path: Path) -> None:
    """The check sits where AWS clients are made, not at startup: render never calls AWS, so it does not refuse."""
    env = {**_env(tmp_path), "AWS_CA_BUNDLE": str(tmp_path / "gone.pem")}
    result = subprocess.run([FMCLUSTER, "render", str(QUICKSTART_PCS)], capture_output=True,
                            text=True, env=env, cwd=tmp_path, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "AWS_CA_BUNDLE" not in result.stderr
