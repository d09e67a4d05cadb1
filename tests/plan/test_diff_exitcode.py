"""`diff --detailed-exitcode`: 3 when changes are pending (Terraform's -detailed-exitcode gives 2, which is bad input
on every fmcluster command), 0 without the flag; a cluster never created is all changes pending. Read-only against
the sandbox: nothing is created."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")
QUICKSTART_PCS = ROOT / "configs" / "quickstart-pcs.yaml"


def _diff(sandbox, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **sandbox.env, "FMCLUSTER_HOME": str(tmp_path / "state"), "NO_COLOR": "1"}
    return subprocess.run([FMCLUSTER, "diff", *args], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)


def test_diff_detailed_exitcode_says_changes_are_pending(sandbox, tmp_path: Path) -> None:
    pending = _diff(sandbox, tmp_path, str(QUICKSTART_PCS), "--json", "--detailed-exitcode")
    assert pending.returncode == 3, pending.stderr
    report = json.loads(pending.stdout)
    assert report["in_sync"] is False and {c["action"] for c in report["changes"]} == {"create"}
    plain = _diff(sandbox, tmp_path, str(QUICKSTART_PCS), "--json")
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["in_sync"] is False
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: demo\nbackend: pcs\nqueues: []\n")
    refused = _diff(sandbox, tmp_path, str(bad), "--detailed-exitcode")
    assert refused.returncode == 2, refused.stderr
