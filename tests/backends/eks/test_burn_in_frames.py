"""How the EKS burn-in check job carries each node's tool outputs home (fmcluster/backends/eks/burn_in/frames.py):
the launcher script's own ``run_tool`` (run here in bash on a real capture, tests/data/burn-in/README.md) frames a
DCGM JSON of several chunks, and the reader puts interleaved lines of two nodes back together; a lost or doubled chunk
makes that check unreadable (failed), never a pass."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fmcluster.backends.eks.burn_in import frames, jobs
from fmcluster.backends.smoke.checks import expectations
from fmcluster.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
CAPTURE = ROOT / "tests" / "data" / "burn-in" / "dcgm-3.1.0-nvidia-real-output.json"


def _script() -> str:
    spec = load_spec(ROOT / "configs" / "p5-kueue-eks.yaml").spec
    expect = expectations(spec, "train", None)
    job = jobs.check_job(spec, expect, ("node-a", "node-b"), None)
    manifest = jobs.check_manifest(spec, expect, "standard", job, ("node-a", "node-b"), 60)
    return manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]


def _framed(host: str) -> list[str]:
    script = _script()
    run_tool = script[script.index("run_tool() {"):script.index("node_checks() {")]
    # hostname -s names the node: a stand-in that prints the host this test pretends to be
    out = subprocess.run(["bash", "-c", f"hostname() {{ echo {host}; }}; {run_tool} run_tool dcgm cat {CAPTURE}; "
                          "run_tool gpus no-such-tool-anywhere"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def test_the_scripts_frames_bring_each_nodes_output_back_whole_through_interleaving():
    a, b = _framed("worker-0"), _framed("worker-1")
    assert len([line for line in a if " dcgm 0 out " in line]) > 1  # the capture needs several chunks
    mixed = [line for pair in zip(a, b, strict=False) for line in pair] + a[len(b):] + b[len(a):]
    outputs, broken = frames.read("\n".join(mixed), {"worker-0": "node-a", "worker-1": "node-b"})
    assert broken == {}
    for node in ("node-a", "node-b"):
        assert outputs[node].runs["dcgm"].stdout == CAPTURE.read_text()
        assert outputs[node].runs["dcgm"].exit_code == 0
        assert outputs[node].runs["gpus"].exit_code is None  # not installed: the judge's "absent"


def test_a_lost_or_doubled_chunk_is_unreadable_not_a_pass():
    lines = _framed("worker-0")
    chunks = [i for i, line in enumerate(lines) if " dcgm 0 out " in line]
    lost = lines[:chunks[1]] + lines[chunks[1] + 1:]
    outputs, broken = frames.read("\n".join(lost))
    assert "dcgm" not in outputs["worker-0"].runs
    assert broken[("worker-0", "dcgm")].endswith(f"1 of {len(chunks)} chunk(s) missing from the log")
    doubled = lines + [lines[chunks[0]]]
    assert ("worker-0", "dcgm") in frames.read("\n".join(doubled))[1]
