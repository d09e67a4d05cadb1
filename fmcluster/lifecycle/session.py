"""What every lifecycle verb shares: the session (spec, region, state, AWS context), the backend, records."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import yaml

from fmcluster import aws, catalog
from fmcluster.engine import Context, Engine, Resource
from fmcluster.errors import Aborted, FmclusterError, UsageError
from fmcluster.network import Placement
from fmcluster.spec.models import Spec, max_nodes
from fmcluster.state import ClusterRecord, StateStore


class ClusterNotFound(FmclusterError):
    exit_code = 1


class PreflightFailed(FmclusterError):
    exit_code = 1


def backend_for(name: str) -> ModuleType:
    if name == "pcs":
        from fmcluster.backends import pcs

        return pcs
    from fmcluster.extras import require

    require("parallelcluster", "a ParallelCluster cluster")
    from fmcluster.backends import parallelcluster

    return parallelcluster


@dataclass
class Session:
    """Everything one lifecycle command works with."""

    spec: Spec
    spec_file: str
    region: str
    store: StateStore
    ctx: Context
    backend_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, spec: Spec, spec_file: str, store: StateStore | None = None) -> Session:
        region = aws.region_for(spec.region)
        if region != spec.region:
            spec = spec.model_copy(update={"region": region})
        ctx = Context(cluster=spec.name, region=region, client=lambda service: aws.client(service, region))
        backend_for(spec.backend)  # a missing extra stops the command here, before any AWS call
        return cls(spec, spec_file, region, store or StateStore(), ctx)

    @property
    def backend(self) -> ModuleType:
        return backend_for(self.spec.backend)

    def generation(self) -> str:
        record = self.store.cluster(self.spec.name, self.region)
        return str(int(record.created_at)) if record else "0"

    def placement(self) -> Placement:
        for record in self.store.resources(self.spec.name, self.region):
            if record.kind == "placement":
                return Placement(**record.outputs)
        from fmcluster.network import resolve_placement

        placement = resolve_placement(self.spec, self.ctx.client("ec2"))
        self.store.record_resource(self.spec.name, self.region, "placement", "network", placement.subnet_id,
                                   "resolved", placement.__dict__)
        return placement

    def resources(self) -> list[Resource]:
        extra = {}
        if self.spec.backend == "pcs" and self.spec.image is None:
            extra["ami_ids"] = self.backend.find_sample_amis(self.spec, self.ctx.client("ec2"))
        return self.backend.build_resources(self.spec, self.placement(), self.generation(), self.spec_file,
                                            **extra, **self.backend_options)


def load_record(store: StateStore, name: str, region: str | None) -> ClusterRecord:
    record = store.cluster(name, region)
    if record is None:
        known = [f"{c.name} ({c.region})" for c in store.clusters()]
        listing = ", ".join(known) if known else "none yet — create one with `fmcluster create SPEC`"
        raise ClusterNotFound(f"no cluster named '{name}' is known here. Known clusters: {listing}")
    return record


def spec_of(record: ClusterRecord) -> Spec:
    return Spec.model_validate(yaml.safe_load(record.spec))


def spec_text(spec: Spec) -> str:
    return yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True), sort_keys=False)


def usd_per_hour(spec: Spec) -> float | None:
    total = 0.0
    for queue in spec.queues:
        facts = catalog.instance(queue.instance_type)
        if facts is None or facts.usd_per_hour is None:
            continue
        total += facts.usd_per_hour * max_nodes(queue)
    return total or None


def confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question} — no terminal to ask on; re-run with --yes to go ahead")
    import typer

    if not typer.confirm(question, default=False, err=True):
        raise Aborted("aborted")


def run_engine(session: Session, title: str, action: str, resources: list[Resource], **kwargs: Any) -> None:
    from fmcluster.progress import ProgressView

    with ProgressView(title, [r.name for r in resources]) as view:
        engine = Engine(session.ctx, session.store, emit=view.handle)
        getattr(engine, action)(resources, **kwargs)


def dump_json(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, default=str)
