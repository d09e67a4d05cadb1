"""Destroy deletes what an admission webhook guards before the webhook's server, for Kueue, Volcano and KAI,
whatever order the engine's independent deletes (and creates) take (issue 35, part 0).

The sandbox's Kubernetes API calls webhooks as the API server does (failurePolicy Fail: a request the webhook's
Service cannot answer is refused with 500 "failed calling webhook"). Each scheduler's rendered objects are made
and destroyed by the engine in orders drawn from a seed (``Engine(order=…)``: one resource at a time, each drawn
from those whose dependencies are done). A seed draws the same order on every run, so an order the graph fails to
enforce fails here deterministically, not by luck of timing as Volcano's Queue once did (destroy deleted
``volcano-admission-service`` first, and ``validatequeue.volcano.sh`` refused the Queue's DELETE). Without the
webhook edges, a drawn destroy fails so for Volcano, and a drawn create of Kueue's queue objects waits for ever
for Kueue's Service.
KAI's operator, which makes KAI's webhooks, does not run in the sandbox: for KAI this shows only that every drawn
walk completes.
"""

from __future__ import annotations

import random

import pytest
from fixtures.eks_kube import add_system_nodes, context_for, kube_object
from fixtures.eks_specs import eks_spec

from fmcluster.backends.eks.kubernetes.client import KubeObject
from fmcluster.backends.eks.software.apply_order import wire
from fmcluster.backends.eks.software.scheduler_install import COMPONENT_LABEL
from fmcluster.engine import Engine, Event, graph
from fmcluster.engine.waiting import growing
from fmcluster.state.store import StateStore

pytest.importorskip("fmcluster_sandbox.eks")

# Each scheduler's objects are made at once, then destroyed in one drawn order, made again in another and destroyed
# in a third.
SEEDS = ((None, 1), (2, 3))
# No webhook of the three releases intercepts RBAC objects, and the sandbox's pods need none: left out, as are what
# is not the scheduler's (device plugins, storage, the MPI Operator) and the CRDs of kinds no object here is of (Kueue's
# Workload CRD alone is 670 kB), they keep the one-at-a-time walks short.
LEFT_OUT = frozenset({"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})


def _engine(cluster: str, store: StateStore, events: list[Event], seed: int | None) -> Engine:
    engine = Engine(context_for(cluster), store, emit=events.append,
                    order=None if seed is None else random.Random(seed))
    engine.poll_interval = growing(minimum=0.02)  # the sandbox deletes at once: no need to wait 0.2 s to see it
    return engine


def _plan(cluster: str, scheduler: str) -> list[KubeObject]:
    """The scheduler's release and fmcluster's queue objects for it, wired as ``create`` wires them."""
    from fmcluster.backends.eks.software.manifests import manifests
    from fmcluster.backends.eks.software.releases import SCHEDULERS
    from fmcluster.validate.requests import with_stand_ins

    rendered = with_stand_ins(manifests(eks_spec(scheduler)))
    release = SCHEDULERS[scheduler].name
    groups = {m["spec"]["group"] for m in rendered
              if m["kind"] == "CustomResourceDefinition" and m["metadata"]["labels"].get(COMPONENT_LABEL) == release}
    kept = [m for m in rendered if m["kind"] not in LEFT_OUT and (
        m["metadata"]["labels"].get(COMPONENT_LABEL) == release or m["apiVersion"].rpartition("/")[0] in groups)]
    made = {(m["apiVersion"].rpartition("/")[0], m["kind"]) for m in kept}
    objects = [kube_object(cluster, m) for m in kept if m["kind"] != "CustomResourceDefinition"
               or (m["spec"]["group"], m["spec"]["names"]["kind"]) in made]
    wire(objects)
    return graph.wire(objects)


def _refused(events: list[Event]) -> list[str]:
    return [f"{e.resource}: {e.detail}" for e in events if "failed calling webhook" in e.detail]


@pytest.mark.parametrize("scheduler", ["kueue", "volcano", "kai"])
def test_destroy_in_any_order_deletes_guarded_objects_while_their_webhook_answers(sandbox, ctx, cluster, tmp_path,
                                                                                   scheduler):
    add_system_nodes(sandbox, cluster)  # where the releases' controllers (the webhooks' servers) run
    objects = _plan(cluster, scheduler)
    store = StateStore(tmp_path / "state.db")
    for create_seed, destroy_seed in SEEDS:
        events: list[Event] = []
        # The timeout bounds a drawn create that applies a guarded object before its webhook's server: the object
        # then waits for a server that is never made.
        _engine(cluster, store, events, create_seed).apply(objects, timeout=60)
        _engine(cluster, store, events, destroy_seed).destroy(objects)
        assert _refused(events) == [], (create_seed, destroy_seed)
        assert [o.name for o in objects if o.read(context_for(cluster), None) is not None] == []

