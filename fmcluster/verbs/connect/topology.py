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

Nodes and instances are sorted by id, queues in ``describe``'s order (then any other group it lists).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fmcluster.aws.topology import InstancePlace, instance_topology
from fmcluster.connection import aws
from fmcluster.engine import reads
from fmcluster.state.store import StateStore
from fmcluster.verbs.lifecycle.common import open_cluster
from fmcluster.verbs.lifecycle.status import check_reachable

#: Instances that no longer run and never will again: not part of the tree, nor listed.
GONE_STATES = frozenset({"shutting-down", "terminated"})


def no_topology_reason(instance_type: str, state: str) -> str:
    if state != "running":
        return f"{state}: AWS gives a network topology for running instances only"
    return f"AWS publishes no network topology for {instance_type}"


def _node(node_id: str, layer: int, zone: str) -> dict[str, Any]:
    return {"network_node": node_id, "layer": layer, "zone": zone, "instance_count": 0, "children": [],
            "instances": []}


def _sorted(nodes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for key in sorted(nodes):
        node = nodes[key]
        node["children"] = _sorted(node.pop("_below"))
        node["instances"].sort(key=lambda i: i["id"])
        out.append(node)
    return out


def queue_tree(instances: Sequence[Mapping[str, Any]], places: Mapping[str, InstancePlace]) -> dict[str, Any]:
    """One queue's tree, pure: ``instances`` as ``describe`` lists them (``id``, ``instance_type``, ``state``),
    ``places`` what AWS said of them. Returns ``{"instance_count", "tree", "without_topology"}`` (module docstring)."""
    top: dict[str, dict[str, Any]] = {}
    without: list[dict[str, Any]] = []
    for instance in instances:
        place = places.get(instance["id"])
        if place is None or not place.network_nodes:
            without.append({"id": instance["id"], "instance_type": instance.get("instance_type"),
                            "state": instance.get("state"),
                            "reason": no_topology_reason(str(instance.get("instance_type")),
                                                         str(instance.get("state")))})
            continue
        level, node = top, None
        for layer, node_id in enumerate(place.network_nodes, start=1):
            node = level.get(node_id)
            if node is None:
                node = level[node_id] = _node(node_id, layer, place.zone) | {"_below": {}}
            node["instance_count"] += 1
            level = node["_below"]
        assert node is not None
        node["instances"].append({"id": place.instance_id, "instance_type": place.instance_type,
                                  "capacity_block_id": place.capacity_block_id, "group_name": place.group_name})
    return {"instance_count": len(instances), "tree": _sorted(top),
            "without_topology": sorted(without, key=lambda i: i["id"])}


def build(report: Mapping[str, Any], places: Mapping[str, InstancePlace]) -> dict[str, Any]:
    """The whole answer, pure: ``report`` is a backend's ``describe`` (its ``queues`` and ``instances``)."""
    live = [i for i in report.get("instances") or [] if i.get("state") not in GONE_STATES]
    names = [q["name"] for q in report.get("queues") or []]
    names += [n for n in dict.fromkeys(str(i.get("queue")) for i in live) if n not in names]
    queues = [{"name": name, **queue_tree([i for i in live if str(i.get("queue")) == name], places)}
              for name in names]
    return {"name": report.get("name"), "backend": report.get("backend"), "region": report.get("region"),
            "status": report.get("status"), "instance_count": len(live), "queues": queues}


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
