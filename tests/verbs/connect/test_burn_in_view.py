"""How ``fmcluster burn-in`` prints its report without --json (fmcluster/verbs/connect/view.py): a row per node with
the failed check and its figure, the busy node skipped, then the all-reduce finding. And the refusal of a bad level
before any cluster is looked up."""

from __future__ import annotations

import pytest

from fmcluster.backends.burn_in.report import failures
from fmcluster.errors import UsageError
from fmcluster.verbs.connect import burn_in_command
from fmcluster.verbs.connect.view import print_burn_in

REPORT = {
    "cluster": "llama", "queue": "train", "instance_type": "p5.48xlarge", "level": "standard", "passed": False,
    "nodes": [
        {"node": "a", "state": "failed", "checks": [
            {"name": "gpus", "status": "passed", "found": 8, "expected": 8, "detail": "8 GPU(s)"},
            {"name": "dcgm", "status": "failed", "found": "GPU 3", "expected": "pass at level 2",
             "detail": "DCGM 4.x: memory on GPU 3: fail"}]},
        {"node": "b", "state": "passed", "checks": [
            {"name": "gpus", "status": "passed", "found": 8, "expected": 8, "detail": "8 GPU(s)"}]},
        {"node": "c", "state": "busy", "checks": [], "detail": "skipped: pod default/t-0 holds nvidia.com/gpu"}],
    "nccl": {"runs": [{"nodes": ["b", "d"]}], "rounds": 4, "note": "",
             "layers": [{"crossing": "through layer 3", "pairs": 2, "lowest_gb_s": 460.0, "highest_gb_s": 470.5},
                        {"crossing": "across spines", "pairs": 1, "lowest_gb_s": None, "highest_gb_s": None}],
             "finding": {"kind": "link", "nodes": ["b", "d"], "summary": "the link b – d, found in 3 round(s)",
                         "rounds": 4}},
}


def test_the_text_names_each_failed_node_with_its_check_and_figure(capsys):
    print_burn_in(REPORT)
    out = capsys.readouterr().out
    assert "dcgm: DCGM 4.x: memory on GPU 3: fail" in out
    assert "skipped: pod default/t-0 holds nvidia.com/gpu" in out
    assert "all-reduce: the link b – d, found in 3 round(s) (1 run(s), 4 round(s))" in out
    assert "1 node(s) failed: a" in out
    assert "through layer 3: 460.0–470.5 GB/s (2 pair(s))" in out and "across spines: did not finish" in out
    assert failures(REPORT) == ["a: dcgm failed: DCGM 4.x: memory on GPU 3: fail"]


def test_a_bad_level_is_refused_before_the_cluster_is_looked_up():
    with pytest.raises(UsageError, match="unknown burn-in level 'xlong'") as info:
        burn_in_command.run("no-such-cluster", None, "xlong", 1.0)
    assert info.value.exit_code == 2
