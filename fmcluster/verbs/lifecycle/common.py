"""What the lifecycle verbs share: finding a cluster, asking the user, running the engine with a live view,
and saying truthfully what exists after a walk."""

from __future__ import annotations

import json
from typing import Any

import yaml

from fmcluster.connection import aws
from fmcluster.engine import Engine, Resource
from fmcluster.errors import FmclusterError
from fmcluster.output.progress import ProgressView
from fmcluster.spec.models import Spec
from fmcluster.spec.stored import UnusableRecord, stored_spec_problem, usable_spec
from fmcluster.state.store import ClusterRecord, StateStore
from fmcluster.verbs.session import Session

# Records the engine keeps that are not AWS resources (decisions made once and remembered).
PSEUDO_KINDS = frozenset({"placement", "images", "guard"})


class ClusterNotFound(FmclusterError):
    exit_code = 1


class PreflightFailed(FmclusterError):
    exit_code = 1


def spec_of(record: ClusterRecord) -> tuple[Spec | None, str]:
    """The record's spec and, when it breaks a rule (one added since it was saved), why; (None, why) when
    even its shape is wrong: the cluster is then handled from AWS alone (status shows it, destroy works)."""
    try:
        return usable_spec(record.spec, record.name), stored_spec_problem(record.spec) or ""
    except UnusableRecord as exc:
        return None, str(exc)


def spec_text(spec: Spec) -> str:
    return yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True), sort_keys=False)


def known_clusters(store: StateStore) -> str:
    known = [f"{c.name} ({c.region})" for c in store.clusters()]
    return ", ".join(known) if known else "none yet — create one with `fmcluster create SPEC`"


def open_cluster(store: StateStore, name: str) -> Session:
    """The session of a recorded cluster (its spec may be degraded: see :func:`spec_of`)."""
    record = store.cluster(name, aws.target().region)
    if record is None:
        raise ClusterNotFound(f"no cluster named '{name}' is known here. Known clusters: {known_clusters(store)}")
    spec, _ = spec_of(record)
    return Session.for_record(record, store, spec)


def run_engine(session: Session, title: str, action: str, resources: list[Resource], **kwargs: Any) -> None:
    names = [r.name for r in [*kwargs.get("delete_first", ()), *resources]]
    with ProgressView(title, list(dict.fromkeys(names))) as view:
        engine = Engine(session.ctx, session.store, emit=view.handle)
        getattr(engine, action)(resources, **kwargs)


def what_exists(session: Session) -> list[str]:
    """Every resource tagged for the cluster now, one line each: what a failed command leaves behind."""
    try:
        return [d.description for d in session.backend.discover(session.context)]
    except Exception as exc:  # the report of a failure must not fail itself; say what could not be read
        return [f"(could not list what exists: {exc})"]


def dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str)
