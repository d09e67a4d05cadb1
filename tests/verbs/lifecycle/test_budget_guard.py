"""The budget guard in ``create`` and ``status``, in this process against the sandbox: a budget that cannot be kept
is refused with exit 2 before anything is claimed or made; this build refuses any ``budget:`` at create (the guard
in AWS is not installed yet) rather than drop it; ``status`` counts the guard down on AWS's clock (the sandbox's
``Date`` header) from the cluster's creation."""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
import uuid

import pytest
from fixtures.lifecycle import REPO_ROOT

from fmcluster.errors import FmclusterError, SpecError, UsageError


@pytest.fixture
def in_process(sandbox, sandbox_env, tmp_path, monkeypatch):
    """fmcluster's own code in this process, pointed at the sandbox, with a state directory of its own."""
    from fmcluster.connection import aws

    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test
    aws.configure(None, None, sandbox.endpoint_url)
    return sandbox


def spec_file(tmp_path, budget: str) -> tuple[str, str]:
    name = f"guard-{uuid.uuid4().hex[:8]}"
    text = (REPO_ROOT / "configs" / "quickstart-pcs.yaml").read_text().replace("name: quickstart-pcs", f"name: {name}")
    path = tmp_path / "spec.yaml"
    path.write_text(text + budget)
    return name, str(path)


def create_refused(path: str, yes: bool = True) -> FmclusterError:
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.create import create

    with pytest.raises(FmclusterError) as raised:
        create(load_spec(path).spec, path, yes=yes, wait=False, timeout_min=None)
    return raised.value


def nothing_made(name: str) -> None:
    from fmcluster.state.claims import holder
    from fmcluster.state.store import StateStore

    assert StateStore(readonly=True).cluster(name, "us-east-1") is None
    assert holder(name, "us-east-1") is None  # not even the name's claim


def test_a_lease_already_over_is_refused_at_its_line(in_process, tmp_path) -> None:
    name, path = spec_file(tmp_path, "budget: {expires: '2020-01-01T00:00:00Z'}\n")
    refused = create_refused(path)
    assert isinstance(refused, SpecError) and refused.exit_code == 2
    assert ":18:" in str(refused) and "budget.expires" in str(refused) and "not after now" in str(refused)
    nothing_made(name)


def test_destroy_compute_without_yes_says_what_it_deletes(in_process, tmp_path) -> None:
    name, path = spec_file(tmp_path, "budget: {expires: 72h, on_limit: destroy-compute}\n")
    refused = create_refused(path, yes=False)
    assert isinstance(refused, UsageError) and refused.exit_code == 2
    assert "deletes the node groups of every queue (gpu, burst)" in str(refused) and "--yes" in str(refused)
    nothing_made(name)


def test_this_build_refuses_a_budget_at_create_rather_than_drop_it(in_process, tmp_path, capsys) -> None:
    name, path = spec_file(tmp_path, "budget: {expires: 72h, max_usd: 50}\n")
    refused = create_refused(path)
    assert isinstance(refused, UsageError) and refused.exit_code == 2
    assert "the guard in AWS is not installed by this build" in str(refused)
    # the plan's line said when the guard would have fired
    assert "budget guard: fires" in capsys.readouterr().err
    nothing_made(name)


def test_status_counts_the_guard_down_from_the_creation_on_aws_clock(in_process, tmp_path) -> None:
    from fmcluster.spec import load_spec
    from fmcluster.spec.stored import record_cluster
    from fmcluster.verbs.lifecycle.common import spec_text
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status
    from fmcluster.verbs.session import Session

    name, path = spec_file(tmp_path, "budget: {expires: 90m}\n")
    spec = load_spec(path).spec
    session = Session.open(spec)
    session.set_cluster_id(uuid.uuid4().hex)
    # a recorded cluster (nothing in AWS): its creation is the record's first write
    record_cluster(session.store, name, session.region, "pcs", spec_text(spec), path, "CREATING",
                   session.ctx.cluster_id)
    created = dt.datetime.fromtimestamp(session.store.cluster(name, session.region).created_at, dt.timezone.utc)
    try:
        budget = status(name, refresh=False)["budget"]
        expected = (created + dt.timedelta(minutes=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert budget["fires_at"] == expected and budget["decided_by"] == "expires"
        assert budget["passed"] is False and budget["countdown"].endswith(f"(fires {expected})")
        # the sandbox's Date header is the time status counts from
        with urllib.request.urlopen(in_process.endpoint_url + "/", context=_ssl(in_process)) as answer:
            said = answer.headers["Date"]
        assert said and budget["now"][:13] == dt.datetime.strptime(said, "%a, %d %b %Y %H:%M:%S GMT").strftime(
            "%Y-%m-%dT%H")
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0


def test_this_build_refuses_to_scale_a_cluster_whose_spec_has_a_budget(in_process, tmp_path) -> None:
    from fmcluster.spec import load_spec
    from fmcluster.spec.stored import record_cluster
    from fmcluster.verbs.lifecycle.common import spec_text
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.scale import scale
    from fmcluster.verbs.session import Session

    name, path = spec_file(tmp_path, "budget: {max_usd: 500}\n")
    spec = load_spec(path).spec
    session = Session.open(spec)
    session.set_cluster_id(uuid.uuid4().hex)
    record_cluster(session.store, name, session.region, "pcs", spec_text(spec), path, "ACTIVE",
                   session.ctx.cluster_id)
    try:
        with pytest.raises(UsageError, match="scale: budget: the guard in AWS is not installed by this build"):
            scale(name, ["burst=0:1"], yes=True)
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0


@pytest.mark.skip(reason="needs sandbox-scheduler: the sandbox's clock (POST /_fmcluster/clock) and its Date")
def test_status_says_the_guard_has_passed_when_aws_clock_has(in_process, tmp_path) -> None:
    from fmcluster.spec import load_spec
    from fmcluster.spec.stored import record_cluster
    from fmcluster.verbs.lifecycle.common import spec_text
    from fmcluster.verbs.lifecycle.destroy import destroy
    from fmcluster.verbs.lifecycle.status import status
    from fmcluster.verbs.session import Session

    name, path = spec_file(tmp_path, "budget: {expires: 1h}\n")
    spec = load_spec(path).spec
    session = Session.open(spec)
    session.set_cluster_id(uuid.uuid4().hex)
    record_cluster(session.store, name, session.region, "pcs", spec_text(spec), path, "CREATING",
                   session.ctx.cluster_id)
    try:
        assert status(name, refresh=False)["budget"]["passed"] is False
        request = urllib.request.Request(in_process.endpoint_url + "/_fmcluster/clock", method="POST",
                                         data=json.dumps({"advance_seconds": 2 * 3600}).encode())
        urllib.request.urlopen(request, context=_ssl(in_process)).close()
        budget = status(name, refresh=False)["budget"]
        assert budget["passed"] is True and budget["countdown"].startswith("passed ")
    finally:
        assert destroy(name, yes=True, keep_storage=False) == 0


def _ssl(sandbox):
    import ssl

    return ssl.create_default_context(cafile=sandbox.ca_bundle)


def test_a_guard_after_a_capacity_blocks_end_is_allowed_and_said(in_process, tmp_path) -> None:
    """Bought as EC2 sells it (DescribeCapacityBlockOfferings, PurchaseCapacityBlock): a one-day block from
    tomorrow; a lease of 10 days outlasts it."""
    from fmcluster.pricing.deadline import guard_deadline
    from fmcluster.spec import load_spec
    from fmcluster.verbs.lifecycle.guard import after_blocks
    from fmcluster.verbs.session import Session

    ec2 = in_process.client("ec2")
    after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    offerings = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=2,
                                                      CapacityDurationHours=24,
                                                      StartDateRange=after)["CapacityBlockOfferings"]
    offering = min(offerings, key=lambda o: (o["StartDate"], o["AvailabilityZone"]))
    block = ec2.purchase_capacity_block(CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
                                       InstancePlatform="Linux/UNIX")["CapacityReservation"]
    rid = block["CapacityReservationId"]
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: guard-{uuid.uuid4().hex[:8]}\nregion: us-east-1\nbackend: pcs\nqueues:\n"
                    f"  - {{name: train, instance_type: p5.48xlarge, nodes: 2, capacity: {{type: capacity-block, "
                    f"reservation_id: {rid}}}}}\nbudget: {{expires: 10d}}\n")
    spec = load_spec(path).spec
    assert spec.budget is not None
    session = Session.open(spec)
    now = dt.datetime.now(dt.timezone.utc)
    said = after_blocks(session, spec, guard_deadline(spec.budget, None, now, now))
    assert len(said) == 1 and f"after Capacity Block {rid} ends" in said[0] and "queue train" in said[0], said
    # a lease inside the block's life says nothing
    spec_short = spec.model_copy(update={"budget": spec.budget.model_copy(update={"expires": "1h"})})
    assert after_blocks(session, spec_short, guard_deadline(spec_short.budget, None, now, now)) == []
