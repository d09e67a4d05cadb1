"""The burn-in gate of one queue as an engine resource, so that ``create`` runs it in its walk after the queue's
node group (the reference to its ARN is the graph's edge) and the cluster software the check needs (the device
plugins, the MPI Operator, the scheduler: edges the backend adds), and ``diff``/``create`` show it as one step per
queue (:mod:`.gate` does the work; the shape of :mod:`fmcluster.backends.eks.nodes.ultraserver_resource`).

Its desired state: no node of the node group carries the pending taint without a verdict, and the queue has its
node count (min nodes) of passed nodes. Reading it counts the group's Nodes by their taint and labels; creating or
updating it starts the gate in a thread and returns at once, and the walk's polls of :meth:`BurnInGate.read` show
its progress line by line (the engine's waits, as every other step's). A gate that ends short of the node count
reads ``failed``: the walk fails the step, ``create`` exits 1 naming the nodes and their checks, and nothing is
torn down; the next ``create`` tests what is still pending (a replacement a user made, a node that came late).
Deleting it does nothing: the taint and labels go with their nodes.
"""

from __future__ import annotations

import threading
from typing import Any

from fmcluster.backends.eks.nodes import burn_in_hold as hold
from fmcluster.engine import AttributeChange, Context, Observed, Resource
from fmcluster.render.documents import Document
from fmcluster.spec.burn_in import burn_in
from fmcluster.spec.models import Queue, Spec, min_nodes


class BurnInGate(Resource):
    kind = "burn_in_gate"
    teardown_rank = 5  # nothing to delete: first, and at once
    settles_before_delete = False
    # A read while the gate runs returns its next line of progress from memory (no API call): read often, or the
    # lines queue up behind the walk's growing interval and the step ends long after the gate has.
    poll_s = 0.5

    def __init__(self, key: str, document: Document | None, cluster: str, spec: Spec | None = None,
                 queue: Queue | None = None):
        self.key = key
        self.document = document
        self.cluster = cluster
        self.spec, self.queue = spec, queue
        self._thread: threading.Thread | None = None
        self._lines: list[str] = []  # the gate's progress, as it said it
        self._shown = 0  # how many of them a read has returned
        self._lock = threading.Lock()
        self._verdict: Any = None  # gate.Verdict once the thread has ended
        self._error: str | None = None
        self.label = f"burn-in {key}"

    def _api(self, ctx: Context) -> Any:
        from fmcluster.backends.eks.kubernetes.access import KubeApi

        return KubeApi.of(ctx, self.cluster)

    def _level(self) -> str:
        return burn_in(self.queue).level if self.queue is not None else "?"

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        ident = f"{self.cluster}/{self.key}"
        with self._lock:
            unseen = self._lines[self._shown:self._shown + 1]
            self._shown += len(unseen)
        running = self._thread is not None and self._thread.is_alive()
        if unseen or running:
            # one line per poll, in order, each once: the walk prints a step's progress when its detail changes
            return Observed(ident, "TESTING", "pending", detail=unseen[0] if unseen else self._latest())
        if self._error is not None:
            return Observed(ident, "FAILED", "failed", detail=f"burn-in {self.key}: {self._error}")
        if self._verdict is not None:
            verdict = self._verdict
            return Observed(ident, "PASSED" if verdict.ready else "SHORT", "ready" if verdict.ready else "failed",
                            detail=verdict.summary() + ("" if verdict.ready else self._short_hint()),
                            attributes=self._attributes(verdict))
        api = self._api(ctx)
        if api is None:
            return None  # no cluster API yet: the gate is still to run
        from fmcluster.backends.eks.burn_in import gate

        verdict = gate.tally(self.key, self._needed(), gate.group_nodes(api, self.key))
        return Observed(ident, "PASSED" if verdict.ready and not verdict.pending else "HELD", "ready",
                        detail=verdict.summary(), attributes=self._attributes(verdict))

    def _short_hint(self) -> str:
        return ("; the cluster stays as it is, the failed nodes held: terminate a failed node's instance and its node "
                "group launches a replacement, which the next `fmcluster create` tests (as it tests any node still "
                f"pending); `fmcluster status {self.cluster}` shows the queue's nodes")

    def _needed(self) -> int:
        return min_nodes(self.queue) if self.queue is not None else 0

    @staticmethod
    def _attributes(verdict: Any) -> dict[str, Any]:
        return {"pending": len(verdict.pending), "passed": len(verdict.passed), "failed": dict(verdict.failed)}

    def desired(self, ctx: Context) -> dict[str, Any]:
        return {"pending": 0, "passed": self._needed()}

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        live = observed.attributes
        found = []
        if live.get("pending"):
            found.append(AttributeChange("pending", live["pending"], 0,
                                         f"burn-in {self.key}: {live['pending']} pending node(s), level "
                                         f"{self._level()}"))
        short = (live.get("passed") or 0) < self._needed()
        # short with nodes pending: testing them may reach the count; said apart when a node failed or none is pending
        if short and (live.get("failed") or not live.get("pending")):
            failed = live.get("failed") or {}
            found.append(AttributeChange("passed", live.get("passed") or 0, self._needed(),
                                         "failed: " + ", ".join(f"{n} ({c})" for n, c in sorted(failed.items()))
                                         if failed else "nodes to test as they register"))
        return found

    def _start(self, ctx: Context) -> Observed:
        api = self._api(ctx)
        if api is None or self.spec is None or self.queue is None:
            return Observed(None, "FAILED", "failed", detail=f"burn-in {self.key}: the cluster has no Kubernetes API")
        from fmcluster.backends.eks.burn_in import gate

        body = ctx.resolve(self.document.body, partial=True) if self.document is not None else {}
        nodes = body.get("nodes")
        expected = nodes if isinstance(nodes, int) else self._needed()
        self._verdict, self._error = None, None
        self._note(f"burn-in {self.key}: {expected} node(s), level {self._level()}")
        runner = gate.Gate(api, ctx.client("ec2"), self.cluster, self.spec, self.queue, expected, ctx.stop,
                           self._note)

        def work() -> None:
            try:
                self._verdict = runner.run()
            except Exception as exc:  # said by the step's failure, never a traceback
                self._error = str(exc) or type(exc).__name__

        # Not a daemon: a command leaving its walk early (Ctrl-C, the timeout, --no-wait) sets the walk's stop, and the
        # interpreter waits at exit for this thread to delete the jobs it submitted.
        self._thread = threading.Thread(target=work, name=f"burn-in-{self.key}", daemon=False)
        self._thread.start()
        return Observed(f"{self.cluster}/{self.key}", "TESTING", "pending", detail=self._latest())

    def _note(self, line: str) -> None:
        with self._lock:
            if not self._lines or self._lines[-1] != line:
                self._lines.append(line)

    def _latest(self) -> str:
        with self._lock:
            return self._lines[-1] if self._lines else ""

    def create(self, ctx: Context, token: str) -> Observed:
        return self._start(ctx)

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        return self._start(ctx)

    def delete(self, ctx: Context, observed: Observed) -> None:
        """Nothing: the taint and labels go with their nodes."""


def resources(spec: Spec) -> list[Resource]:
    """One per gated queue (:func:`fmcluster.backends.eks.nodes.burn_in_hold.gated`), after its node group."""
    made: list[Resource] = []
    for queue in hold.gated_queues(spec):
        body = {"nodegroup": f"${{eks_nodegroup.{queue.name}.arn}}",
                "nodes": f"${{eks_nodegroup.{queue.name}.desired}}", "level": burn_in(queue).level}
        document = Document(f"burn-in-gate-{queue.name}.yaml", BurnInGate.kind, queue.name, "kubernetes",
                            {"": "patch"}, "", body)
        made.append(BurnInGate(queue.name, document, spec.name, spec, queue))
    return made
