"""The shared judge of one node's burn-in outputs (fmcluster/backends/burn_in/judge.py), fed real captures from
tests/data/burn-in/ (README.md there gives each one's source). Expected counts are hand-typed from AWS's pages:
p4de.24xlarge has 8 NVIDIA A100 GPUs and 4 EFA interfaces (Amazon EC2 P4 instances, "Product details")."""

from __future__ import annotations

from pathlib import Path

from fmcluster.backends.burn_in.judge import checks_run, command, judge
from fmcluster.backends.burn_in.node_outputs import NodeOutputs, ToolRun
from fmcluster.backends.smoke.checks import Expectations
from fmcluster.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "burn-in"
QUEUE = load_spec(ROOT / "configs" / "p5-kueue-eks.yaml").spec.queues[0]
# p4de.24xlarge: 8 GPUs, 4 EFA devices, 400 Gbps (AWS, "Amazon EC2 P4 instances")
P4DE = Expectations(QUEUE, 2, 8, "gpu", 4, True, 400.0)


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _healthy(**changes: ToolRun | None) -> NodeOutputs:
    runs = {"gpus": ToolRun(0, _read("nvidia-smi-L-8x-a100.txt")),
            "efa": ToolRun(0, _read("fi_info-p4de.24xlarge-4-devices.txt")),
            "dcgm": ToolRun(0, _read("dcgm-3.1.0-nvidia-real-output.json"))}
    for name, run in changes.items():
        if run is None:
            runs.pop(name)
        else:
            runs[name] = run
    return NodeOutputs("ip-10-0-0-1", runs)


def _states(verdict) -> dict[str, tuple[str, object, object]]:
    return {c.name: (c.status, c.found, c.expected) for c in verdict.checks}


def test_a_healthy_node_passes_every_check():
    verdict = judge(_healthy(), P4DE, "standard")
    assert verdict.passed
    assert _states(verdict) == {"gpus": ("passed", 8, 8), "efa": ("passed", 4, 4),
                                "dcgm": ("passed", "pass", "pass at level 2")}


def test_the_level_sets_dcgm_and_the_command_line():
    assert command("dcgm", "quick") == "dcgmi diag -r 1 -j"
    assert command("dcgm", "long") == "dcgmi diag -r 3 -j"
    assert checks_run(P4DE, "quick") == ("gpus", "efa", "dcgm")


def test_a_failing_gpu_fails_dcgm_naming_it():
    verdict = judge(_healthy(dcgm=ToolRun(205, _read("dcgm-derived-3.x-gpu3-memory-fail.json"))), P4DE, "standard")
    assert not verdict.passed
    dcgm = next(c for c in verdict.checks if c.name == "dcgm")
    assert (dcgm.status, dcgm.found, dcgm.extra["failing_gpus"]) == ("failed", "GPU 3", [3])
    assert [c.name for c in verdict.failures] == ["dcgm"]


def test_counts_short_of_the_catalog_fail():
    two = ToolRun(0, _read("nvidia-smi-L-2x-a100-pod.txt"))
    one_efa = ToolRun(0, _read("fi_info-libfabric-efa-one-device.txt"))
    verdict = judge(_healthy(gpus=two, efa=one_efa), P4DE, "standard")
    assert _states(verdict)["gpus"] == ("failed", 2, 8)
    assert _states(verdict)["efa"] == ("failed", 1, 4)


def test_no_efa_provider_is_zero_devices_and_fails():
    # fi_info prints fi_getinfo: -61 and exits 1 where no EFA provider answers (the capture's host)
    verdict = judge(_healthy(efa=ToolRun(1, "", _read("fi_info-no-efa.txt"))), P4DE, "quick")
    assert _states(verdict)["efa"] == ("failed", 0, 4)


def test_a_missing_tool_or_unreadable_output_fails_never_passes():
    absent = judge(_healthy(dcgm=ToolRun(None, "")), P4DE, "standard")
    assert _states(absent)["dcgm"][0] == "absent" and not absent.passed
    garbled = judge(_healthy(gpus=ToolRun(0, "Segmentation fault\n")), P4DE, "standard")
    gpus = next(c for c in garbled.checks if c.name == "gpus")
    assert gpus.status == "failed" and "cannot read nvidia-smi -L output" in gpus.detail
    silent = judge(_healthy(efa=None), P4DE, "standard")
    assert _states(silent)["efa"][0] == "failed" and not silent.passed


def test_efa_off_is_skipped():
    off = Expectations(QUEUE, 2, 8, "gpu", None, False, None)
    verdict = judge(_healthy(efa=None), off, "standard")
    assert verdict.passed and _states(verdict)["efa"][0] == "skipped"
