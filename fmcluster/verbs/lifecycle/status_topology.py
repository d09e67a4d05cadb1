"""``status``'s view of AWS's network (issue 39, "see it"): per queue, its running nodes grouped by the bottom network
node they hang off, and how many spines (top-layer nodes) the queue spans, from EC2 DescribeInstanceTopology.

One read at most: only when some queue runs an instance of a type EC2 gives a topology for
(:mod:`fmcluster.catalog.network_topology`), so a cluster of other types costs no extra call. AWS refusing it
(no ec2:DescribeInstanceTopology on the credentials, throttled past the retries) leaves status as it was, with the
reason in each such queue's ``topology``.

Each queue of ``status --json`` gets ``topology``: null when none of its running instances has a topology, else::

    {"node_count": int | null,             # its running instances AWS placed (null: unavailable)
     "spine_count": int | null,            # top-layer network nodes they hang under (null: unavailable)
     "groups": [{"bottom_node": "nn-…",    # the node an instance hangs off (the last of its NetworkNodes)
                 "path": ["nn-…", ...],    # spine → … → bottom node, as EC2 lists them
                 "instances": ["i-…", ...]}],
     "ultraservers": [{"capacity_block_id": "cb-…",   # an UltraServer domain, as EC2 names it (UltraServer
                       "instances": ["i-…", ...]}],     # types only: empty for every other type)
     "unplaced": ["i-…", ...],             # running, of a topology type, absent from AWS's answer
     "warning": str | null,                # the queue spans more than one spine
     "unavailable": str | null}            # why AWS's answer is missing
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fmcluster.aws.topology import instance_topology
from fmcluster.aws.topology_tree import queue_tree, spread
from fmcluster.catalog.network_topology import network_layers
from fmcluster.errors import AwsError


def spine_warning(queue: str, node_count: int, spine_count: int) -> str | None:
    """The line said when a queue's nodes hang under more than one spine: a fact of AWS's answer."""
    if spine_count <= 1:
        return None
    return (f"queue {queue}: {node_count} nodes under {spine_count} spines; its all-reduce crosses the top network "
            "layer")


def _placeable(report: Mapping[str, Any], queues: set[str]) -> list[Mapping[str, Any]]:
    """The queues' running instances of a type EC2 gives a topology for: the only ones worth asking about."""
    return [i for i in report.get("instances") or [] if i.get("state") == "running"
            and str(i.get("queue")) in queues and network_layers(str(i.get("instance_type"))) > 0]


def add_queue_topology(report: dict[str, Any], ec2: Callable[[], Any]) -> None:
    """Set ``topology`` on each of ``report``'s queues (a backend's ``describe``), reading AWS through ``ec2`` (a
    client factory, called only when there is something to ask)."""
    queues = report.get("queues") or []
    asked = _placeable(report, {str(q["name"]) for q in queues})
    unavailable = None
    places = {}
    if asked:
        try:
            places = instance_topology(ec2(), [i["id"] for i in asked])
        except AwsError as exc:  # status still reports the cluster; the topology says why it is missing
            unavailable = str(exc).splitlines()[0]
    for queue in queues:
        mine = [i for i in asked if str(i.get("queue")) == queue["name"]]
        if not mine:
            queue["topology"] = None
        elif unavailable:
            queue["topology"] = {"node_count": None, "spine_count": None, "groups": [], "ultraservers": [],
                                 "unplaced": [], "warning": None, "unavailable": unavailable}
        else:
            tree = queue_tree(mine, places)
            shown = spread(tree["tree"])
            queue["topology"] = {**shown, "unplaced": [i["id"] for i in tree["without_topology"]],
                                 "warning": spine_warning(queue["name"], shown["node_count"], shown["spine_count"]),
                                 "unavailable": None}
