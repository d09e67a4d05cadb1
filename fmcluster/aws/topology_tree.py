"""Each queue's instances placed in AWS's network tree, pure: built from a backend's ``describe`` rows and what EC2
DescribeInstanceTopology said of them (:mod:`fmcluster.aws.topology`). ``fmcluster topology`` prints the whole tree
(``build``); ``status`` shows each queue's bottom nodes and the spines it spans (``spread``).

A node's shape (``queue_tree``'s ``tree``)::

    NODE = {"network_node": "nn-…", "layer": int,                 # 1 at the top ("spine"), counting down
            "zone": str, "instance_count": int,                   # instances anywhere below this node
            "children": [NODE, ...],                              # the next layer's nodes under this one
            "instances": [{"id", "instance_type", "capacity_block_id", "group_name"}, ...]}
                                                                  # instances hanging off this node (bottom nodes)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fmcluster.aws.topology import InstancePlace

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


def _bottoms(node: Mapping[str, Any], above: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    here = (*above, node["network_node"])
    found = [{"bottom_node": node["network_node"], "path": list(here),
              "instances": [i["id"] for i in node["instances"]]}] if node["instances"] else []
    for child in node["children"]:
        found += _bottoms(child, here)
    return found


def _ultraservers(node: Mapping[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for instance in node["instances"]:
        if instance.get("capacity_block_id"):
            found.setdefault(instance["capacity_block_id"], []).append(instance["id"])
    for child in node["children"]:
        for domain, ids in _ultraservers(child).items():
            found.setdefault(domain, []).extend(ids)
    return found


def spread(tree: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A queue's tree (``queue_tree``'s ``tree``) as ``status`` shows it: ``node_count`` (instances placed),
    ``spine_count`` (top-layer nodes it spans), ``groups``, one per bottom node (the node an instance hangs off,
    the last of its ``NetworkNodes``) with its ``path`` top-down and its ``instances``, in the tree's order, and
    ``ultraservers``: the instances per UltraServer domain, by the ``CapacityBlockId`` EC2 gives UltraServer
    instances alone ("identifies instances within the UltraServer domain", EC2 API reference, InstanceTopology);
    empty for every other type."""
    groups = [group for spine in tree for group in _bottoms(spine)]
    domains: dict[str, list[str]] = {}
    for spine in tree:
        for domain, ids in _ultraservers(spine).items():
            domains.setdefault(domain, []).extend(ids)
    return {"node_count": sum(len(g["instances"]) for g in groups), "spine_count": len(tree), "groups": groups,
            "ultraservers": [{"capacity_block_id": domain, "instances": sorted(ids)}
                             for domain, ids in sorted(domains.items())]}
