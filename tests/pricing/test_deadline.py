"""When the budget guard fires (fmcluster.pricing.deadline), against figures worked by hand.

Prices: the bundled catalog's On-Demand p5.48xlarge in us-east-1, $55.04/h (fmcluster/catalog/instances.yaml, from
AWS's public price feed). The specs give their own subnet, so no NAT gateway bills, and ParallelCluster's head
node m7i.2xlarge has no bundled price (left out of the total): the maximum is exactly 2 × $55.04 = $110.08/h.
"""

from __future__ import annotations

import datetime as dt

import pytest

from fmcluster.pricing.deadline import budget_refusals, guard_deadline
from fmcluster.pricing.model import usd_per_hour_max
from fmcluster.spec.budget import Budget
from fmcluster.spec.loader import load_spec_data

UTC = dt.timezone.utc
CREATED = dt.datetime(2026, 12, 7, 0, 0, 0, tzinfo=UTC)


def two_p5(budget: dict) -> dict:
    return {"name": "guard-test", "region": "us-east-1", "backend": "parallelcluster",
            "network": {"subnet_id": "subnet-0123456789abcdef0"},
            "queues": [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2}], "budget": budget}


def test_the_maximum_rate_is_two_p5_at_the_catalog_price() -> None:
    spec = load_spec_data(two_p5({"max_usd": 1000}), "test").spec
    assert usd_per_hour_max(spec) == pytest.approx(110.08)  # 2 × 55.04


def test_the_cap_decides_when_it_comes_first() -> None:
    spec = load_spec_data(two_p5({"max_usd": 1000, "expires": "72h"}), "test").spec
    assert spec.budget is not None
    deadline = guard_deadline(spec.budget, usd_per_hour_max(spec), CREATED, CREATED)
    # $1000 / $110.08/h = 9.084302... h = 32,703.49 s, rounded down to 32,703 s = 9 h 5 min 3 s
    assert deadline.at == dt.datetime(2026, 12, 7, 9, 5, 3, tzinfo=UTC)
    assert deadline.decided_by == "max_usd"
    assert deadline.expires_at == dt.datetime(2026, 12, 10, 0, 0, 0, tzinfo=UTC)  # 72 h after creation


def test_the_lease_decides_when_it_comes_first() -> None:
    spec = load_spec_data(two_p5({"max_usd": 100000, "expires": "90m"}), "test").spec
    assert spec.budget is not None
    deadline = guard_deadline(spec.budget, usd_per_hour_max(spec), CREATED, CREATED)
    assert deadline.at == dt.datetime(2026, 12, 7, 1, 30, 0, tzinfo=UTC)
    assert deadline.decided_by == "expires"


def test_what_was_spent_comes_off_the_cap() -> None:
    budget = Budget(max_usd=1000)
    now = dt.datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
    # $1000 − $449.60 = $550.40, and $550.40 / $110.08/h = 5 h exactly
    deadline = guard_deadline(budget, 110.08, CREATED, now, usd_spent=449.60)
    assert deadline.at == dt.datetime(2026, 12, 7, 17, 0, 0, tzinfo=UTC)


def test_a_duration_counts_from_creation_so_create_again_does_not_push_it() -> None:
    budget = Budget(expires="3d")
    later = CREATED + dt.timedelta(hours=30)
    assert guard_deadline(budget, 110.08, CREATED, later).at == dt.datetime(2026, 12, 10, 0, 0, 0, tzinfo=UTC)


def test_a_time_is_kept_as_written_in_its_zone() -> None:
    budget = Budget(expires="2026-12-08T09:30:00+01:00")
    assert guard_deadline(budget, 110.08, CREATED, CREATED).at == dt.datetime(2026, 12, 8, 8, 30, tzinfo=UTC)


def test_no_price_places_only_the_lease() -> None:
    deadline = guard_deadline(Budget(max_usd=500, expires="1h"), None, CREATED, CREATED)
    assert deadline.at == CREATED + dt.timedelta(hours=1)
    assert deadline.spend_at is None and "no bundled price" in deadline.why
    assert guard_deadline(Budget(max_usd=500), None, CREATED, CREATED).at is None


def test_a_past_lease_and_a_spent_cap_are_refused() -> None:
    now = dt.datetime(2026, 12, 8, 0, 0, 0, tzinfo=UTC)
    budget = Budget(max_usd=100, expires="2026-12-07T12:00:00Z")
    fields = [name for name, _ in budget_refusals(budget, guard_deadline(budget, 110.08, CREATED, now, 100.0), now)]
    assert fields == ["expires", "max_usd"]
    fine = Budget(max_usd=100.01, expires="2026-12-08T00:00:01Z")
    assert budget_refusals(fine, guard_deadline(fine, 110.08, CREATED, now, 100.0), now) == []


def _warns(budget: dict, now: dt.datetime = CREATED) -> dt.datetime | None:
    return guard_deadline(Budget(**budget), 110.08, CREATED, now).warns_at


def test_the_warning_goes_an_hour_before_or_a_quarter_of_a_short_lease() -> None:
    """notify set: an hour before the moment on a lease of four hours or more; a quarter of a shorter one (15 min
    before a 1 h lease); without notify, none; decided too near the moment to warn before it, none."""
    assert _warns({"expires": "72h", "notify": "ops@example.com"}) == dt.datetime(2026, 12, 9, 23, 0, tzinfo=UTC)
    assert _warns({"expires": "1h", "notify": "ops@example.com"}) == dt.datetime(2026, 12, 7, 0, 45, tzinfo=UTC)
    # the cap: $1000 at $110.08/h fires at 09:05:03 (above); 9 h 5 min 3 s is over four hours: an hour before
    assert _warns({"max_usd": 1000, "notify": "ops@example.com"}) == dt.datetime(2026, 12, 7, 8, 5, 3, tzinfo=UTC)
    assert _warns({"expires": "72h"}) is None
    # re-decided at 23:30 on the last day: the warning's 23:00 is past, so no warning (never a schedule in the past)
    assert _warns({"expires": "72h", "notify": "ops@example.com"},
                  now=dt.datetime(2026, 12, 9, 23, 30, tzinfo=UTC)) is None
