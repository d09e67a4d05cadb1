"""`create --no-backup` without `--allow-data-loss` is a bad flag (README: `[--allow-data-loss [--no-backup]]`):
`--no-backup` only changes what `--allow-data-loss` does, so alone it is refused before any AWS call, as
`capacity buy --spec` without `--queue` is. Found verifying issue 35 on merged main: it was accepted silently."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SPEC = """name: flags
region: us-east-1
backend: pcs
queues:
  - {name: cpu, instance_type: m7i.xlarge, nodes: 1}
"""


def test_no_backup_alone_is_refused_before_any_aws_call(tmp_path: Path) -> None:
    home = tmp_path / "state"
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    command = [str(Path(sys.executable).parent / "fmcluster"), "--endpoint-url", "http://127.0.0.1:9", "create",
               str(path), "--yes", "--no-backup"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=tmp_path,
                            env={**os.environ, "FMCLUSTER_HOME": str(home), "NO_COLOR": "1"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: --no-backup goes with --allow-data-loss"), result.stderr
    assert "Traceback" not in result.stderr
    assert not home.exists()
