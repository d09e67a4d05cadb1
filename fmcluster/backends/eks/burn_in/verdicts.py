"""What ``status`` shows of the burn-in gate on EKS, per node (issue 37 item 3): passed, failed (its checks with their
figures), pending, and the instances the gate replaced.

Everything is read back from where the gate wrote it, never remembered by fmcluster:

* a Node's verdict: its ``fmcluster.io/burn-in`` label and pending taint
  (:mod:`fmcluster.backends.eks.nodes.burn_in_hold`), and for a failed node the figures in the annotation
  :data:`DETAIL_ANNOTATION` (a label value holds 63 characters; an annotation holds the whole line);
* a replaced node: the gate tags an instance :data:`REPLACED_TAG` before it terminates it, and EC2 still describes a
  terminated instance, with its tags, for a while (EC2 API reference, TerminateInstances: "Terminated instances remain
  visible after termination (for approximately one hour)"); after that it is no longer shown.
"""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.nodes import burn_in_hold as hold
from fmcluster.backends.eks.nodes.ultraserver_labels import instance_of

DETAIL_ANNOTATION = "fmcluster.io/burn-in-detail"
REPLACED_TAG = "fmcluster:burn-in-replaced"
# EC2 tag values hold at most 256 Unicode characters (EC2 API reference, Tag ``Value``).
TAG_VALUE_MAX = 256
STATES = ("passed", "failed", "pending", "replaced")


def node_verdict(node: dict[str, Any]) -> dict[str, Any] | None:
    """One Node (as the API returns it): {node, instance, state, checks, detail}, or None for a node the gate does
    not hold (its queue not gated, or a node from before the gate)."""
    meta = node.get("metadata") or {}
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    spec = node.get("spec") or {}
    pending = any(t.get("key") == hold.TAINT_KEY and t.get("effect") == "NoSchedule" for t in spec.get("taints") or [])
    result = labels.get(hold.RESULT_LABEL)
    if result == hold.FAILED:
        state = "failed"
    elif pending:
        state = "pending"
    elif result == hold.PASSED:
        state = "passed"
    else:
        return None
    failed = state == "failed"
    return {"node": meta.get("name", ""), "instance": instance_of(spec.get("providerID")), "state": state,
            "checks": labels.get(hold.CHECK_LABEL) if failed else None,
            "detail": notes.get(DETAIL_ANNOTATION) if failed else None}


def failed_detail(node: Any) -> str:
    """A failed Node's (lightkube) checks with their figures, as the gate noted them; the checks alone when the note
    is gone."""
    notes = (node.metadata.annotations if node.metadata else None) or {}
    return notes.get(DETAIL_ANNOTATION) or hold.failed_checks(node)


def replaced(ec2: Any, cluster: str) -> dict[str, list[dict[str, Any]]]:
    """Node group name → the instances the gate terminated that EC2 still describes: {node, instance, state
    "replaced", checks: None, detail: what they failed}."""
    filters = [{"Name": "tag:eks:cluster-name", "Values": [cluster]}, {"Name": "tag-key", "Values": [REPLACED_TAG]},
               {"Name": "instance-state-name", "Values": ["shutting-down", "terminated"]}]
    found: dict[str, list[dict[str, Any]]] = {}
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for instance in (i for r in page["Reservations"] for i in r["Instances"]):
            tags = {t["Key"]: t["Value"] for t in instance.get("Tags") or []}
            found.setdefault(tags.get("eks:nodegroup-name", ""), []).append({
                "node": instance.get("PrivateDnsName") or "", "instance": instance["InstanceId"],
                "state": "replaced", "checks": None, "detail": tags.get(REPLACED_TAG)})
    for rows in found.values():
        rows.sort(key=lambda row: row["instance"])
    return found


def summary(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """A queue's ``burn_in`` in ``status --json``: the count per state and the nodes, by name."""
    return {**{state: sum(1 for n in nodes if n["state"] == state) for state in STATES},
            "nodes": sorted(nodes, key=lambda n: (STATES.index(n["state"]), n["node"]))}


def attach(report: dict[str, Any], replaced_nodes: dict[str, list[dict[str, Any]]]) -> None:
    """Turn each queue's node verdicts (``burn_in_nodes``, as the cluster view read them) and its replaced instances
    into the queue's ``burn_in`` summary (none when the gate has judged nothing there); give each live instance row the
    state of its node (``burn_in``: passed, failed or pending)."""
    by_instance: dict[str, str] = {}
    for queue in report["queues"]:
        nodes = [*queue.pop("burn_in_nodes", []), *replaced_nodes.get(queue["name"], [])]
        if nodes:
            queue["burn_in"] = summary(nodes)
        by_instance.update({n["instance"]: n["state"] for n in nodes if n["instance"] and n["state"] != "replaced"})
    for row in report["instances"]:
        if row["id"] in by_instance:
            row["burn_in"] = by_instance[row["id"]]


def replaced_tag(detail: str) -> dict[str, str]:
    """The tag the gate puts on an instance it is about to terminate: what it failed, cut to a tag value's length."""
    return {"Key": REPLACED_TAG, "Value": (detail or "failed")[:TAG_VALUE_MAX]}
