"""The burn-in gate at ``create`` on EKS (issue 37 item 1): the held nodes of one queue tested, released or kept, and
a failed node repaired as ``auto_repair`` says, then tested again.

1. Wait until the node group's nodes have registered (its desired count, or the walk's stop).
2. Test the pending nodes (:func:`.sweep.sweep` over them, at the queue's level; a lone one that passes its own
   checks runs its all-reduce with the nearest node of the queue that passed before).
3. A passed node: the taint lifted and ``fmcluster.io/burn-in=passed`` in one merge patch of the Node. A failed
   node: ``fmcluster.io/burn-in=failed`` and ``fmcluster.io/burn-in-check=<checks>``, its figures in the annotation
   ``fmcluster.io/burn-in-detail``, the taint kept (:mod:`fmcluster.backends.eks.nodes.burn_in_hold`).
4. With ``auto_repair`` on, each failed node is repaired and tested again, at most :data:`MAX_REPAIRS` times: on a
   Capacity Block or an ODCR rebooted (EC2 RebootInstances: a replacement would need a free slot in the
   reservation, which a full one lacks), elsewhere its instance terminated (EC2 TerminateInstances; the node
   group's Auto Scaling group launches a replacement, whose Node registers with the pending taint again; the old
   instance is tagged with what it failed first, for ``status``: :mod:`.verdicts`). After
   that it stays failed, tainted and labelled.

The verdict (:class:`Verdict`): the queue's passed nodes against its node count (its min nodes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fmcluster.backends.burn_in.choice import choose
from fmcluster.backends.eks.burn_in import sweep, verdicts
from fmcluster.backends.eks.kubernetes.access import KubeApi
from fmcluster.backends.eks.nodes import burn_in_hold as hold
from fmcluster.backends.eks.nodes.ultraserver_labels import NODEGROUP_LABEL, instance_of
from fmcluster.backends.protocol import SmokeSink
from fmcluster.engine.waiting import Stop, pause
from fmcluster.spec.auto_repair import auto_repair, in_reservation
from fmcluster.spec.models import Queue, Spec, min_nodes

#: Repairs per node (a reboot, or a replacement) before it stays failed.
MAX_REPAIRS = 2
#: How long the gate waits for a node group's nodes to register, and for a rebooted or replacement node.
NODE_WAIT_S = 15 * 60
#: The longest one burn-in job may run (the check job, or one all-reduce run).
JOB_TIMEOUT_S = 60 * 60


@dataclass
class Verdict:
    """The queue's nodes after the gate: passed, failed (node -> its failed checks), still pending."""

    queue: str
    needed: int
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return len(self.passed) >= self.needed

    def summary(self) -> str:
        said = f"burn-in {self.queue}: {len(self.passed)} of {self.needed} needed node(s) passed"
        if self.failed:
            said += "; failed: " + ", ".join(f"{node} ({why})" for node, why in sorted(self.failed.items()))
        if self.pending:
            said += f"; {len(self.pending)} still pending"
        return said


def group_nodes(api: KubeApi, queue: str) -> list[Any]:
    """The node group's Nodes (EKS's ``eks.amazonaws.com/nodegroup`` label; the node group is named after the
    queue)."""
    from lightkube.resources.core_v1 import Node

    return api.call(f"listing the nodes of queue {queue}",
                    lambda: list(api.client.list(Node, labels={NODEGROUP_LABEL: queue})))


def tally(queue: str, needed: int, nodes: list[Any]) -> Verdict:
    """What the nodes' labels and taints say, without testing anything."""
    verdict = Verdict(queue, needed)
    for node in nodes:
        name = node.metadata.name
        if hold.is_pending(node):
            verdict.pending.append(name)
        elif hold.result(node) == hold.FAILED:
            verdict.failed[name] = verdicts.failed_detail(node)
        elif not hold.has_taint(node):
            verdict.passed.append(name)
    for part in (verdict.passed, verdict.pending):
        part.sort()
    return verdict


def _ready(node: Any) -> bool:
    conditions = {c.type: c.status for c in (node.status.conditions or [])} if node.status else {}
    return conditions.get("Ready") == "True"


class Gate:
    """One queue's gate, run in the walk's worker (:mod:`.gate_resource` starts it in a thread and reads
    :attr:`progress`)."""

    def __init__(self, api: KubeApi, ec2: Any, cluster: str, spec: Spec, queue: Queue, expected: int, stop: Stop,
                 progress: Callable[[str], None]):
        self.api, self.ec2, self.cluster, self.spec, self.queue = api, ec2, cluster, spec, queue
        self.expected, self.stop, self.progress = expected, stop, progress
        self.sink = SmokeSink(note=progress, warning=progress, ticker=sweep.silent)
        self.repairs: dict[str, int] = {}  # node -> repairs so far (a replacement inherits its predecessor's)
        self.failures: dict[str, str] = {}  # node -> its failed checks with their figures, from this run

    def run(self) -> Verdict:
        name = self.queue.name
        level = choose(self.spec, name, None).level
        nodes = self._registered()
        to_test = [n.metadata.name for n in nodes if hold.is_pending(n) and _ready(n)]
        while to_test:
            self.progress(f"burn-in {name}: testing {len(to_test)} node(s) at level {level}")
            failed = self._test(sorted(to_test))
            to_test = self._repair(failed) if auto_repair(self.queue) else []
        verdict = tally(name, min_nodes(self.queue), group_nodes(self.api, name))
        verdict.failed = {node: self.failures.get(node, why) for node, why in verdict.failed.items()}
        return verdict

    def _registered(self) -> list[Any]:
        """The group's nodes once its desired count has registered Ready (or the wait ran out: the rest are said
        by the verdict, and tested by the next ``create``)."""
        deadline = time.monotonic() + NODE_WAIT_S
        while True:
            nodes = group_nodes(self.api, self.queue.name)
            ready = sum(1 for n in nodes if _ready(n))
            if ready >= self.expected or time.monotonic() > deadline:
                return nodes
            self.progress(f"burn-in {self.queue.name}: {ready} of {self.expected} node(s) registered and Ready")
            pause(2.0, self.stop)

    def _test(self, names: list[str]) -> dict[str, str]:
        """Test ``names``, write each verdict on its Node; node -> its failed check names, for those that failed."""
        choice = choose(self.spec, self.queue.name, None)
        paths = sweep.ready_nodes(self.api, self.queue.name)
        wanted = {n: paths.get(n, ()) for n in names}
        passed_before = {n.metadata.name for n in group_nodes(self.api, self.queue.name)
                         if hold.result(n) == hold.PASSED and not hold.has_taint(n)}
        partners = {n: path for n, path in paths.items() if n in passed_before and n not in wanted}
        report = sweep.sweep(self.api, self.cluster, self.spec, choice, wanted, JOB_TIMEOUT_S, None, self.sink,
                             self.stop, partners)
        failed: dict[str, str] = {}
        for entry in report["nodes"]:
            if entry["state"] == "passed":
                self._release(entry["node"])
            elif entry["state"] == "failed":
                bad = [c for c in entry["checks"] if c["status"] not in ("passed", "skipped")]
                checks = [c["name"] for c in bad]
                self.failures[entry["node"]] = "; ".join(f"{c['name']}: {c['detail']}" for c in bad)
                failed[entry["node"]] = hold.check_value(checks)
                self._hold(entry["node"], failed[entry["node"]])
        return failed

    def _release(self, name: str) -> None:
        from lightkube.resources.core_v1 import Node
        from lightkube.types import PatchType

        node = self.api.call(f"reading node {name}", lambda: self.api.client.get(Node, name))
        kept = [{k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v is not None}
                for t in ((node.spec.taints if node.spec else None) or []) if t.key != hold.TAINT_KEY]
        patch = {"metadata": {"labels": {hold.RESULT_LABEL: hold.PASSED, hold.CHECK_LABEL: None},
                              "annotations": {verdicts.DETAIL_ANNOTATION: None}},
                 "spec": {"taints": kept}}
        self.api.call(f"releasing node {name} (burn-in passed)", lambda: self.api.client.patch(
            Node, name, patch, patch_type=PatchType.MERGE))
        self.progress(f"burn-in {self.queue.name}: {name} passed, released")

    def _hold(self, name: str, checks: str) -> None:
        from lightkube.resources.core_v1 import Node
        from lightkube.types import PatchType

        patch = {"metadata": {"labels": {hold.RESULT_LABEL: hold.FAILED, hold.CHECK_LABEL: checks},
                              "annotations": {verdicts.DETAIL_ANNOTATION: self.failures.get(name, checks)}}}
        self.api.call(f"labelling node {name} failed", lambda: self.api.client.patch(
            Node, name, patch, patch_type=PatchType.MERGE))
        self.progress(f"burn-in {self.queue.name}: {name} failed ({self.failures.get(name, checks)}), held")

    def _repair(self, failed: dict[str, str]) -> list[str]:
        """Repair the failed nodes that have repairs left; the nodes to test again (the rebooted ones, or the
        replacements)."""
        due = sorted(n for n in failed if self.repairs.get(n, 0) < MAX_REPAIRS)
        if not due:
            return []
        instances = {node.metadata.name: instance_of(node.spec.providerID if node.spec else None)
                     for node in group_nodes(self.api, self.queue.name)}
        ids = [found for n in due if (found := instances.get(n))]
        if not ids:
            return []
        if in_reservation(self.queue):
            self.progress(f"burn-in {self.queue.name}: rebooting {', '.join(due)} (on a reservation, a replacement "
                          "would need a free slot)")
            self.ec2.reboot_instances(InstanceIds=ids)
            for node in due:
                self.repairs[node] = self.repairs.get(node, 0) + 1
            return self._await_ready(due)
        self.progress(f"burn-in {self.queue.name}: replacing {', '.join(due)} (terminating {', '.join(ids)})")
        before = {i for i in instances.values() if i}
        for node in due:  # what it failed stays on the instance for status while EC2 still describes it
            if instances.get(node):
                self.ec2.create_tags(Resources=[instances[node]],
                                     Tags=[verdicts.replaced_tag(self.failures.get(node, failed[node]))])
        self.ec2.terminate_instances(InstanceIds=ids)
        fresh = self._await_replacements(before, len(due))
        for old, new in zip(due, fresh, strict=False):
            self.repairs[new] = self.repairs.get(old, 0) + 1
        return fresh

    def _await_ready(self, names: list[str]) -> list[str]:
        deadline = time.monotonic() + NODE_WAIT_S
        while True:
            nodes = {n.metadata.name: n for n in group_nodes(self.api, self.queue.name)}
            ready = [n for n in names if n in nodes and _ready(nodes[n])]
            if len(ready) == len(names) or time.monotonic() > deadline:
                return ready
            self.progress(f"burn-in {self.queue.name}: {len(ready)} of {len(names)} rebooted node(s) Ready")
            pause(2.0, self.stop)

    def _await_replacements(self, before: set[str], count: int) -> list[str]:
        """The group's Nodes of new instances (none of ``before``; a replacement may take its predecessor's private
        IP, and so its Node's name), Ready and still pending, once ``count`` have come."""
        deadline = time.monotonic() + NODE_WAIT_S
        while True:
            nodes = group_nodes(self.api, self.queue.name)
            fresh = sorted(n.metadata.name for n in nodes if _ready(n) and hold.is_pending(n)
                           and instance_of(n.spec.providerID if n.spec else None) not in before)
            if len(fresh) >= count or time.monotonic() > deadline:
                return fresh
            self.progress(f"burn-in {self.queue.name}: {len(fresh)} of {count} replacement node(s) registered")
            pause(2.0, self.stop)
