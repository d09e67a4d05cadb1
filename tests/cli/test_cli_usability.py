"""The command line as a script or a shell sees it, offline: help placeholders, completion scripts and
completion of cluster and queue names for bash, zsh and fish, output that survives pipes, ``--json`` on
``validate``."""

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

ROOT = Path(__file__).resolve().parents[2]
FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")
QUICKSTART_PCS = ROOT / "configs" / "quickstart-pcs.yaml"
QUICKSTART_PC = ROOT / "configs" / "quickstart-parallelcluster.yaml"
COMMANDS = ["plan", "render", "validate", "preflight", "create", "scale", "status", "destroy", "ssh", "smoke",
            "burn-in", "logs", "topology", "schema", "sandbox", "sandbox start", "sandbox stop", "sandbox status",
            "sandbox env"]
TYPE_TAGS = re.compile(r"<(bool|str|int|float|path|list\[str\]|float range|int range)>|\{[a-z_]+\}")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(tmp_path), "NO_COLOR": "1",
                "FMCLUSTER_HOME": str(tmp_path / "state"), **extra})
    return env


def run(tmp_path: Path, *args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FMCLUSTER, *map(str, args)], capture_output=True, text=True, env=_env(tmp_path, **env),
                          cwd=tmp_path, timeout=180)


@pytest.fixture
def known_clusters(tmp_path: Path) -> Path:
    """Two clusters in the state store, as `create` records them (name, backend, region, spec)."""
    from fmcluster.spec import load_spec
    from fmcluster.state.store import StateStore
    from fmcluster.verbs.lifecycle.common import spec_text

    store = StateStore(tmp_path / "state" / "state.db")
    spec = load_spec(QUICKSTART_PCS).spec
    store.save_cluster("quickstart-pcs", "us-east-1", "pcs", spec_text(spec), str(QUICKSTART_PCS), "ACTIVE")
    other = spec.model_copy(update={"name": "llama-pretrain"})
    store.save_cluster("llama-pretrain", "us-west-2", "pcs", spec_text(other), "x.yaml", "CREATING")
    store.close()
    return tmp_path


# --- help ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_clean_placeholders_and_an_example(tmp_path: Path, command: str) -> None:
    # The entry point in this process: the installed command's help is test_usage_lines_name_their_placeholders'.
    result = run_in_process([*command.split(), "--help"], _env(tmp_path, COLUMNS="200"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not TYPE_TAGS.findall(result.stdout), (TYPE_TAGS.findall(result.stdout), result.stdout)
    assert re.search(r"Examples?:", result.stdout), f"`fmcluster {command} --help` teaches no example"


def test_usage_lines_name_their_placeholders(tmp_path: Path) -> None:
    usage = {c: run(tmp_path, c, "--help", COLUMNS="200").stdout for c in ("plan", "status", "scale", "ssh")}
    assert "Usage: fmcluster plan [OPTIONS] SPEC" in usage["plan"]
    assert "Usage: fmcluster status [OPTIONS] [NAME]" in usage["status"]
    assert "Usage: fmcluster scale [OPTIONS] NAME|SPEC [QUEUE=N…]" in usage["scale"]
    assert "Usage: fmcluster ssh [OPTIONS] NAME [-- CMD…]" in usage["ssh"]


# --- completion ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("shell", "marker"), [
    ("bash", "complete -o default -F _fmcluster_completion fmcluster"),
    ("zsh", "#compdef fmcluster"),
    ("fish", "complete --command fmcluster"),
])
def test_show_completion_prints_the_named_shells_script(tmp_path: Path, shell: str, marker: str) -> None:
    named = run(tmp_path, "--show-completion", shell, SHELL="/bin/bash")
    assert named.returncode == 0, named.stderr
    assert marker in named.stdout
    detected = run(tmp_path, "--show-completion", SHELL=f"/usr/bin/{shell}")
    assert marker in detected.stdout  # without a value: the user's $SHELL


def test_show_completion_refuses_an_unknown_shell(tmp_path: Path) -> None:
    result = run(tmp_path, "--show-completion", "tcsh")
    assert result.returncode == 2
    assert "completion is for bash, zsh, fish" in result.stderr


def _complete(tmp_path: Path, shell: str, words: str) -> str:
    """What the shell's script asks fmcluster for, through the same environment protocol."""
    if shell == "bash":
        parts = words.split(" ")
        env = {"COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)}
    else:
        env = {"_TYPER_COMPLETE_ARGS": words}
        if shell == "fish":
            env["_TYPER_COMPLETE_FISH_ACTION"] = "get-args"
    result = run(tmp_path, **env, _FMCLUSTER_COMPLETE=f"complete_{shell}")
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_cluster_names_complete_from_the_state_store(known_clusters: Path, shell: str) -> None:
    for command in ("status", "destroy", "ssh", "smoke", "burn-in", "logs", "scale", "topology"):
        out = _complete(known_clusters, shell, f"fmcluster {command} ")
        assert "quickstart-pcs" in out and "llama-pretrain" in out, (command, out)
    narrowed = _complete(known_clusters, shell, "fmcluster status qu")
    assert "quickstart-pcs" in narrowed and "llama-pretrain" not in narrowed
    if shell != "bash":  # zsh and fish show what each name is
        assert "pcs, us-east-1, ACTIVE" in narrowed


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_queue_names_complete_for_scale(known_clusters: Path, shell: str) -> None:
    out = _complete(known_clusters, shell, "fmcluster scale quickstart-pcs ")
    assert "gpu=" in out and "burst=" in out
    out = _complete(known_clusters, shell, "fmcluster scale quickstart-pcs gpu=2 ")
    assert "burst=" in out and "gpu=" not in out
    assert "=" not in _complete(known_clusters, shell, "fmcluster scale nope ")  # an unknown cluster has no queues


def test_bash_script_completes_in_a_real_bash(known_clusters: Path) -> None:
    script = (f'source <("{FMCLUSTER}" --show-completion bash)\n'
              f'PATH="{Path(FMCLUSTER).parent}:$PATH"\n'
              'COMP_WORDS=(fmcluster scale quickstart-pcs ""); COMP_CWORD=3\n'
              '_fmcluster_completion fmcluster\n'
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=_env(known_clusters),
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["gpu=", "burst="]


def test_completion_with_no_state_completes_nothing(tmp_path: Path) -> None:
    for shell in ("bash", "zsh", "fish"):
        out = _complete(tmp_path, shell, "fmcluster status ")
        assert "quickstart" not in out and "Traceback" not in out


# --- pipes and scripts ----------------------------------------------------------------------------------

def test_plan_to_a_file_is_not_cut(tmp_path: Path) -> None:
    result = run(tmp_path, "plan", ROOT / "configs" / "p5-odcr-parallelcluster.yaml", COLUMNS="40")
    assert result.returncode == 0, result.stderr
    assert "$/hour" in result.stdout and "…" not in result.stdout
    header = next(line for line in result.stdout.splitlines() if "queue" in line and "instance" in line)
    assert header.split()[-1] == "$/hour"  # the whole header row on one line, not folded into 40 columns
    row = next(line for line in result.stdout.splitlines() if line.split()[:2] == ["train", "p5.48xlarge"])
    assert row.split()[-2:] == ["51,200", "$880.64"]  # 16 nodes x 3,200 Gbps; 16 x $55.04


def test_status_table_is_whole_in_a_pipe(known_clusters: Path) -> None:
    from fmcluster.state.store import StateStore

    name = "a-cluster-name-of-exactly-forty-chars-xy"
    assert len(name) == 40
    store = StateStore(known_clusters / "state" / "state.db")
    record = store.cluster("quickstart-pcs")
    store.save_cluster(name, "eu-west-1", "pcs", record.spec, None, "ACTIVE")
    store.close()
    result = run(known_clusters, "status", COLUMNS="30")
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout
    line = next(line for line in result.stdout.splitlines() if name in line)
    assert line.split()[:4] == [name, "pcs", "eu-west-1", "ACTIVE"]


def test_each_spec_error_is_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    data = yaml.safe_load(QUICKSTART_PCS.read_text())
    data["queues"][0]["capacity"] = {"type": "ondemand"}
    data["queues"][1]["nodes"] = {"min": 0, "max": 0}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    result = run(tmp_path, "plan", spec, COLUMNS="40")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    for line in lines:
        assert re.match(rf"^error: {re.escape(str(spec))}:\d+:\d+: queues\[\d\]\.\S+: .+", line), line
    assert any("queues[0].capacity.type" in line and "on-demand" in line for line in lines), lines


@pytest.mark.parametrize("config", [QUICKSTART_PCS, QUICKSTART_PC], ids=["pcs", "parallelcluster"])
def test_validate_json_offline(tmp_path: Path, config: Path) -> None:
    result = run(tmp_path, "validate", config, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["command"] == "validate" and report["spec"] == str(config)
    checks = {c["name"]: c for c in report["checks"]}
    for check in checks.values():
        assert set(check) == {"name", "status", "summary", "details", "fix"}
    assert checks["instance types"]["status"] == "skipped"
    if config == QUICKSTART_PC:
        assert checks["pcluster schema"]["status"] == "passed"


def test_global_options_after_the_command(known_clusters: Path) -> None:
    after = run(known_clusters, "status", "--json", "--region", "us-west-2", "-v")
    before = run(known_clusters, "--region", "us-west-2", "-v", "status", "--json")
    assert after.returncode == before.returncode == 0, after.stderr
    assert json.loads(after.stdout) == json.loads(before.stdout)
    assert "AWS API calls" in after.stderr  # -v reached the main options
    missing = run(known_clusters, "status", "--region")
    assert missing.returncode == 2 and "--region needs a value" in missing.stderr


@pytest.mark.parametrize(("shell", "rc_file"), [("bash", ".bashrc"), ("zsh", ".zshrc")])
def test_install_completion_writes_the_named_shells_setup(tmp_path: Path, shell: str, rc_file: str) -> None:
    result = run(tmp_path, "--install-completion", shell, SHELL="/bin/sh")
    assert result.returncode == 0, result.stderr
    assert f"{shell} completion installed in" in result.stdout
    assert (tmp_path / rc_file).exists()


def test_smoke_on_an_unreachable_host_is_one_clear_error(known_clusters: Path) -> None:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run(known_clusters, "smoke", "quickstart-pcs", "--host", f"127.0.0.1:{port}", "--user", "nobody")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "error: ssh to nobody@127.0.0.1 failed" in result.stderr and "refused" in result.stderr
    unknown = run(known_clusters, "smoke", "no-such-cluster", "--host", "127.0.0.1:1")
    assert unknown.returncode == 1 and "no cluster named 'no-such-cluster'" in unknown.stderr


@pytest.mark.parametrize("args", [("destroy", "", "--yes"), ("status", ""), ("status", " "), ("scale", "", "q=1"),
                                  ("ssh", ""), ("smoke", ""), ("burn-in", ""), ("logs", ""), ("kubeconfig", ""),
                                  ("topology", "")])
def test_an_empty_cluster_name_is_a_usage_error_before_aws(known_clusters: Path, args: tuple[str, ...]) -> None:
    """`destroy ''` (a shell variable never set) stops at the argument: exit 2, one message, and -v's count of AWS
    calls shows none was made."""
    result = run(known_clusters, "-v", *args)
    assert result.returncode == 2, result.stderr
    assert "a cluster name cannot be empty" in result.stderr
    assert "Traceback" not in result.stderr
    assert not re.search(r"\b[1-9][0-9]* AWS API calls", result.stderr), result.stderr


def test_scale_refuses_a_queue_given_twice(known_clusters: Path) -> None:
    """`scale NAME gpu=2 gpu=3` used to take the last silently; now one usage error names the queue and both
    assignments, before any AWS call."""
    from fmcluster.errors import UsageError
    from fmcluster.verbs.lifecycle.scale import parse_counts

    with pytest.raises(UsageError, match=r"queue 'gpu' is given twice \(gpu=2 and gpu=3\)"):
        parse_counts(["gpu=2", "burst=0:4", "gpu=3"])
    assert parse_counts(["gpu=2", "burst=0:4"])["gpu"] == 2
    result = run(known_clusters, "-v", "scale", "quickstart-pcs", "gpu=2", "gpu=3", "--yes")
    assert result.returncode == 2, result.stderr
    assert "queue 'gpu' is given twice (gpu=2 and gpu=3): give each queue once; nothing changed" in result.stderr
    assert "Traceback" not in result.stderr
    assert not re.search(r"\b[1-9][0-9]* AWS API calls", result.stderr), result.stderr
