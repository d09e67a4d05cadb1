"""``fmcluster smoke`` exits 0 on a healthy Slurm cluster, on PCS and on ParallelCluster (issue 37, done when "smoke
passes in the sandbox on every backend"): AWS from the sandbox (each cluster is created there; its spec is what
smoke judges against), Slurm real (tests/fixtures/slurm.py: two slurmd on this host, partition named as the queue),
the installed command run as a user runs it, with ``--host`` pointing at the local Slurm.

The queue is 2 × p4de.24xlarge. The nodes' tools are fakes first on the job's PATH that print real captures byte for
byte (tests/data/burn-in/README.md, tests/data/nccl-tests/SOURCES.md); the EFA devices the job counts in
/sys/class/infiniband are made per node (fixture ``efa_sysfs``), named after the p4de capture's fi_info domains.
Then one fault: a node whose nvidia-smi sees 2 GPUs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from fixtures.lifecycle import PclusterCli, PcsCli, _ok, cli_fixture
from fixtures.slurm import efa_devices, running

DATA = Path(__file__).resolve().parents[2] / "data"
# A host of 8 A100-SXM4-40GB (p4d's GPU; p4de.24xlarge has the 80 GB part): the check counts GPUs, not their memory
NVIDIA_SMI_8 = DATA / "burn-in" / "nvidia-smi-L-8x-a100.txt"
NVIDIA_SMI_2 = DATA / "burn-in" / "nvidia-smi-L-2x-a100-pod.txt"
FI_INFO = DATA / "burn-in" / "fi_info-p4de.24xlarge-4-devices.txt"
ALL_REDUCE = DATA / "nccl-tests" / "aws-samples-2x-p4de.24xlarge.txt"
QUEUE = "gpu"
# The fi_info capture's four RDM domains less their "-rdm": the EFA devices of that p4de.24xlarge
P4DE_EFA = ["rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"]

pcs_cli = cli_fixture(PcsCli)
pcluster_cli = cli_fixture(PclusterCli)


@pytest.fixture(scope="module")
def local_slurm(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm")
    (root / "tools").mkdir()
    # 8 CPUs per node: the smoke job asks for one task per GPU (--ntasks-per-node=8), on a host with fewer cores
    with running(root, QUEUE, tools_dir=root / "tools", nodes=2, cpus=8, efa_sysfs=root / "sysfs") as slurm:
        yield slurm


@pytest.fixture
def healthy(local_slurm):
    """Both nodes as a healthy p4de.24xlarge shows itself; the tools' directory, for a test to break one."""
    tools = local_slurm.root / "tools"
    _fake(tools, "nvidia-smi", f"exec cat {NVIDIA_SMI_8}\n")
    _fake(tools, "fi_info", f"exec cat {FI_INFO}\n")
    # the capture ran -b 8 -e 2G where smoke asks -b 8M -e 4G: the fake ignores its arguments, the table is real
    _fake(tools, "all_reduce_perf", f"exec cat {ALL_REDUCE}\n")
    # Stands in for Open MPI's mpirun, which would start all_reduce_perf as 16 ranks over both nodes; nccl-tests
    # prints its table once, from rank 0, so running the program once prints what the real run printed (the capture).
    # It records its arguments, and runs the first argument that is an executable path with the arguments after it.
    _fake(tools, "mpirun", f'printf "%s\\n" "$*" > {tools / "mpirun.args"}\n'
                           'for arg; do shift; case "$arg" in /*) [ -x "$arg" ] && exec "$arg" "$@";; esac; done\n'
                           'echo "fake mpirun: no program" >&2; exit 2\n')
    for node in local_slurm.nodes:
        efa_devices(local_slurm.root / "sysfs", node, P4DE_EFA)
    yield tools
    for path in tools.iterdir():
        path.unlink()


def _fake(tools: Path, name: str, body: str) -> None:
    path = tools / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _p4de_spec(cli, backend: str, network: dict | None = None) -> None:
    data = {"name": cli.name, "backend": backend, "region": "us-east-1",
            "queues": [{"name": QUEUE, "instance_type": "p4de.24xlarge", "nodes": 2}]}
    if network:
        data["network"] = network
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.fixture
def started():
    """The commands a test started and overlaps with its other steps; those still running when it ends (a failed
    assertion before their turn) are stopped."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _smoke(cli, slurm, started: list[subprocess.Popen]) -> subprocess.Popen:
    """The installed ``fmcluster smoke NAME --json``, started: it spends its time waiting on the job (and that job on
    the nodes, which every smoke job takes whole), so a test overlaps it with other steps."""
    started.append(cli.popen("smoke", cli.name, "--host", slurm.host, "--user", slurm.user, "--identity",
                             str(slurm.identity), "--json"))
    return started[-1]


def _report(smoke: subprocess.Popen) -> tuple[int, dict, str]:
    stdout, stderr = smoke.communicate(timeout=120)
    report = json.loads(stdout) if stdout.strip() else {}
    Path(report.get("output_file") or "/nonexistent").unlink(missing_ok=True)
    assert report and "Traceback" not in stderr, stdout + stderr
    return smoke.returncode, report, stderr


def _statuses(report: dict) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    per_node = {n["node"]: {c["name"]: c["status"] for c in n["checks"]} for n in report["node_checks"]}
    return per_node, {c["name"]: c["status"] for c in report["checks"]}


def _assert_healthy(code: int, report: dict, stderr: str, tools: Path) -> None:
    assert code == 0, json.dumps(report, indent=1) + stderr
    assert report["ok"] is True and report["job_state"] == "COMPLETED"
    assert (report["queue"], report["instance_type"], report["nodes"]) == (QUEUE, "p4de.24xlarge", 2)
    per_node, overall = _statuses(report)
    passed = {"gpus": "passed", "efa_provider": "passed", "efa_devices": "passed"}
    assert per_node == {"fmcnode1": passed, "fmcnode2": passed}
    assert overall == dict.fromkeys(("job", "nodes", "nccl_all_reduce", "efa_bandwidth"), "passed")
    found = {(n["node"], c["name"]): (c["found"], c["expected"]) for n in report["node_checks"] for c in n["checks"]}
    # https://aws.amazon.com/ec2/instance-types/p4/: p4de.24xlarge, 8 A100 GPUs, 400 Gbps EFA over 4 network cards
    # (EC2 User Guide, "Elastic Fabric Adapter", supported instance types: 4 EFA interfaces); the provider check
    # counts fi_info's RDM endpoints (4 in the capture) and compares them to nothing
    figures = {"gpus": (8, 8), "efa_provider": (4, None), "efa_devices": (4, 4)}
    assert found == {(node, name): value for node in ("fmcnode1", "fmcnode2") for name, value in figures.items()}
    checks = {c["name"]: c for c in report["checks"]}
    # the capture's largest size, 2147483648 B: busbw 78.33 GB/s out of place and in place; 400 Gbps = 50 GB/s
    assert checks["nccl_all_reduce"]["busbw_peak_gb_s"] == 78.33
    assert (checks["efa_bandwidth"]["found"], checks["efa_bandwidth"]["expected"]) == (78.33, 50.0)
    # 16 ranks, 8 per node: one per GPU
    assert (tools / "mpirun.args").read_text().split()[:4] == ["-n", "16", "-N", "8"]


def test_smoke_passes_on_healthy_pcs_and_parallelcluster(pcs_cli, pcluster_cli, sandbox, local_slurm, healthy,
                                                         started):
    _p4de_spec(pcs_cli, "pcs")
    _ok(pcs_cli.create_here())
    pcs_smoke = _smoke(pcs_cli, local_slurm, started)

    # EFA over 4 cards: the compute nodes get no public IP. The sandbox offers p4de.24xlarge in us-east-1b and -1c only
    network = sandbox.private_network(zone="us-east-1b")
    _p4de_spec(pcluster_cli, "parallelcluster", {"subnet_id": network["private_subnet"],
                                                 "head_subnet_id": network["public_subnet"]})
    _ok(pcluster_cli.create_here())
    _assert_healthy(*_report(_smoke(pcluster_cli, local_slurm, started)), healthy)
    _assert_healthy(*_report(pcs_smoke), healthy)
    started.append(pcs_destroy := pcs_cli.popen("destroy", pcs_cli.name, "--yes"))

    # one fault: fmcnode2's nvidia-smi sees 2 GPUs (a capture of a pod given 2 of the 8)
    _fake(healthy, "nvidia-smi", f'if [ "$SLURMD_NODENAME" = fmcnode2 ]; then exec cat {NVIDIA_SMI_2}; fi\n'
                                 f"exec cat {NVIDIA_SMI_8}\n")
    code, report, stderr = _report(_smoke(pcluster_cli, local_slurm, started))
    assert code == 1, json.dumps(report, indent=1) + stderr
    per_node, overall = _statuses(report)
    assert report["ok"] is False and per_node["fmcnode2"]["gpus"] == "failed"
    [gpus] = [c for n in report["node_checks"] if n["node"] == "fmcnode2" for c in n["checks"] if c["name"] == "gpus"]
    assert (gpus["found"], gpus["expected"]) == (2, 8)
    assert per_node["fmcnode1"]["gpus"] == "passed" and set(overall.values()) == {"passed"}

    _, destroyed = pcs_destroy.communicate(timeout=120)
    assert pcs_destroy.returncode == 0, destroyed
    _ok(pcluster_cli.destroy_here())
