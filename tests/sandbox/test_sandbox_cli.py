"""``fmcluster sandbox`` as a user runs it: subprocesses, a temp FMCLUSTER_HOME, real HTTPS."""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# The sub-app on its own, as the main CLI mounts it (``fmcluster sandbox``).
SANDBOX_CLI = "import sys; from fmcluster_sandbox.cli import app; sys.argv[0] = 'fmcluster sandbox'; app()"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["FMCLUSTER_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    return env


def cli(home: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SANDBOX_CLI, *args],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def status_json(home: Path) -> dict:
    out = cli(home, "status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture
def home(tmp_path: Path):
    yield tmp_path
    # never leave a sandbox behind, whatever the test did
    cli(tmp_path, "stop")


BOTO_CHECK = """
import boto3
vpcs = boto3.client("ec2").describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
print(vpcs[0]["VpcId"])
"""


def test_start_status_env_stop_round_trip(home: Path):
    assert status_json(home)["running"] is False

    started = cli(home, "start", "--port", "0")
    assert started.returncode == 0, started.stderr
    assert "started" in started.stderr and "https://127.0.0.1:" in started.stderr

    info = status_json(home)
    assert info["running"] is True
    assert info["endpoint_url"] == f"https://127.0.0.1:{info['port']}"
    assert info["ca_bundle"] == str(home / "sandbox" / "cert.pem")
    assert (home / "sandbox" / "sandbox.log").is_file()

    env_out = cli(home, "env")
    assert env_out.returncode == 0
    lines = env_out.stdout.splitlines()
    assert f"export AWS_ENDPOINT_URL={info['endpoint_url']}" in lines
    assert "export AWS_ACCESS_KEY_ID=testing" in lines
    assert "export AWS_DEFAULT_REGION=us-east-1" in lines

    # eval the export lines in a shell, then plain boto3 with nothing but that environment
    bash = shutil.which("bash")
    if bash:
        script = f'eval "$({sys.executable} -c "$SANDBOX_CLI" env)" && exec {sys.executable} -c "$BOTO_CHECK"'
        env = {**_env(home), "SANDBOX_CLI": SANDBOX_CLI, "BOTO_CHECK": BOTO_CHECK,
               "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
        run = subprocess.run([bash, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    else:  # pragma: no cover - no bash: apply the lines ourselves
        exports = dict(line[len("export "):].split("=", 1) for line in lines)
        run = subprocess.run([sys.executable, "-c", BOTO_CHECK], env={**_env(home), **exports},
                             capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith("vpc-")

    # a second start reuses the running sandbox
    again = cli(home, "start")
    assert again.returncode == 0 and "already running" in again.stderr
    assert status_json(home)["pid"] == info["pid"]

    # ensure_running (the global --sandbox flag) reuses it too
    from fmcluster_sandbox import manager

    reused = manager.ensure_running(home)
    assert reused["pid"] == info["pid"] and reused["reused"] is True

    stopped = cli(home, "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stderr
    assert status_json(home)["running"] is False
    assert not (home / "sandbox" / "sandbox.json").exists()
    assert not manager.pid_alive(info["pid"])
    assert cli(home, "stop").returncode == 0


def test_stale_state_file_is_replaced(home: Path):
    # a record left by a sandbox that died, pointing at a pid that now belongs to something else
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state = home / "sandbox" / "sandbox.json"
        state.parent.mkdir(parents=True)
        state.write_text(json.dumps({"pid": bystander.pid, "port": 1, "endpoint_url": "https://127.0.0.1:1",
                                     "ca_bundle": None, "started_at": "2020-01-01T00:00:00+00:00"}))
        info = status_json(home)
        assert info["running"] is False and info["pid"] == bystander.pid
        assert cli(home, "env").returncode == 1

        # (and start with an initial faults file while at it)
        faults = home / "faults.json"
        faults.write_text(json.dumps({"insufficient_capacity": ["p5.48xlarge"], "throttle_rate": {"iam": 1}}))
        started = cli(home, "start", "--port", "0", "--faults", str(faults))
        assert started.returncode == 0, started.stderr
        info = status_json(home)
        assert info["running"] is True and info["pid"] != bystander.pid
        assert bystander.poll() is None, "start must never signal a process that is not a sandbox"

        ctx = ssl.create_default_context(cafile=info["ca_bundle"])
        with urllib.request.urlopen(info["endpoint_url"] + "/_fmcluster/faults", context=ctx) as resp:
            current = json.loads(resp.read())
        assert current["insufficient_capacity"] == ["p5.48xlarge"]
        assert current["throttle_rate"] == {"iam": 1.0}
    finally:
        bystander.kill()
        bystander.wait()


def test_bad_input_is_one_clear_line(home: Path):
    out = cli(home, "start", "--faults", str(home / "missing.json"))
    assert out.returncode == 2
    assert "missing.json: no such file" in out.stderr and "Traceback" not in out.stderr

    out = cli(home, "env")
    assert out.returncode == 1 and out.stdout == ""
    assert "no sandbox is running" in out.stderr

    out = cli(home, "--help")
    assert out.returncode == 0
    for word in ("start", "stop", "status", "env", 'eval "$(fmcluster sandbox env)"'):
        assert word in out.stdout


def test_foreground_runs_until_interrupted(home: Path):
    from fmcluster_sandbox import manager

    proc = subprocess.Popen(
        [sys.executable, "-c", SANDBOX_CLI, "--port", "0"],
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        info = None
        while time.monotonic() < deadline:
            info = manager.status(home)
            if info and info["running"]:
                break
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.2)
        assert info and info["running"] and info["pid"] == proc.pid
        assert cli(home, "env").returncode == 0
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert 'eval "$(fmcluster sandbox env)"' in err
        assert "Traceback" not in err
        assert not (home / "sandbox" / "sandbox.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_restarted_sandbox_keeps_its_port(home: Path):
    """Clusters made against a sandbox record its endpoint (https://127.0.0.1:<port>): a sandbox started again
    without --port listens on the last one's port when it is free, so those records stay reachable."""
    first = cli(home, "start", "--port", "0")  # a port the OS picks, so neither 8787 nor a guess
    assert first.returncode == 0, first.stderr
    port = status_json(home)["port"]
    assert cli(home, "stop").returncode == 0
    again = cli(home, "start")
    assert again.returncode == 0, again.stderr
    info = status_json(home)
    assert info["running"] is True and info["port"] == port
    assert info["endpoint_url"] == f"https://127.0.0.1:{port}"
