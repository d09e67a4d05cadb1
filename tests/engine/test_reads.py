"""A read-only pass (fmcluster.engine.reads): inside it, an item read once is served again; outside it, and after it,
every read goes to AWS, so a walk that writes never plans from what an earlier pass read."""

from __future__ import annotations

import pytest

from fmcluster.engine import Context, reads


def _ctx() -> Context:
    return Context(cluster="demo", region="us-east-1", client=lambda service: None)


def test_inside_a_pass_an_item_is_read_once_by_its_id_or_its_aliases():
    ctx, calls = _ctx(), []

    def fetch():
        calls.append("GetComputeNodeGroup")
        return {"id": "pcs_abc", "name": "gpu"}

    with reads.reading(ctx):
        first = reads.once(ctx, "pcs.ComputeNodeGroup", "pcs_abc", fetch, lambda item: (item["id"], item["name"]))
        by_name = reads.once(ctx, "pcs.ComputeNodeGroup", "gpu", fetch)
        assert first is by_name and calls == ["GetComputeNodeGroup"]
        # an item a scan listed is what a read by its id gets, and "absent" is an answer too
        reads.keep(ctx, "ec2.SecurityGroups", {"GroupId": "sg-1"}, "sg-1")
        assert reads.kept(ctx, "ec2.SecurityGroups", "sg-1") == {"GroupId": "sg-1"}
        assert reads.kept(ctx, "ec2.SecurityGroups", "sg-2") is reads.MISSING
        assert reads.once(ctx, "pcs.Cluster", "demo", lambda: None) is None
        assert reads.kept(ctx, "pcs.Cluster", "demo") is None


def test_outside_and_after_a_pass_every_read_goes_to_aws():
    ctx, calls = _ctx(), []

    def fetch():
        calls.append("GetCluster")
        return {"id": "pcs_abc", "name": "demo"}

    with reads.reading(ctx):
        reads.once(ctx, "pcs.Cluster", "demo", fetch)
    assert ctx.snapshot is None
    reads.once(ctx, "pcs.Cluster", "demo", fetch)
    reads.once(ctx, "pcs.Cluster", "demo", fetch)
    reads.keep(ctx, "pcs.Cluster", {"id": "stale"}, "demo")  # nothing is kept outside a pass
    assert reads.kept(ctx, "pcs.Cluster", "demo") is reads.MISSING
    assert calls == ["GetCluster"] * 3


def test_a_pass_that_fails_is_dropped_too():
    ctx = _ctx()
    with pytest.raises(RuntimeError, match="AWS said no"), reads.reading(ctx):  # the error goes on through
        raise RuntimeError("AWS said no")
    assert ctx.snapshot is None
