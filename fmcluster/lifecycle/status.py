"""``fmcluster status``: every known cluster from the state, or one cluster live from AWS."""

from __future__ import annotations

from typing import Any

from fmcluster import aws
from fmcluster.lifecycle.session import Session, load_record, spec_of, usd_per_hour
from fmcluster.spec.models import max_nodes
from fmcluster.spec.stored import UnusableRecord
from fmcluster.state import ClusterRecord, StateStore


def status(name: str | None, as_json: bool, refresh: bool) -> dict[str, Any] | list[dict[str, Any]]:
    """Reads the state read-only unless ``refresh`` writes AWS's answer back. A record whose stored spec no
    longer validates is shown with the reason (``problem``) instead of failing the command."""
    store = StateStore(readonly=not refresh)
    if name is None:
        rows = []
        for record in store.clusters():
            row = {"name": record.name, "backend": record.backend, "region": record.region,
                   "status": record.status, "queues": [], "nodes_max": None, "usd_per_hour": None,
                   "problem": record.problem}
            try:
                spec = spec_of(record)
            except UnusableRecord:
                rows.append(row)
                continue
            row.update({"queues": [q.name for q in spec.queues], "nodes_max": sum(max_nodes(q) for q in spec.queues),
                        "usd_per_hour": usd_per_hour(spec)})
            rows.append(row)
        return rows
    record = load_record(store, name, aws.target().region)
    try:
        spec = spec_of(record)
    except UnusableRecord:
        return _recorded_only(store, record)
    session = Session.open(spec, record.spec_path or "spec.yaml", store)
    report = session.backend.describe(session)
    report["problem"] = record.problem
    if refresh:
        for item in report["resources"]:
            store.record_resource(name, session.region, item["type"], item.get("key", ""), item["id"], item["status"])
        store.set_cluster_status(name, session.region, report["status"])
    return report


def _recorded_only(store: StateStore, record: ClusterRecord) -> dict[str, Any]:
    """What the state knows of a cluster whose spec cannot be read: AWS is not asked (fmcluster cannot
    rebuild the plan to know what to ask for)."""
    return {"name": record.name, "backend": record.backend, "region": record.region, "status": record.status,
            "problem": record.problem, "queues": [],
            "resources": [{"type": r.kind, "key": r.key, "id": r.id, "status": r.status}
                          for r in store.resources(record.name, record.region)]}
