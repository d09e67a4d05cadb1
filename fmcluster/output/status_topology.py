"""The lines ``status`` prints for its queues' ``topology`` (``status --json``): per queue a count, then one line per
spine listing the bottom network nodes under it with their node counts, and for UltraServer queues one line of their
UltraServers (EC2's ``CapacityBlockId``) with their node counts, so a 64-node queue stays a few lines; the instance
ids and the middle layers are in ``--json`` and ``fmcluster topology NAME``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Spines per queue, and bottom nodes per spine, named before the rest is counted: a few lines, whatever the size.
MOST_SHOWN = 8


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _queue_lines(name: str, topology: Mapping[str, Any]) -> list[str]:
    head = (f"  {name}: {_plural(topology['node_count'], 'node')} under "
            f"{_plural(topology['spine_count'], 'spine')}")
    if topology["unplaced"]:
        head += f" ({_plural(len(topology['unplaced']), 'running node')} not in AWS's answer)"
    by_spine: dict[str, list[str]] = {}
    for group in topology["groups"]:
        by_spine.setdefault(group["path"][0], []).append(f"{group['bottom_node']} ({len(group['instances'])})")
    spines = list(by_spine.items())
    lines = [f"    spine {spine}: {_some(bottoms, 'bottom node')}" for spine, bottoms in spines[:MOST_SHOWN]]
    if len(by_spine) > MOST_SHOWN:
        lines.append(f"    … and {_plural(len(by_spine) - MOST_SHOWN, 'more spine')}")
    domains = topology.get("ultraservers") or []
    if domains:
        lines.append(f"    {_plural(len(domains), 'UltraServer')}: "
                     + _some([f"{d['capacity_block_id']} ({len(d['instances'])})" for d in domains], "UltraServer"))
    return [head, *lines]


def _some(items: list[str], word: str) -> str:
    shown = " ".join(items[:MOST_SHOWN])
    return shown + (f" … and {_plural(len(items) - MOST_SHOWN, f'more {word}')}" if len(items) > MOST_SHOWN else "")


def topology_lines(queues: Sequence[Mapping[str, Any]], cluster: str) -> tuple[list[str], list[str]]:
    """(lines, warnings) for the queues that have a ``topology``; ([], []) when none has."""
    shown = [q for q in queues if q.get("topology")]
    if not shown:
        return [], []
    unavailable = next((q["topology"]["unavailable"] for q in shown if q["topology"]["unavailable"]), None)
    if unavailable:  # one read serves every queue: one line says why it is missing
        return [f"network topology unavailable: {unavailable}"], []
    lines = ["network topology (EC2 network nodes: bottom node (nodes) per spine; `fmcluster topology "
             f"{cluster}` shows the tree):"]
    for queue in shown:
        lines += _queue_lines(queue["name"], queue["topology"])
    return lines, [q["topology"]["warning"] for q in shown if q["topology"]["warning"]]
