"""``fmcluster kubeconfig NAME -o FILE``: merged into FILE as ``aws eks update-kubeconfig`` merges (this cluster's
entries replaced or added, every other one kept, this context made current), FILE left readable by its owner alone;
and the exec command it writes is one that runs without fmcluster's venv on PATH."""

from __future__ import annotations

import os
import stat
import sys

import pytest
import yaml

from fmcluster.errors import UsageError
from fmcluster.verbs.connect import kubeconfig


def _ours(name: str = "fmcluster-llama", server: str = "https://new.example") -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": name, "preferences": {},
            "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": "Q0E="}}],
            "users": [{"name": name, "user": {"exec": {"command": "/opt/fmc/bin/fmcluster", "args": ["x"]}}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}


# What a user's ~/.kube/config may already hold: another cluster (as `aws eks update-kubeconfig` writes it), and an
# older copy of ours.
EXISTING = {
    "apiVersion": "v1", "kind": "Config", "current-context": "arn:aws:eks:us-east-1:111122223333:cluster/other",
    "preferences": {"colors": True},
    "clusters": [{"name": "arn:aws:eks:us-east-1:111122223333:cluster/other", "cluster": {"server": "https://o"}},
                 {"name": "fmcluster-llama", "cluster": {"server": "https://old.example"}}],
    "users": [{"name": "arn:aws:eks:us-east-1:111122223333:cluster/other", "user": {"token": "t"}},
              {"name": "fmcluster-llama", "user": {"exec": {"command": "fmcluster"}}}],
    "contexts": [{"name": "arn:aws:eks:us-east-1:111122223333:cluster/other",
                  "context": {"cluster": "arn:aws:eks:us-east-1:111122223333:cluster/other",
                              "user": "arn:aws:eks:us-east-1:111122223333:cluster/other"}},
                 {"name": "fmcluster-llama", "context": {"cluster": "fmcluster-llama", "user": "fmcluster-llama"}}],
}


def test_merge_replaces_ours_and_keeps_the_rest(tmp_path):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(EXISTING))
    path.chmod(0o644)
    kubeconfig.write(str(path), _ours())
    merged = yaml.safe_load(path.read_text())
    assert merged["current-context"] == "fmcluster-llama"
    assert [c["name"] for c in merged["clusters"]] == ["arn:aws:eks:us-east-1:111122223333:cluster/other",
                                                       "fmcluster-llama"]
    assert merged["clusters"][1]["cluster"]["server"] == "https://new.example"
    assert merged["clusters"][0] == EXISTING["clusters"][0] and merged["users"][0] == EXISTING["users"][0]
    assert merged["users"][1]["user"]["exec"]["command"] == "/opt/fmc/bin/fmcluster"
    assert len(merged["contexts"]) == 2 and merged["preferences"] == {"colors": True}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # was 0644: it names how to get an admin token


def test_a_new_file_and_a_second_cluster(tmp_path):
    path = tmp_path / "kube" / "config"
    path.parent.mkdir()
    kubeconfig.write(str(path), _ours())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    kubeconfig.write(str(path), _ours("fmcluster-other", "https://other.example"))
    merged = yaml.safe_load(path.read_text())
    assert [c["name"] for c in merged["contexts"]] == ["fmcluster-llama", "fmcluster-other"]
    assert merged["current-context"] == "fmcluster-other"
    assert [p.name for p in path.parent.iterdir()] == ["config"]  # no temporary file left


def test_a_linked_kubeconfig_is_written_where_it_points(tmp_path):
    real = tmp_path / "real-config"
    real.write_text(yaml.safe_dump(EXISTING))
    link = tmp_path / "config"
    link.symlink_to(real)
    kubeconfig.write(str(link), _ours())
    assert link.is_symlink()
    assert len(yaml.safe_load(real.read_text())["clusters"]) == 2


def test_a_file_that_is_no_kubeconfig_is_refused_and_kept(tmp_path):
    path = tmp_path / "notes.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(UsageError, match="not a kubeconfig"):
        kubeconfig.write(str(path), _ours())
    assert path.read_text() == "- just\n- a list\n"


def test_the_exec_command_is_the_running_entry_point(monkeypatch, tmp_path):
    script = tmp_path / "venv" / "bin" / "fmcluster"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["venv/bin/fmcluster", "kubeconfig", "x"])
    assert kubeconfig.exec_command() == (str(script), [])
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "src" / "fmcluster" / "__main__.py")])
    assert kubeconfig.exec_command() == (os.path.abspath(sys.executable), ["-m", "fmcluster"])
