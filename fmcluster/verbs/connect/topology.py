"""``fmcluster topology NAME``: each queue's instances placed in AWS's network tree, read from EC2
DescribeInstanceTopology (:mod:`fmcluster.aws.topology`) for the instances the backend's ``describe`` lists. The
same on every backend: no backend method beyond ``describe``.

The JSON shape (``topology NAME --json``), stable::

    {"name": str, "backend": str, "region": str, "status": str,   # status: describe's, in its one vocabulary
     "instance_count": int,                                       # instances listed (running or not)
     "queues": [
       {"name": str,
        "instance_count": int,                                    # this queue's instances, placed or not
        "tree": [NODE, ...],                                      # layer-1 (top, "spine") nodes
        "without_topology": [{"id", "instance_type", "state", "reason"}, ...]}]}

    NODE = {"network_node": "nn-…", "layer": int,                 # 1 at the top, counting down
            "zone": str,                                          # the Availability Zone of the instances below
            "instance_count": int,                                # instances anywhere below this node
            "children": [NODE, ...],                              # the next layer's nodes under this one
            "instances": [{"id", "instance_type", "capacity_block_id", "group_name"}, ...]}
                                                                  # instances hanging off this node (bottom nodes)

Nodes and instances are sorted by id, queues in ``describe``'s order (then any other group it lists). The tree is
built by :mod:`fmcluster.aws.topology_tree`, which ``status`` shares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fmcluster.aws.topology import instance_topology
from fmcluster.aws.topology_tree import build
from fmcluster.connection import aws
from fmcluster.engine import reads
from fmcluster.state.store import StateStore
from fmcluster.verbs.lifecycle.common import open_cluster
from fmcluster.verbs.lifecycle.status import check_reachable


@aws.read_only()
def topology(name: str) -> dict[str, Any]:
    """Read the cluster (``describe``), then where its running instances sit (DescribeInstanceTopology)."""
    store = StateStore(readonly=True)
    session = open_cluster(store, name)
    assert session.record is not None
    check_reachable(session.record)
    with reads.reading(session.ctx):
        report = session.backend.describe(session.context)
    running = [i["id"] for i in report.get("instances") or [] if i.get("state") == "running"]
    places = instance_topology(session.ctx.client("ec2"), running) if running else {}
    return build(report, places)


def _label(node: Mapping[str, Any]) -> str:
    if node["layer"] == 1:
        return "spine"
    return "bottom node" if node["instances"] and not node["children"] else f"layer {node['layer']}"


def _count(n: int) -> str:
    return f"{n} instance" + ("" if n == 1 else "s")


def _lines(node: Mapping[str, Any], depth: int) -> list[str]:
    pad = "  " * depth
    zone = f"{node['zone']}, " if node["layer"] == 1 and node["zone"] else ""
    lines = [f"{pad}{_label(node)} {node['network_node']} ({zone}{_count(node['instance_count'])})"]
    for child in node["children"]:
        lines += _lines(child, depth + 1)
    for instance in node["instances"]:
        extra = f", UltraServer block {instance['capacity_block_id']}" if instance.get("capacity_block_id") else ""
        lines.append(f"{pad}  {instance['id']} ({instance['instance_type']}{extra})")
    return lines


def text(answer: Mapping[str, Any]) -> str:
    """The indented tree per queue, for the terminal."""
    head = f"{answer['name']} ({answer['backend']}, {answer['region']}, {answer['status']})"
    if not answer["instance_count"]:
        return f"{head}: no instances yet, so nothing is placed in AWS's network\n"
    lines = [head]
    for queue in answer["queues"]:
        placed = queue["instance_count"] - len(queue["without_topology"])
        lines.append(f"queue {queue['name']}: {_count(queue['instance_count'])}, {placed} placed")
        for node in queue["tree"]:
            lines += _lines(node, 1)
        for instance in queue["without_topology"]:
            lines.append(f"  {instance['id']} ({instance['instance_type']}): {instance['reason']}")
    return "\n".join(lines) + "\n"
