"""A real one-host Slurm cluster and an sshd on loopback, for ``fmcluster smoke`` and ``fmcluster ssh``.

Started from Debian's packages (``.ci/run`` installs ``slurm-wlm``, ``munge`` and ``openssh-server``): munged
with its own key and socket, slurmctld and slurmd from a generated ``slurm.conf`` with free ports, and sshd on
127.0.0.1 with a generated host key and one authorized client key. Everything lives in a temp dir; nothing
touches the system's Slurm or sshd. sshd hands ``SLURM_CONF`` to its sessions, so ``sbatch`` over ssh finds this
cluster. Runs as root (the CI machine does); when the packages or root are missing the fixture skips, unless
``FMCLUSTER_REQUIRE_SLURM=1``, where it fails.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sshd", "ssh", "ssh-keygen")


@dataclass
class LocalSlurm:
    root: Path
    node: str
    partition: str
    ssh_port: int
    identity: Path
    user: str
    slurm_conf: Path

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.ssh_port}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_requirements() -> str | None:
    missing = [b for b in BINARIES if shutil.which(b) is None and not Path(f"/usr/sbin/{b}").exists()]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge openssh-server)"
    if os.geteuid() != 0:
        return "the one-host Slurm runs its daemons as root"
    return None


def skip_or_fail(reason: str) -> None:
    if os.environ.get("FMCLUSTER_REQUIRE_SLURM") == "1":
        pytest.fail(f"FMCLUSTER_REQUIRE_SLURM=1 but the local Slurm cannot run: {reason}")
    pytest.skip(f"local Slurm unavailable: {reason}")


def _sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _wait(predicate, timeout: float, what: str, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    tails = "\n".join(f"--- {log}\n{log.read_text(errors='replace')[-2000:]}" for log in logs if log.exists())
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s\n{tails}")


def start(root: Path, partition: str) -> tuple[LocalSlurm, list[subprocess.Popen]]:
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    procs: list[subprocess.Popen] = []
    hostname = socket.gethostname()
    node = "fmcnode1"
    cpus = os.cpu_count() or 1

    # munge: its own key and socket
    munge = root / "munge"
    munge.mkdir(mode=0o700)
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket_path = munge / "munge.socket"
    procs.append(subprocess.Popen(
        [_sbin("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={socket_path}",
         f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
         f"--seed-file={munge / 'munged.seed'}"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
    _wait(socket_path.exists, 20, "munged", [munge / "munged.log"])

    # Slurm: one node, one partition named like the spec's queue
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir()
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=fmcsmoke",
        f"SlurmctldHost={hostname}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={socket_path}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        "MinJobAge=600",
        # job ids unique across runs: the smoke job's output file in $HOME is named after its id
        f"FirstJobId={random.randint(100_000, 9_000_000)}",
        f"NodeName={node} NodeHostname={hostname} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=512 State=UNKNOWN",
        f"PartitionName={partition} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ]))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs.append(subprocess.Popen([_sbin("slurmctld"), "-D", "-f", str(conf)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
    procs.append(subprocess.Popen([_sbin("slurmd"), "-D", "-f", str(conf), "-N", node], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))

    def node_idle() -> bool:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
        return out.returncode == 0 and out.stdout.strip() in ("idle", "idle*") and "*" not in out.stdout

    _wait(node_idle, 60, "slurmd (node idle)", [root / "log" / "slurmctld.log", root / "log" / "slurmd.log"])

    # sshd on loopback, one authorized key
    sshd = root / "sshd"
    sshd.mkdir(mode=0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(sshd / "host_key")], check=True)
    identity = root / "client_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(identity)], check=True)
    (sshd / "authorized_keys").write_text((root / "client_key.pub").read_text())
    port = _free_port()
    (sshd / "sshd_config").write_text("\n".join([
        f"Port {port}",
        "ListenAddress 127.0.0.1",
        f"HostKey {sshd / 'host_key'}",
        f"AuthorizedKeysFile {sshd / 'authorized_keys'}",
        f"PidFile {sshd / 'sshd.pid'}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes no",
        f"SetEnv SLURM_CONF={conf}",
        "",
    ]))
    Path("/run/sshd").mkdir(exist_ok=True)  # Debian's sshd insists on its privilege-separation directory
    procs.append(subprocess.Popen([_sbin("sshd"), "-D", "-e", "-f", str(sshd / "sshd_config")],
                                  stdout=open(sshd / "sshd.log", "wb"), stderr=subprocess.STDOUT))

    def ssh_up() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    _wait(ssh_up, 20, "sshd", [sshd / "sshd.log"])
    user = os.environ.get("USER") or "root"
    return LocalSlurm(root, node, partition, port, identity, "root" if os.geteuid() == 0 else user, conf), procs


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in reversed(procs):
        proc.terminate()
    for proc in reversed(procs):
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
