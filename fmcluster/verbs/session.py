"""What one command works with: the spec (when there is one), the region, the state store, the AWS context
and the backend. The backends never see it: their methods get its :attr:`Session.context` (a BackendContext).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fmcluster.aws.placement import Placement, resolve_placement
from fmcluster.backends import registry
from fmcluster.backends.context import BackendContext
from fmcluster.connection import aws
from fmcluster.engine import Context, Resource
from fmcluster.engine.graph import wire
from fmcluster.output import ui
from fmcluster.spec.models import Spec
from fmcluster.state.store import ClusterRecord, StateStore

if TYPE_CHECKING:
    from fmcluster.backends.protocol import Backend


def _warn(message: str) -> None:
    ui.warning(message)


@dataclass
class Session:
    name: str
    region: str
    backend_name: str
    store: StateStore
    ctx: Context
    spec: Spec | None = None
    spec_file: str = "spec.yaml"
    record: ClusterRecord | None = None
    # Where what the user should know (AWS's caution about sample AMIs) goes; backends never print.
    warn: Callable[[str], None] = field(default=lambda message: _warn(message), repr=False)
    _backend: Any = field(default=None, repr=False)
    # The budget guard's moment this command replaced, when it moved it (fmcluster.verbs.guard_plan.decided).
    guard_moved_from: Any = field(default=None, repr=False)
    guard_pending: Any = field(default=None, repr=False)

    @classmethod
    def open(cls, spec: Spec, spec_file: str = "spec.yaml", store: StateStore | None = None) -> Session:
        """A session for a spec: the region from --region, the spec, or the environment."""
        region = aws.region_for(spec.region)
        if region != spec.region:
            spec = spec.model_copy(update={"region": region})
        store = store or StateStore()
        session = cls._new(spec.name, region, spec.backend, store, store.cluster(spec.name, region))
        session.spec = spec
        session.spec_file = spec_file
        return session

    @classmethod
    def for_record(cls, record: ClusterRecord, store: StateStore, spec: Spec | None) -> Session:
        session = cls._new(record.name, record.region, record.backend, store, record)
        session.spec = spec
        session.spec_file = record.spec_path or "spec.yaml"
        return session

    @classmethod
    def bare(cls, name: str, region: str, backend: str, store: StateStore) -> Session:
        """A session with no spec and no record: enough to find and delete what AWS holds by its tags."""
        return cls._new(name, region, backend, store, None)

    @classmethod
    def _new(cls, name: str, region: str, backend: str, store: StateStore, record: ClusterRecord | None) -> Session:
        ctx = Context(cluster=name, region=region, client=lambda service: aws.client(service, region),
                      cluster_id=record.cluster_id if record else "")
        ctx.publish({"fmcluster.cluster_id": ctx.cluster_id})
        return cls(name=name, region=region, backend_name=backend, store=store, ctx=ctx, record=record)

    @property
    def backend(self) -> Backend:
        """The cluster's backend, its lifecycle loaded: exit 2 here naming the extra it needs when missing."""
        if self._backend is None:
            backend = registry.get(self.backend_name)
            backend.lifecycle()
            self._backend = backend
        return self._backend

    @property
    def context(self) -> BackendContext:
        """What the backend's methods get in place of the session: no state store; what the backend records
        comes back here (:meth:`_record`), and a reading command (status) records nothing."""
        return BackendContext(name=self.name, region=self.region, ctx=self.ctx, spec=self.spec,
                              spec_file=self.spec_file, warn=self.warn, placement_of=self.placement,
                              recall=self._recall, record=self._record, queues_waiting=self._queues_waiting,
                              stack_kinds=frozenset(p.stack_kind for p in registry.profiles() if p.stack_kind))

    def _recall(self, kind: str, key: str) -> dict[str, Any] | None:
        record = self.store.resource(self.name, self.region, kind, key)
        return None if record is None else dict(record.outputs)

    def _record(self, kind: str, key: str, physical_id: str | None, outputs: dict[str, Any]) -> None:
        if not self.store.readonly:  # a reading command (status) decides again next time
            self.store.record_resource(self.name, self.region, kind, key, physical_id, "resolved", outputs)

    def _queues_waiting(self) -> set[str]:
        from fmcluster.aws.cluster_blocks import queues_waiting

        return queues_waiting(self.ctx, self.spec)

    def require_spec(self) -> Spec:
        if self.spec is None:
            raise RuntimeError("this step needs the cluster's spec")
        return self.spec

    def set_cluster_id(self, cluster_id: str) -> None:
        self.ctx.cluster_id = cluster_id
        self.ctx.publish({"fmcluster.cluster_id": cluster_id})

    def placement(self) -> Placement:
        """Where the nodes go, decided once and recorded (a later default-VPC choice must not move them)."""
        record = self.store.resource(self.name, self.region, "placement", "network")
        if record is not None:
            outputs = dict(record.outputs)
            outputs["vpc_cidrs"] = tuple(outputs.get("vpc_cidrs") or ())
            placement = Placement(**outputs)
        else:
            placement = resolve_placement(self.require_spec(), self.ctx.client("ec2"),
                                          lambda: self.ctx.client("resource-groups"))
            if self.store.readonly:  # a reading command (status) resolves it again next time
                self.ctx.publish(placement.values())
                return placement
            self.store.record_resource(self.name, self.region, "placement", "network", placement.subnet_id,
                                       "resolved", {**placement.__dict__, "vpc_cidrs": list(placement.vpc_cidrs)})
        self.ctx.publish(placement.values())
        return placement

    def resources(self, options: dict[str, Any] | None = None) -> list[Resource]:
        """The spec's resources, wired into their graph (checked before any AWS write)."""
        made = self.backend.resources(self.context, options)
        if self.spec is not None and self.spec.budget is not None:
            from fmcluster.verbs.guard_plan import guard_resources

            made = [*made, *guard_resources(self)]
        return wire(made)

    def hint(self, command: str) -> str:
        """``command`` (``fmcluster …``) as the user would re-type it: with ``--sandbox`` or
        ``--endpoint-url`` when the cluster lives there."""
        return aws.command_hint(command, self.record.endpoint_url if self.record else aws.target_label())
