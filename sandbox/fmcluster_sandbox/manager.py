"""Run the sandbox in the background: start, stop, status, env, and ``ensure_running()``.

Files live in ``<home>/sandbox/`` where home is ``$FMCLUSTER_HOME`` or the platform state dir:
``sandbox.json`` (pid, port, endpoint_url, ca_bundle, started_at; written by the server once it
listens), ``last-port`` (the port of the last sandbox, which a restart takes again when it is free),
``cert.pem``/``key.pem`` (the self-signed certificate) and ``sandbox.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from fmcluster.errors import FmclusterError, UsageError
from fmcluster.state.processes import pid_alive

DEFAULT_PORT = 8787
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
SANDBOX_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


def home_dir() -> Path:
    env = os.environ.get("FMCLUSTER_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_state_dir("fmcluster"))


def sandbox_dir(home: Path | None = None) -> Path:
    return (home or home_dir()) / "sandbox"


def state_path(home: Path | None = None) -> Path:
    return sandbox_dir(home) / "sandbox.json"


def log_path(home: Path | None = None) -> Path:
    return sandbox_dir(home) / "sandbox.log"


def last_port_path(home: Path | None = None) -> Path:
    return sandbox_dir(home) / "last-port"


def last_port(home: Path | None = None) -> int | None:
    """The port the last sandbox of this home listened on (kept after ``stop``), or None."""
    try:
        port = int(last_port_path(home).read_text().strip())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None


# -- small helpers -----------------------------------------------------------------------------------


def is_sandbox_process(pid: int) -> bool:
    """True if *pid* is alive and runs the sandbox server (guards against reused pids).

    That is ``python -m fmcluster_sandbox.server …`` (background) or ``fmcluster sandbox …``
    (foreground).
    """
    if not pid_alive(pid):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        try:
            argv = subprocess.run(
                ["ps", "-p", str(pid), "-o", "command="], capture_output=True, text=True, timeout=5
            ).stdout.split()
        except (OSError, subprocess.SubprocessError):
            return True  # cannot tell: trust the pid file
    if any("fmcluster_sandbox" in arg for arg in argv):
        return True
    for i, arg in enumerate(argv):
        if os.path.basename(arg) == "fmcluster":
            return "sandbox" in argv[i + 1 :]
    return False


def port_free(port: int) -> bool:
    """True when the sandbox could listen on ``port``. Probed as the server binds (SO_REUSEADDR, as Python's
    HTTPServer sets it): a stopped sandbox's connections in TIME_WAIT do not make its port look taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def health(info: dict[str, Any], timeout: float = 2.0) -> dict[str, Any] | None:
    """``GET /_fmcluster/health`` of the sandbox described by *info*; None if it does not answer."""
    url = f"{info['endpoint_url']}/_fmcluster/health"
    ctx = None
    if url.startswith("https"):
        ca = info.get("ca_bundle")
        if not ca or not Path(ca).is_file():
            return None
        ctx = ssl.create_default_context(cafile=ca)
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
            data = json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError, ssl.SSLError):
        return None
    return data if isinstance(data, dict) and data.get("ok") else None


def _read_state(home: Path | None = None) -> dict[str, Any] | None:
    try:
        data = json.loads(state_path(home).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "pid" in data and "endpoint_url" in data else None


def _remove_state(home: Path | None = None) -> None:
    with contextlib.suppress(OSError):
        state_path(home).unlink()


@contextlib.contextmanager
def _lock(home: Path | None = None):
    """Serialise start/stop of one sandbox home between processes."""
    import fcntl

    d = sandbox_dir(home)
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# -- public API --------------------------------------------------------------------------------------


def status(home: Path | None = None) -> dict[str, Any] | None:
    """What ``sandbox.json`` says, plus ``running`` (pid alive and health answers); None if no file."""
    info = _read_state(home)
    if info is None:
        return None
    info = dict(info)
    info.setdefault("ca_bundle", None)
    pid = int(info.get("pid", 0))
    answer = health(info) if pid_alive(pid) else None
    # the endpoint must answer as that very process (not another sandbox that took the port)
    info["running"] = answer is not None and answer.get("pid") == pid
    return info


def check_faults_file(path: str | os.PathLike[str]) -> None:
    """Refuse a missing or invalid faults file before anything starts."""
    if not Path(path).is_file():
        raise UsageError(f"--faults {path}: no such file")
    try:
        from fmcluster_sandbox.faults import Faults
    except ImportError:
        return
    try:
        Faults.from_file(path)
    except Exception as exc:  # yaml/json errors and Faults' own ValueErrors alike
        raise UsageError(f"--faults {path}: {exc}") from None


def start(
    port: int | None = None,
    faults_file: str | os.PathLike[str] | None = None,
    *,
    tls: bool = True,
    home: Path | None = None,
    timeout: float = START_TIMEOUT,
) -> dict[str, Any]:
    """Start a background sandbox (or reuse the healthy one); return its info with ``reused``."""
    home = home or home_dir()
    if faults_file is not None:
        check_faults_file(faults_file)
    with _lock(home):
        current = status(home)
        if current and current["running"]:
            if port not in (None, 0, current["port"]):
                raise UsageError(
                    f"a sandbox is already running on port {current['port']} (pid {current['pid']}); "
                    "stop it first with `fmcluster sandbox stop`"
                )
            current["reused"] = True
            return current
        if current is not None:
            # stale: process gone or not answering
            if is_sandbox_process(int(current["pid"])):
                _terminate(int(current["pid"]))
            _remove_state(home)

        if port is None:
            # The last sandbox's port first: clusters made against it record its endpoint, and a restarted
            # sandbox on another port would leave those records unreachable (neither readable nor removable).
            port = next((p for p in (last_port(home), DEFAULT_PORT) if p and port_free(p)), 0)
        elif port and not port_free(port):
            raise UsageError(f"port {port} on 127.0.0.1 is in use; pick another with --port")

        from fmcluster.extras import require

        require("sandbox", "the sandbox")
        d = sandbox_dir(home)
        d.mkdir(parents=True, exist_ok=True)
        log = log_path(home)
        cmd = [sys.executable, "-m", "fmcluster_sandbox.server", "--port", str(port), "--home", str(home)]
        if faults_file:
            cmd += ["--faults", str(Path(faults_file).resolve())]
        if not tls:
            cmd.append("--no-tls")
        env = dict(os.environ)
        env["FMCLUSTER_HOME"] = str(home)
        # make the child import this same fmcluster_sandbox and fmcluster, installed or run from source trees
        import fmcluster

        roots = [str(Path(__file__).resolve().parents[1]), str(Path(fmcluster.__file__).resolve().parents[1])]
        env["PYTHONPATH"] = os.pathsep.join(p for p in (*roots, env.get("PYTHONPATH")) if p)
        with open(log, "ab") as logf:
            logf.write(f"--- starting: {' '.join(cmd)}\n".encode())
            logf.flush()
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                env=env,
                cwd=str(d),
            )
        return _wait_healthy(proc, home, timeout)


def _wait_healthy(proc: subprocess.Popen, home: Path, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    log = log_path(home)
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise FmclusterError(
                f"the sandbox exited during start-up (exit code {code}); see {log}:\n"
                + _log_tail(log)
            )
        info = _read_state(home)
        answer = health(info, timeout=1.0) if info and info.get("pid") == proc.pid else None
        if info and answer and answer.get("pid") == proc.pid:
            with contextlib.suppress(OSError, KeyError, ValueError):
                last_port_path(home).write_text(f"{int(info['port'])}\n")
            info = dict(info)
            info["running"] = True
            info["reused"] = False
            return info
        time.sleep(0.05)
    _terminate(proc.pid)
    raise FmclusterError(
        f"the sandbox did not become healthy within {timeout:.0f} s; see {log}:\n" + _log_tail(log)
    )


def _log_tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return "  (no log)"
    return "\n".join("  " + line for line in text[-lines:])


def _terminate(pid: int, timeout: float = STOP_TIMEOUT) -> bool:
    """SIGTERM, wait, then SIGKILL. True if the process is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(40):
        _reap(pid)
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def stop(home: Path | None = None, timeout: float = STOP_TIMEOUT) -> dict[str, Any] | None:
    """Stop the background sandbox; return the info it had (None if none was known)."""
    home = home or home_dir()
    with _lock(home):
        info = _read_state(home)
        if info is None:
            return None
        pid = int(info["pid"])
        current = status(home)
        was_running = bool(current and current["running"]) or is_sandbox_process(pid)
        if was_running and not _terminate(pid, timeout):
            raise FmclusterError(f"could not stop the sandbox (pid {pid})")
        _remove_state(home)
        info = dict(info)
        info["running"] = False
        info["was_running"] = was_running
        return info


def ensure_running(home: Path | None = None) -> dict[str, Any]:
    """Reuse the running sandbox or start one (used by the global ``--sandbox`` flag)."""
    current = status(home)
    if current and current["running"]:
        current["reused"] = True
        return current
    return start(home=home)


def env_vars(info: dict[str, Any]) -> dict[str, str]:
    """Environment that points boto3, the AWS CLI and pcluster at the sandbox."""
    env = {"AWS_ENDPOINT_URL": info["endpoint_url"]}
    if info.get("ca_bundle"):
        env["AWS_CA_BUNDLE"] = info["ca_bundle"]
    env.update(SANDBOX_ENV)
    return env


def env_lines(info: dict[str, Any]) -> list[str]:
    """``export NAME=value`` lines for ``eval "$(fmcluster sandbox env)"``."""
    import shlex

    lines = [f"export {k}={shlex.quote(v)}" for k, v in env_vars(info).items()]
    if not info.get("ca_bundle"):
        lines.append("unset AWS_CA_BUNDLE")  # a stale one from an earlier HTTPS sandbox
    return lines
