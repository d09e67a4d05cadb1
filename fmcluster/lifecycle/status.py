"""``fmcluster status``: every known cluster from the state, or one cluster live from AWS."""

from __future__ import annotations

from typing import Any

from fmcluster import aws
from fmcluster.lifecycle.session import Session, load_record, spec_of, usd_per_hour
from fmcluster.spec.models import max_nodes
from fmcluster.state import StateStore


def status(name: str | None, as_json: bool, refresh: bool) -> dict[str, Any] | list[dict[str, Any]]:
    store = StateStore()
    if name is None:
        rows = []
        for record in store.clusters():
            spec = spec_of(record)
            rows.append({"name": record.name, "backend": record.backend, "region": record.region,
                         "status": record.status, "queues": [q.name for q in spec.queues],
                         "nodes_max": sum(max_nodes(q) for q in spec.queues), "usd_per_hour": usd_per_hour(spec)})
        return rows
    record = load_record(store, name, aws.target().region)
    session = Session.open(spec_of(record), record.spec_path or "spec.yaml", store)
    report = session.backend.describe(session)
    if refresh:
        for item in report["resources"]:
            store.record_resource(name, session.region, item["type"], item.get("key", ""), item["id"], item["status"])
        store.set_cluster_status(name, session.region, report["status"])
    return report
