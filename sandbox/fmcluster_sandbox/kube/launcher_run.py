"""Run an MPIJob launcher's command, unchanged, on emulated nodes: its log is what the script prints there.

The command (the launcher container's ``command`` + ``args``) runs in bash in a private mount namespace
(``unshare -rm``: a user namespace mapping the caller to root, so it works unprivileged and as root on CI) where:

* ``/opt`` is a directory of the run's own, holding the image's binaries at the paths AWS's nccl-tests image puts
  them (``/opt/amazon/openmpi/bin/mpirun``, ``/opt/nccl-tests/build/all_reduce_perf``,
  ``/opt/amazon/efa/bin/fi_info``) and a link to every entry of the host's own ``/opt`` (the sandbox's Python may
  live there);
* the fake tools (:mod:`.fake_tools`: ``hostname``, ``nvidia-smi``, ``fi_info``, ``mpirun``, ``dcgmi``) come first on
  PATH;
* each node has its own ``/sys/class/infiniband``, one ``rdmap<i>s0`` per EFA device whose ``device/driver`` links
  to a driver named ``efa``; the fake ``mpirun`` mounts a rank's node's at ``/sys/class``;
* the hostfile the MPI Operator would mount (``<worker>.<job>.<namespace>.svc slots=N``) is named by
  ``OMPI_MCA_orte_default_hostfile``, as the operator sets it.

``timeout`` ends a run shortly after the job's deadline whatever happens; :func:`kill` ends its process group sooner
(the deadline passed), :func:`stop` also removes its files (the job deleted). Where ``unshare -rm`` is refused, no
run starts: :func:`start` says why, and the launcher pod fails with that reason.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).with_name("fake_tools.py")
IMAGE_PATHS = {"opt/amazon/openmpi/bin/mpirun": "mpirun", "opt/nccl-tests/build/all_reduce_perf": "all_reduce_perf",
               "opt/amazon/efa/bin/fi_info": "fi_info"}
ON_PATH = ("hostname", "nvidia-smi", "fi_info", "mpirun", "dcgmi")
# ``timeout`` ends a run this long after the job's deadline, should the operator never look again (the operator
# itself fails the job at the deadline, as the launcher's Job controller does).
BACKSTOP_S = 30
SETUP = 'set -e; mount --bind /opt "$0/host-opt"; mount --bind "$0/opt" /opt; exec "$@"'


@dataclass
class Run:
    proc: subprocess.Popen[bytes]
    root: Path

    @property
    def log(self) -> str:
        path = self.root / "log"
        return path.read_text(errors="replace") if path.exists() else ""


@functools.cache
def unavailable() -> str | None:
    """Why launchers cannot run here, or None."""
    if shutil.which("unshare") is None:
        return "util-linux's unshare is not installed"
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True, check=False)
    return None if probe.returncode == 0 else f"unshare -rm is refused here: {probe.stderr.strip()}"


def _wrapper(path: Path, tool: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S -I "{TOOLS}" {tool} "$@"\n')
    path.chmod(0o755)


def _sys_class(root: Path, host: str, devices: int) -> Path:
    base = root / "nodes" / host / "class"
    driver = root / "drivers" / "efa"
    driver.mkdir(parents=True, exist_ok=True)
    for index in range(devices):
        device = base / "infiniband" / f"rdmap{index}s0" / "device"
        device.mkdir(parents=True)
        (device / "driver").symlink_to(driver)
    (base / "infiniband").mkdir(parents=True, exist_ok=True)
    return base


def start(command: list[str], launcher: str, hosts: list[str], slots: int, namespace: str, job: str,
          facts: dict[str, dict[str, Any]], nccl: dict[str, Any], deadline_s: int) -> Run | str:
    """Start the launcher ``command`` as pod ``launcher`` over worker ``hosts`` (pod names, in index order) with
    each one's ``facts`` (:func:`.node_health.node_facts`); a Run, or why none could start."""
    why = unavailable()
    if why:
        return why
    root = Path(tempfile.mkdtemp(prefix="fmcluster-sandbox-launcher-"))
    (root / "host-opt").mkdir()
    (root / "opt").mkdir()
    ours = {Path(rel).parts[1] for rel in IMAGE_PATHS}
    for entry in Path("/opt").iterdir() if Path("/opt").is_dir() else ():
        if entry.name not in ours:  # a host's own /opt/amazon stays hidden: the image's is ours
            (root / "opt" / entry.name).symlink_to(root / "host-opt" / entry.name)
    for rel, tool in IMAGE_PATHS.items():
        _wrapper(root / rel, tool)
    for tool in ON_PATH:
        _wrapper(root / "bin" / tool, tool)
    (root / "hostfile").write_text("".join(f"{h}.{job}.{namespace}.svc slots={slots}\n" for h in hosts))
    world = {"hosts": facts, "nccl": nccl,
             "sys_class": {h: str(_sys_class(root, h, facts[h]["efa"])) for h in hosts}}
    (root / "world.json").write_text(json.dumps(world))
    env = {"PATH": f"{root / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
           "FMCLUSTER_SANDBOX_WORLD": str(root / "world.json"), "FMCLUSTER_SANDBOX_HOST": launcher,
           "OMPI_MCA_orte_default_hostfile": str(root / "hostfile")}
    with open(root / "log", "wb") as log:
        argv = ["unshare", "-rm", "sh", "-c", SETUP, str(root), "timeout", "-k", "5",
                str(max(1, deadline_s) + BACKSTOP_S), *command]
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=root)
    return Run(proc, root)


def kill(run: Run) -> None:
    """Kill the run's processes; its log stays readable."""
    if run.proc.poll() is None:
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        run.proc.wait()


def stop(run: Run) -> None:
    """Kill the run's processes and remove its files."""
    kill(run)
    shutil.rmtree(run.root, ignore_errors=True)
