"""Hostile or broken files given as a spec or as an output path: each is refused through the CLI with one message
naming the file (and its position where it has one), exit 2, no traceback, and no hang.

The files that used to hang or could crash the interpreter (a FIFO, /dev/zero, an alias bomb, deep nesting) go
through the installed command, whose timeout is only a hang guard (speed is measured in bench/, not here); the rest
run the same entry point in this process (fixtures/in_process.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.in_process import run_in_process
from fixtures.lifecycle import PcsCli, cli_fixture
from fixtures.unprivileged import demote

from fmcluster.errors import SpecError
from fmcluster.spec import load_spec
from fmcluster.spec.reading import MAX_DEPTH, MAX_VALUES

FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")
QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart-pcs.yaml"
HANG_GUARD = 60  # seconds: far above the few hundred ms these take, far below "hangs"

QUEUE = "queues:\n  - {name: train, instance_type: p5.48xlarge, nodes: 2}\n"


def alias_bomb(levels: int = 9) -> str:
    """A "billion laughs": each level lists the previous one nine times (9**levels values, a few hundred bytes)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\nname: demo\n"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true", "NO_COLOR": "1", "COLUMNS": "250",
                "FMCLUSTER_HOME": str(tmp_path / "state")})
    return env


def run_cli(tmp_path: Path, *args: str, installed: bool = True, **kwargs) -> subprocess.CompletedProcess[str]:
    if not installed:
        return run_in_process(args, _env(tmp_path), cwd=tmp_path)
    return subprocess.run([FMCLUSTER, *args], capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path,
                          timeout=HANG_GUARD, stdin=subprocess.DEVNULL, **kwargs)


def _flat(text: str) -> str:
    return " ".join(text.split())


def assert_refused(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    for fragment in fragments:
        assert fragment in _flat(result.stderr), result.stderr


# --- YAML that is well formed but unbounded ----------------------------------------------------------------

def test_alias_bomb_is_refused_at_its_position(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    spec.write_text(alias_bomb())
    assert len(spec.read_bytes()) < 900
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    problem = caught.value.problems[0]
    assert "alias bomb" in problem.message and f"{MAX_VALUES:,}" in problem.message
    # l4 is the first level past the limit: it stands for 66,430 values (l0 10, l1 91, l2 820, l3 7,381)
    assert (problem.line, problem.column) == (5, 5), str(problem)


def test_recursive_alias_is_refused_at_the_alias(tmp_path: Path) -> None:
    spec = tmp_path / "loop.yaml"
    spec.write_text("name: demo\nnetwork: &net\n  ssh: {key_name: *net}\n" + QUEUE)
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    problem = caught.value.problems[0]
    assert (problem.line, problem.column) == (3, 19), str(problem)
    assert "alias *net refers to a value that contains it" in problem.message


@pytest.mark.parametrize("kind", ["flow", "block"])
def test_deep_nesting_is_refused(tmp_path: Path, kind: str) -> None:
    depth = 5000 if kind == "flow" else MAX_DEPTH + 5
    if kind == "flow":
        text = "name: " + "[" * depth + "]" * depth + "\n"
    else:
        text = "name:\n" + "".join("  " * level + f"k{level}:\n" for level in range(1, depth)) + "  " * depth + "x\n"
    spec = tmp_path / "deep.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    problem = caught.value.problems[0]
    assert f"nested more than {MAX_DEPTH} levels deep" in problem.message
    assert problem.line is not None and problem.column is not None


def test_ordinary_aliases_still_work(tmp_path: Path) -> None:
    """The bounds leave room for what a spec does with aliases: share a value between queues."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: demo\nbackend: pcs\nqueues:\n"
                    "  - {name: train, instance_type: &type p5.48xlarge, nodes: &n 2, capacity: &cap {type: spot}}\n"
                    "  - {name: eval, instance_type: *type, nodes: *n, capacity: *cap}\n")
    loaded = load_spec(spec)
    assert [(q.instance_type, q.nodes, q.capacity.type) for q in loaded.spec.queues] == [
        ("p5.48xlarge", 2, "spot"), ("p5.48xlarge", 2, "spot")]


# --- through the installed command: the five cases of issue 16, and more ---------------------------------------

def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


HOSTILE = {
    "alias-bomb": (lambda tmp: _write(tmp, "bomb.yaml", alias_bomb()), ":5:5:", "alias bomb"),
    "recursive-alias": (lambda tmp: _write(tmp, "loop.yaml", "name: &a [*a]\n"), ":1:11:",
                        "recursive alias"),
    "deep-nesting": (lambda tmp: _write(tmp, "deep.yaml", "name: " + "[" * 100_000 + "]" * 100_000 + "\n"),
                     ":1:", "levels deep"),
    "fifo": (_fifo, ": is a named pipe (FIFO), not a spec file", ""),
    "dev-zero": (lambda tmp: Path("/dev/zero"), "/dev/zero: is a character device, not a spec file", ""),
    "dev-null": (lambda tmp: Path("/dev/null"), "/dev/null: is a character device", ""),
    "directory": (lambda tmp: tmp, ": is a directory, not a spec file", ""),
    "dangling-symlink": (lambda tmp: _symlink(tmp, "gone.yaml", tmp / "nowhere.yaml"), ": no such file", ""),
    "symlink-to-dev-zero": (lambda tmp: _symlink(tmp, "zero.yaml", Path("/dev/zero")), ": is a character device",
                            ""),
    "too-big": (lambda tmp: _write(tmp, "big.yaml", "# " + "x" * 2_000_000 + "\n"), "a spec is a short YAML file",
                ""),
    "undecodable": (lambda tmp: _write_bytes(tmp, "bad.yaml", b"name: caf\xe9\n"), ":1:10: is not UTF-8 text", ""),
}
# A regression in these would hang or crash the process that reads them: a child, behind the hang guard.
MAY_HANG_OR_CRASH = {"alias-bomb", "deep-nesting", "fifo", "dev-zero", "symlink-to-dev-zero"}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _write_bytes(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _symlink(tmp_path: Path, name: str, target: Path) -> Path:
    path = tmp_path / name
    path.symlink_to(target)
    return path


@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.parametrize("command", ["render", "plan", "validate", "create"])
def test_hostile_spec_through_cli(tmp_path: Path, case: str, command: str) -> None:
    make, where, fragment = HOSTILE[case]
    spec = make(tmp_path)
    args = [command, str(spec)] + (["--yes"] if command == "create" else [])
    result = run_cli(tmp_path, *args, installed=case in MAY_HANG_OR_CRASH)
    assert_refused(result, f"{spec}{where}" if where.startswith(":") else where, fragment)
    assert not (tmp_path / "state" / "state.db").exists(), "a refused spec must leave no state behind"


# --- output paths --------------------------------------------------------------------------------------------

def test_render_onto_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "rendered"
    target.write_text("keep me\n")
    result = run_cli(tmp_path, "render", str(QUICKSTART), "-o", str(target), installed=False)
    assert_refused(result, f"-o {target}: exists and is not a directory")
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("case", ["under-a-file", "onto-a-device", "document-name-is-a-directory"])
def test_render_to_an_impossible_path(tmp_path: Path, case: str) -> None:
    if case == "under-a-file":
        (tmp_path / "file").write_text("x")
        target, fragment = tmp_path / "file" / "out", "Not a directory"
    elif case == "onto-a-device":
        target, fragment = Path("/dev/null"), "exists and is not a directory"
    else:
        target = tmp_path / "out"
        (target / "security-group.yaml").mkdir(parents=True)
        fragment = "Is a directory"
    result = run_cli(tmp_path, "render", str(QUICKSTART), "-o", str(target), installed=False)
    assert_refused(result, f"-o {target}", fragment)


def test_render_into_an_unwritable_directory(tmp_path: Path) -> None:
    target = tmp_path / "locked"
    target.mkdir(mode=0o500)
    result = subprocess.run([FMCLUSTER, "render", str(QUICKSTART), "-o", str(target)], capture_output=True,
                            text=True, env=_env(tmp_path), cwd=tmp_path, timeout=HANG_GUARD,
                            stdin=subprocess.DEVNULL, preexec_fn=demote())
    assert_refused(result, f"-o {target}: cannot write", "Permission denied")


# --- an ASCII locale -----------------------------------------------------------------------------------------

def ascii_locale_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` in the C locale with Python's UTF-8 fallbacks off (PEP 538 coercion and PEP 540 UTF-8 mode would
    otherwise pick UTF-8 for a C locale), so stdout and stderr really are ASCII."""
    env = {k: v for k, v in env.items() if k not in ("PYTHONIOENCODING", "LANGUAGE") and not k.startswith("LC_")}
    env.update({"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"})
    return env


def run_ascii(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([FMCLUSTER, *args], capture_output=True, env=ascii_locale_env(_env(tmp_path)),
                          cwd=tmp_path, timeout=HANG_GUARD, stdin=subprocess.DEVNULL)


def test_plan_in_an_ascii_locale(tmp_path: Path) -> None:
    """plan's tables and marks (box lines, ≥, ×, …) come out as plain ASCII instead of a UnicodeEncodeError."""
    result = run_ascii(tmp_path, "plan", str(QUICKSTART))
    assert b"Traceback" not in result.stderr and b"UnicodeEncodeError" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode("ascii")  # raises if anything but ASCII was written
    assert out.startswith("Plan for quickstart-pcs")
    assert "+----" in out and "|queue" in out  # rich's box, drawn with ASCII
    assert ">= 1 node(s)" in out and "x 2 GB bf16 gradients" in out  # ≥ and × stand-ins


def test_spec_error_in_an_ascii_locale(tmp_path: Path) -> None:
    """An error message with a non-ASCII mark (…) is still the one message, exit 2."""
    spec = _write(tmp_path, "scalar.yaml", "just some words\n")
    result = run_ascii(tmp_path, "plan", str(spec))
    assert result.returncode == 2, result.stderr
    err = result.stderr.decode("ascii")
    assert "Traceback" not in err
    assert f"{spec}:1:1: the top level must be a mapping of keys (name:, region:, ...), not a single value" in err


cli = cli_fixture(PcsCli)


def test_create_and_destroy_in_an_ascii_locale(cli: PcsCli) -> None:
    """create's progress (✓ marks, spinners, …) and destroy against the sandbox, with ASCII-only streams."""
    env = ascii_locale_env(cli.env)
    for args in (("create", str(cli.spec), "--yes"), ("destroy", cli.name, "--yes")):
        result = cli.run(*args, env=env)
        assert "Traceback" not in result.stderr and "UnicodeEncodeError" not in result.stderr, result.stderr
        assert result.returncode == 0, result.stderr
        assert result.stdout.isascii() and result.stderr.isascii(), result.stderr
    assert "ok" in result.stderr or "ok" in result.stdout
    cli.assert_nothing_left()
