"""The state of a cluster as a whole, on every backend: the rule ``status`` applies on top of what the backend
reports of its anchor (the PCS cluster, the ParallelCluster stack, the EKS cluster) and the anchor's members.

A backend's own word covers the parts AWS groups under the anchor; it cannot see a cluster that is half made (an
EKS cluster with no node groups after a create was killed), the remains of one whose anchor is gone (a network
with its NAT gateway, still billing), or a destroy that stopped half way. These rules can, from four facts:
what the backend reports, what AWS holds tagged for the cluster, which parts of the spec AWS lacks, and what the
state file and the cluster's lock say fmcluster is doing. Pure functions: the README's table says the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The vocabulary of ``status``: the backends' common one, plus INCOMPLETE (parts of the spec missing, and no
# fmcluster command making them) and STORAGE_KEPT (what `destroy --keep-storage` leaves).
STATES = ("CREATING", "ACTIVE", "UPDATING", "DELETING", "FAILED", "INCOMPLETE", "STORAGE_KEPT", "NOT_FOUND")
# What ``destroy`` writes to the state file once it starts, and when it stops with something left.
DESTROY_RECORDED = ("DELETING", "DELETE_INCOMPLETE")
# A node group or fleet at rest: no scaling or update of its own under way (EKS ``ACTIVE``/``DEGRADED``, PCS
# ``ACTIVE``, ParallelCluster's compute fleet ``RUNNING``).
AT_REST = ("ACTIVE", "DEGRADED", "RUNNING")
# Resource kinds of every backend that bill by the hour while they exist, whatever their state (a file system);
# a backend adds its own (``BackendProfile.billing_kinds``).
BILLING_KINDS = frozenset({"fsx_lustre", "fsx_openzfs", "efs"})
# Missing parts named one by one up to this many per kind; beyond, counted.
NAMED_PER_KIND = 6


@dataclass(frozen=True)
class Facts:
    """What the rule reads. ``anchor``: the backend's status of the anchor and its members (common vocabulary);
    ``remains``: how many resources AWS holds tagged for the cluster (the anchor included); ``missing``: the
    spec's resources AWS lacks (``kind:key``), None when that is not known (no spec, or AWS not fully read);
    ``recorded``: the state file's status of the cluster (None without a record); ``running``: the fmcluster
    command holding the cluster's lock now (``fmcluster destroy NAME``), None when none does."""

    anchor: str
    remains: int
    missing: list[str] | None = None
    recorded: str | None = None
    running: str | None = None


def _verb(running: str | None) -> str:
    words = (running or "").split()
    return words[1] if len(words) > 1 and words[0] == "fmcluster" else (words[0] if words else "")


def overall(facts: Facts) -> tuple[str, str]:
    """The cluster's state and why, one line; the first rule that holds wins."""
    verb = _verb(facts.running)
    if facts.anchor == "NOT_FOUND" and facts.remains == 0:
        return "NOT_FOUND", "AWS holds nothing tagged for it"
    if facts.anchor == "DELETING":
        return "DELETING", "AWS is deleting it"
    if verb == "destroy":
        return "DELETING", f"`{facts.running}` is running"
    if facts.recorded in DESTROY_RECORDED:
        return "DELETING", "a destroy started and did not finish; running `fmcluster destroy` again finishes it"
    if facts.anchor == "FAILED":
        return "FAILED", "AWS reports it failed"
    if facts.recorded == "STORAGE_KEPT" and facts.anchor == "NOT_FOUND":
        return "STORAGE_KEPT", "destroyed with --keep-storage: only the storage remains"
    gone = facts.anchor == "NOT_FOUND" or bool(facts.missing)
    if gone and verb in ("create", "scale"):
        return ("CREATING" if verb == "create" else "UPDATING"), f"`{facts.running}` is running"
    if facts.anchor == "NOT_FOUND":
        return "INCOMPLETE", "the cluster itself is missing, and parts of it remain in AWS"
    if facts.missing:
        return "INCOMPLETE", f"{len(facts.missing)} part(s) of the spec missing in AWS"
    return facts.anchor, "as AWS reports it"


def missing_parts(drift: list[dict[str, Any]] | None, pseudo_kinds: frozenset[str] = frozenset()) -> list[str] | None:
    """The resources ``drift`` says AWS lacks (``kind:key``); None when the drift is not known."""
    if drift is None:
        return None
    return [d["resource"] for d in drift if d.get("actual") == "missing"
            and d["resource"].partition(":")[0] not in pseudo_kinds]


def name_missing(missing: list[str]) -> str:
    """``missing`` as one line, grouped by kind: ``launch_template: burst, system, train; subnet: 4``."""
    by_kind: dict[str, list[str]] = {}
    for resource in missing:
        kind, _, key = resource.partition(":")
        by_kind.setdefault(kind, []).append(key)
    parts = []
    for kind, keys in by_kind.items():
        keys = sorted(keys)
        shown = ", ".join(keys) if len(keys) <= NAMED_PER_KIND else \
            ", ".join(keys[:NAMED_PER_KIND]) + f" and {len(keys) - NAMED_PER_KIND} more"
        parts.append(f"{kind}: {shown}")
    return "; ".join(parts)


def shortfalls(queues: list[dict[str, Any]], instances: list[dict[str, Any]],
               waiting: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """A problem line for each queue (node group) at rest that runs fewer nodes than it should (EKS's desired size,
    else its minimum) with none pending to replace them: a node terminated out of band that nothing brings back.
    A queue in ``waiting`` (its Capacity Block has not begun) has no nodes yet by design: not a problem."""
    lines = []
    for queue in queues:
        if queue["name"] in waiting:
            continue
        wanted = queue["desired"] if queue.get("desired") is not None else queue.get("min")
        running = queue.get("running_instances")
        if not isinstance(wanted, int) or not isinstance(running, int) or running >= wanted:
            continue
        statuses = [s.strip() for s in str(queue.get("node_group_status") or queue.get("status") or "").split(",")]
        if not all(s in AT_REST for s in statuses):
            continue  # the group is changing: it may be launching them
        pending = sum(1 for i in instances if i.get("queue") == queue["name"] and i.get("state") == "pending")
        if pending:
            continue
        lines.append(f"queue {queue['name']}: {running} running of {wanted} wanted, and none is launching "
                     f"(a node terminated outside fmcluster?)")
    return lines


def billing_line(report: dict[str, Any], backend_kinds: frozenset[str] = frozenset()) -> str | None:
    """What the remains of a cluster that is not whole cost now, as ``status`` computed it (``usd_per_hour_now``),
    with the resources that bill by the hour on their own (``backend_kinds``: the cluster's backend's own kinds
    that do); None when nothing bills."""
    per_hour = report.get("usd_per_hour_now") or 0.0
    billing = [f"{r['type']} {r['id']}" for r in report.get("resources") or [] if _bills(r, backend_kinds)]
    unpriced = report.get("cost_unpriced_now") or []
    if not per_hour and not billing and not unpriced:
        return None
    # What bills with no bundled price is named beside the figure, never silently left out of it.
    besides = f", plus {', '.join(unpriced)} (no bundled price)" if unpriced else ""
    return (f"still billing: ${per_hour:,.4f}/hour now{besides}" + (f" ({', '.join(billing)})" if billing else "")
            + "; `fmcluster destroy` stops it")


def _bills(resource: dict[str, Any], backend_kinds: frozenset[str]) -> bool:
    """Whether a reported resource bills by the hour while it exists (a NAT gateway, a file system, a backend's
    own kind such as a managed control plane, a node that runs), as AWS's pricing pages for each say."""
    kind, state = resource.get("type"), str(resource.get("status") or "").lower()
    if kind == "nat_gateway":
        return state in ("pending", "available")
    if kind == "instance":
        return state in ("pending", "running")
    return kind in BILLING_KINDS or kind in backend_kinds
