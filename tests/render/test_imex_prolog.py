"""fmcluster/scripts/imex_prolog.sh run as slurmd runs a prolog, with stand-ins for what only a GB200 node has
(the instance metadata service, systemd's nvidia-imex unit, nvidia-imex-ctl, Slurm's scontrol): which nodes
it writes into nvidia-imex's nodes config, and when it restarts the service."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fmcluster.backends.slurm.node_software import SCRIPTS_DIR

PROLOG = SCRIPTS_DIR / "imex_prolog.sh"
NODES = {  # name → address; "train-dy-gb-3" is still powering up (its address is its name)
    "train-st-gb-1": "10.0.1.12", "train-st-gb-2": "10.0.1.9", "train-dy-gb-3": "train-dy-gb-3",
    "train-st-gb-10": "10.0.1.30", "cpu-st-c5-1": "10.0.2.5", "train-st-other-1": "10.0.3.3",
}
SHIMS = {
    "curl": """#!/bin/bash
if [[ " $* " == *" -X PUT "* ]]; then echo token; else echo "${FAKE_INSTANCE_TYPE}"; fi
""",
    "systemctl": """#!/bin/bash
case "$1" in
  is-enabled) [[ -n ${FAKE_IMEX_ENABLED:-} ]] ;;
  is-active) [[ -f ${FAKE}/active ]] ;;
  show) echo "{ path=/usr/bin/nvidia-imex ; argv[]=/usr/bin/nvidia-imex -c ${FAKE}/config.cfg ; ignore_errors=no }" ;;
  restart) cp "${FAKE}/nodes.cfg" "${FAKE}/loaded-at-restart-$(date +%s%N)"; echo restart >> "${FAKE}/restarts"
           touch "${FAKE}/active" ;;
esac
""",
    "nvidia-imex-ctl": "#!/bin/bash\necho READY\n",
    "scontrol": """#!/bin/bash
[[ $1 == -o ]] && shift
case "$1 $2" in
  "show hostnames") tr ',' '\\n' <<< "$3" ;;
  "show nodes") cat "${FAKE}/nodes.txt" ;;
  "show node") grep "^NodeName=$3 " "${FAKE}/nodes.txt" ;;
esac
""",
}


@pytest.fixture
def node(tmp_path: Path):
    """Run the prolog as one node of a job; returns a runner and the fake node's directory."""
    shims = tmp_path / "bin"
    shims.mkdir()
    for name, text in SHIMS.items():
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    (tmp_path / "config.cfg").write_text(f"SERVER_PORT=50000\nIMEX_NODE_CONFIG_FILE={tmp_path}/nodes.cfg\n")
    (tmp_path / "nodes.txt").write_text("".join(f"NodeName={name} Arch=aarch64 NodeAddr={addr} State=IDLE\n"
                                                for name, addr in NODES.items()))

    def run(*, nodelist: str = "train-st-gb-1,train-st-gb-2", instance_type: str = "p6e-gb200.36xlarge",
            enabled: bool = True, parallelcluster: bool = False,
            me: str = "train-st-gb-1") -> subprocess.CompletedProcess:
        env = {"PATH": f"{shims}:{os.environ['PATH']}", "FAKE": str(tmp_path), "FAKE_INSTANCE_TYPE": instance_type,
               "FAKE_IMEX_ENABLED": "1" if enabled else "", "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": nodelist,
               "SLURMD_NODENAME": me, "FMCLUSTER_IMEX_STATE": str(tmp_path / "state"),
               "FMCLUSTER_IMEX_LOG": str(tmp_path / "prolog.log"), "FMCLUSTER_IMEX_READY_SECONDS": "4",
               "FMCLUSTER_IMEX_DNA_JSON": str(tmp_path / ("dna.json" if parallelcluster else "absent"))}
        if parallelcluster:
            (tmp_path / "dna.json").write_text("{}")
        return subprocess.run(["bash", str(PROLOG)], env=env, capture_output=True, text=True, timeout=60)

    return run, tmp_path


def _restarts(path: Path) -> int:
    return len((path / "restarts").read_text().splitlines()) if (path / "restarts").exists() else 0


def test_pcs_node_gets_the_jobs_nodes_and_restarts_only_when_they_change(node) -> None:
    run, path = node
    assert run().returncode == 0
    assert (path / "nodes.cfg").read_text() == "10.0.1.9\n10.0.1.12\n"  # numeric order, one per line
    assert _restarts(path) == 1
    assert "ready" in (path / "prolog.log").read_text()
    assert run().returncode == 0  # the next job on the same nodes: IMEX already has them
    assert _restarts(path) == 1
    assert run(nodelist="train-st-gb-1,train-st-gb-10").returncode == 0
    assert (path / "nodes.cfg").read_text() == "10.0.1.12\n10.0.1.30\n"
    assert _restarts(path) == 2


def test_parallelcluster_node_gets_its_compute_resources_nodes(node) -> None:
    run, path = node
    assert run(parallelcluster=True, me="train-st-gb-2").returncode == 0
    # the nodes of queue train, compute resource gb, static or dynamic, that have an address
    assert (path / "nodes.cfg").read_text() == "10.0.1.9\n10.0.1.12\n10.0.1.30\n"
    # the restart read the list just written
    [loaded] = list(path.glob("loaded-at-restart-*"))
    assert loaded.read_text() == (path / "nodes.cfg").read_text()


@pytest.mark.parametrize(("kwargs", "logged"), [
    ({"instance_type": "p5.48xlarge"}, None),
    ({"enabled": False}, "nvidia-imex is not enabled on this p6e-gb200.36xlarge node"),
    ({"nodelist": "train-dy-gb-3"}, "no node addresses found"),
])
def test_nodes_without_imex_run_their_job_untouched(node, kwargs: dict, logged: str | None) -> None:
    """A prolog that fails drains the node: whatever is missing is logged, and the job still runs."""
    run, path = node
    result = run(**kwargs)
    assert result.returncode == 0, result.stderr
    assert not (path / "nodes.cfg").exists() and _restarts(path) == 0
    log = (path / "prolog.log").read_text() if (path / "prolog.log").exists() else ""
    assert (logged in log) if logged else log == ""


def test_install_names_its_backends() -> None:
    result = subprocess.run(["bash", str(PROLOG), "install", "slurm"], capture_output=True, text=True)
    assert result.returncode == 2 and "usage:" in result.stderr
