"""The burn-in report (``fmcluster burn-in --json``, docs/burn-in-json.md), the same for every backend: per node its
state and checks, the NCCL runs and their finding, and whether everything passed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fmcluster.backends.burn_in.judge import NodeVerdict
from fmcluster.backends.burn_in.rounds import NcclReport
from fmcluster.backends.smoke.checks import Check, Expectations


def node_entry(node: str, state: str, checks: Sequence[Check], detail: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"node": node, "state": state, "checks": [c.to_json() for c in checks]}
    if detail:
        entry["detail"] = detail
    return entry


def build(cluster: str, expect: Expectations, level: str, verdicts: Sequence[NodeVerdict],
          busy: dict[str, str], unanswered: dict[str, str], nccl: NcclReport | None, nccl_note: str,
          extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """``busy``: node -> what runs there (skipped); ``unanswered``: node -> how the check job ended, for the nodes it
    brought nothing back from (failed); ``nccl``: None when no NCCL part ran (``nccl_note`` says why)."""
    suspects = set(nccl.suspects) if nccl is not None and not nccl.passed else set()
    nodes = []
    for verdict in verdicts:
        checks = list(verdict.checks)
        if verdict.node in suspects:
            checks.append(Check("nccl", "failed", _blame(nccl, verdict.node)))
        state = "passed" if verdict.passed and verdict.node not in suspects else "failed"
        nodes.append(node_entry(verdict.node, state, checks))
    for node, ended in unanswered.items():
        nodes.append(node_entry(node, "failed", [Check("job", "failed", "the check job brought nothing back from "
                                                                         f"this node ({ended})")]))
    for node, why in busy.items():
        nodes.append(node_entry(node, "busy", [], f"skipped: {why}"))
    nodes.sort(key=lambda n: n["node"])
    passed = bool(verdicts) and all(n["state"] != "failed" for n in nodes) and (nccl is None or nccl.passed)
    result: dict[str, Any] = {
        "cluster": cluster, "queue": expect.queue.name, "instance_type": expect.queue.instance_type, "level": level,
        "nodes": nodes,
        "nccl": {**nccl.to_json(), "note": nccl_note} if nccl is not None else {"runs": [], "finding": None,
                                                                                "rounds": 0, "note": nccl_note},
        "passed": passed}
    result.update(extra or {})
    return result


def _blame(nccl: NcclReport | None, node: str) -> str:
    finding = nccl.finding_json() if nccl is not None else None
    return finding["summary"] if finding else f"{node} was in a slow all-reduce"


def failures(report: dict[str, Any]) -> list[str]:
    """One line per failed node: its failed checks with their figures (the text the command prints)."""
    lines = []
    for node in report["nodes"]:
        if node["state"] != "failed":
            continue
        bad = [f"{c['name']} {c['status']}: {c['detail']}" for c in node["checks"]
               if c["status"] not in ("passed", "skipped")]
        lines.append(f"{node['node']}: " + "; ".join(bad))
    return lines
