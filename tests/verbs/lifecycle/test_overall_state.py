"""The state of a cluster as a whole (``fmcluster/verbs/lifecycle/overall_state.py``, the README's table): the rule on
hand-typed facts, the queue shortfall rule, and, in this process against the sandbox, the remains of a cluster
whose create stopped after its network (INCOMPLETE, billing for its NAT gateway, never NOT_FOUND) and an
interrupted destroy (DELETING)."""

from __future__ import annotations

import uuid

import pytest
from fixtures.lifecycle import REPO_ROOT

from fmcluster.verbs.lifecycle.overall_state import (
    Facts,
    billing_line,
    missing_parts,
    name_missing,
    overall,
    shortfalls,
)


# -- the rule, fact by fact (each expected state is the README's table, typed by hand) --------------------------
@pytest.mark.parametrize(("facts", "state"), [
    (Facts("NOT_FOUND", 0), "NOT_FOUND"),
    # a destroy that stopped after the anchor went: the network is left, and the record says DELETING
    (Facts("NOT_FOUND", 4, ["cluster:c"], recorded="DELETING"), "DELETING"),
    (Facts("ACTIVE", 9, [], recorded="DELETE_INCOMPLETE"), "DELETING"),
    (Facts("UPDATING", 9, [], recorded="ACTIVE", running="fmcluster destroy c"), "DELETING"),
    (Facts("DELETING", 3, None, recorded="ACTIVE"), "DELETING"),
    (Facts("FAILED", 3, [], recorded="FAILED"), "FAILED"),
    (Facts("NOT_FOUND", 2, None, recorded="STORAGE_KEPT"), "STORAGE_KEPT"),
    # only the network of a create that stopped: never NOT_FOUND
    (Facts("NOT_FOUND", 8, ["cluster:c", "compute_node_group:gpu"], recorded="CREATING"), "INCOMPLETE"),
    (Facts("NOT_FOUND", 8, None), "INCOMPLETE"),
    # an EKS cluster ACTIVE without its node groups (a create killed after CreateCluster)
    (Facts("ACTIVE", 12, ["eks_nodegroup:train", "eks_nodegroup:system"], recorded="CREATING"), "INCOMPLETE"),
    (Facts("CREATING", 12, ["eks_nodegroup:train"], recorded="CREATING"), "INCOMPLETE"),
    # ... while a create runs, it is being made
    (Facts("CREATING", 12, ["eks_nodegroup:train"], recorded="CREATING", running="fmcluster create s.yaml"),
     "CREATING"),
    (Facts("ACTIVE", 12, ["eks_nodegroup:gpu"], recorded="ACTIVE", running="fmcluster scale c gpu=2"), "UPDATING"),
    (Facts("ACTIVE", 12, [], recorded="ACTIVE"), "ACTIVE"),
    (Facts("ACTIVE", 12, None, recorded="ACTIVE"), "ACTIVE"),  # missing unknown: AWS's word stands
    (Facts("UPDATING", 12, [], recorded="ACTIVE"), "UPDATING"),
])
def test_the_state_of_the_whole(facts, state):
    assert overall(facts)[0] == state


def test_missing_parts_are_the_drift_missing_in_aws_named_by_kind():
    drift = [{"resource": "eks_nodegroup:train", "expected": "exists", "actual": "missing"},
             {"resource": "eks_nodegroup:system", "expected": "exists", "actual": "missing"},
             {"resource": "placement:network", "expected": "exists", "actual": "missing"},
             {"resource": "eks_addon:coredns.addonVersion", "expected": "v1.12", "actual": "v1.11"},
             {"resource": "vpc:main", "expected": "absent (not in the spec)", "actual": "exists"}]
    missing = missing_parts(drift, frozenset({"placement"}))
    assert missing == ["eks_nodegroup:train", "eks_nodegroup:system"]
    assert missing_parts(None) is None
    assert name_missing(missing) == "eks_nodegroup: system, train"
    many = [f"kube_object:o{i}" for i in range(8)]
    assert name_missing(many) == "kube_object: o0, o1, o2, o3, o4, o5 and 2 more"


def test_a_queue_at_rest_short_of_nodes_with_none_launching_is_a_problem():
    eks = {"name": "train", "desired": 2, "min": 0, "running_instances": 1, "status": "ACTIVE",
           "node_group_status": "ACTIVE"}
    assert shortfalls([eks], [{"queue": "train", "state": "running"}]) == [
        "queue train: 1 running of 2 wanted, and none is launching (a node terminated outside fmcluster?)"]
    # a replacement pending, or the group changing: something is bringing the node back
    assert shortfalls([eks], [{"queue": "train", "state": "running"}, {"queue": "train", "state": "pending"}]) == []
    assert shortfalls([eks | {"status": "UPDATING", "node_group_status": "UPDATING"}], []) == []
    # a queue whose Capacity Block has not begun has no nodes yet by design (they come at the block's start)
    assert shortfalls([eks | {"running_instances": 0}], [], waiting={"train"}) == []
    # PCS: the minimum is the floor (a queue of {min: 0, max: 2} at 0 is fine); ParallelCluster: fleet RUNNING
    pcs = {"name": "gpu", "min": 1, "max": 1, "running_instances": 0, "status": "ACTIVE",
           "node_group_status": "ACTIVE"}
    assert len(shortfalls([pcs, pcs | {"name": "burst", "min": 0, "max": 2}], [])) == 1
    pcluster = {"name": "q", "min": 2, "max": 2, "running_instances": 2, "status": "RUNNING"}
    assert shortfalls([pcluster], []) == []
    assert shortfalls([pcluster | {"running_instances": 1}], []) != []


def test_billing_line_names_what_bills_on_its_own():
    report = {"usd_per_hour_now": 0.05, "resources": [
        {"type": "vpc", "id": "vpc-1", "status": "available"},
        {"type": "nat_gateway", "id": "nat-1", "status": "available"},
        {"type": "nat_gateway", "id": "nat-2", "status": "deleted"}]}
    assert billing_line(report) == "still billing: $0.0500/hour now (nat_gateway nat-1); `fmcluster destroy` stops it"
    assert billing_line({"usd_per_hour_now": 0.0, "resources": [{"type": "vpc", "id": "vpc-1"}]}) is None


def test_billing_line_names_the_backends_own_kinds_that_bill():
    """A managed control plane bills by the hour while it exists (Amazon EKS pricing): its backend says so."""
    from fmcluster.backends import registry

    report = {"usd_per_hour_now": 0.1, "resources": [{"type": "eks_cluster", "id": "train", "status": "ACTIVE"}]}
    assert billing_line(report, registry.profile("eks").billing_kinds) == \
        "still billing: $0.1000/hour now (eks_cluster train); `fmcluster destroy` stops it"
    assert billing_line(report, registry.profile("pcs").billing_kinds) == \
        "still billing: $0.1000/hour now; `fmcluster destroy` stops it"


# -- in this process, against the sandbox ------------------------------------------------------------------------
def test_a_create_stopped_after_its_network_is_incomplete_and_billing_then_a_stopped_destroy_is_deleting(
        in_process):
    from fmcluster.aws.network_plan import RESOURCES
    from fmcluster.engine import Engine
    from fmcluster.spec import load_spec
    from fmcluster.spec.stored import record_cluster
    from fmcluster.verbs.lifecycle.common import spec_text
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status
    from fmcluster.verbs.session import Session

    spec = load_spec(str(REPO_ROOT / "configs" / "quickstart-pcs.yaml")).spec
    spec = spec.model_copy(update={"name": f"remains-{uuid.uuid4().hex[:8]}"})
    session = Session.open(spec)
    cluster_id = uuid.uuid4().hex
    session.set_cluster_id(cluster_id)
    record_cluster(session.store, spec.name, session.region, "pcs", spec_text(spec), None, "CREATING", cluster_id)
    # what a create killed once its network was made leaves: the network only, made by fmcluster's own engine
    network = [r for r in session.resources() if r.kind in RESOURCES]
    Engine(session.ctx, session.store).apply(network)
    try:
        report = status(spec.name, refresh=False)
        assert report["status"] == "INCOMPLETE", report
        assert "cluster:" + spec.name in report["missing"], report["missing"]
        assert any(p.startswith("missing from the spec: ") and "cluster: " + spec.name in p
                   for p in report["problems"]), report["problems"]
        # Amazon VPC pricing: a NAT gateway $0.045/hour in us-east-1, its public IPv4 address $0.005/hour
        assert report["usd_per_hour_now"] == pytest.approx(0.05), report
        assert any(p.startswith("still billing: $0.0500/hour now (nat_gateway nat-") for p in report["problems"]), \
            report["problems"]

        session.store.set_cluster_status(spec.name, session.region, "DELETING")  # what a killed destroy leaves
        stopped = status(spec.name, refresh=False)
        assert stopped["status"] == "DELETING", stopped
        assert f"a destroy started and did not finish: `fmcluster destroy {spec.name}` finishes it" in \
            stopped["problems"], stopped["problems"]
    finally:
        assert destroy(spec.name, yes=True, keep_storage=False) == 0
