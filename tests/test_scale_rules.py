"""``scale`` checks node counts against the spec's rules before any AWS call (offline)."""

from __future__ import annotations

import pytest

from fmcluster.errors import UsageError
from fmcluster.lifecycle import parse_counts
from fmcluster.spec.models import NodeRange, Spec
from fmcluster.spec.rules import queue_problems_for_counts


def _spec(**queue) -> Spec:
    return Spec.model_validate({"name": "c1", "backend": "pcs", "queues": [
        {"name": "train", "instance_type": "p5.48xlarge", "nodes": 2, **queue},
        {"name": "cpu", "instance_type": "c7i.large", "nodes": {"min": 0, "max": 4}}]})


def test_parse_counts_static_and_range():
    assert parse_counts(["train=4", "cpu=0:8"]) == {"train": 4, "cpu": NodeRange(min=0, max=8)}


@pytest.mark.parametrize("bad", ["train", "train=", "train=four", "=3", "train=1:x"])
def test_parse_counts_refuses_what_it_cannot_read(bad):
    with pytest.raises(UsageError) as caught:
        parse_counts([bad])
    assert "QUEUE=N" in str(caught.value)


def test_capacity_block_queue_cannot_scale():
    spec = _spec(capacity={"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"})
    problems = queue_problems_for_counts(spec, spec.queues[0], 0, 2)
    assert problems == ["queue 'train' runs on a Capacity Block: min must equal max"]
    assert queue_problems_for_counts(spec, spec.queues[0], 4, 4) == []


def test_pcs_size_is_fixed_at_creation():
    spec = _spec().model_copy(update={"pcs": _spec().pcs.model_copy(update={"size": "SMALL"})})
    problems = queue_problems_for_counts(spec, spec.queues[0], 30, 30)
    assert problems == ["the cluster is size SMALL (at most 32 nodes, fixed at creation); this makes 34"]
    assert queue_problems_for_counts(spec, spec.queues[0], 28, 28) == []


def test_min_above_max_is_refused():
    spec = _spec()
    assert queue_problems_for_counts(spec, spec.queues[1], 5, 2) == ["min (5) is larger than max (2)"]
