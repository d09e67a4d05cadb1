"""The one cost model (``fmcluster.pricing.model``): each queue at its capacity type's rate, the head node at
On-Demand, the NAT gateway and its public IPv4 address only for a network fmcluster creates (issue 20: a Capacity
Block cluster used to show $95.52/h in ``plan`` and nothing in ``status``).

End to end, ``plan --json``'s ``usd_per_hour`` equals ``status --json``'s ``usd_per_hour_max`` (and the text status
and ``destroy`` say the same figure) on the clusters the lifecycle tests already create
(``lifecycle_fixture.Cli.assert_plan_and_status_cost_agree``): On-Demand with a created network on PCS and
ParallelCluster (test_lifecycle_pcs, test_lifecycle_parallelcluster), a Capacity Block on PCS and ParallelCluster
(test_lifecycle_ultraserver), an ODCR group (test_lifecycle_reservation_group), and EKS on a Capacity Block with its
control plane's fee (test_lifecycle_eks). ``plan --json`` on every example is checked against hand-typed facts in
test_plan.
"""

from __future__ import annotations

import copy
import datetime as dt

import pytest

from fmcluster.pricing.capacity_blocks import BlockPrice
from fmcluster.pricing.model import live_cost, spec_cost, usd_per_hour_max
from fmcluster.pricing.network import NAT_GATEWAY_USD_PER_HOUR, PUBLIC_IPV4_USD_PER_HOUR
from fmcluster.pricing.rates import LivePriceBook
from fmcluster.spec.loader import load_spec_data
from fmcluster.spec.models import Spec

# Bundled us-east-1 rates the figures below are worked from (fmcluster/catalog data).
P5_4XL_ON_DEMAND = 6.88
P5E_48XL_BLOCK = 47.76  # no On-Demand row for p5e: only its Capacity Block rate is bundled
P5EN_48XL_ON_DEMAND = 63.296
NAT_AND_IPV4 = NAT_GATEWAY_USD_PER_HOUR + PUBLIC_IPV4_USD_PER_HOUR

BASE = {
    "name": "cost",
    "backend": "parallelcluster",
    "region": "us-east-1",
    "head_node": {"instance_type": "m7i.2xlarge"},  # no bundled price
    "queues": [{"name": "gpu", "instance_type": "p5.4xlarge", "nodes": {"min": 0, "max": 2}}],
}


def _spec(**changes) -> Spec:
    data = copy.deepcopy(BASE)
    queue = changes.pop("queue", {})
    data["queues"][0].update(queue)
    data.update(changes)
    return load_spec_data(data, "test spec").spec


OWN_SUBNET = {"subnet_id": "subnet-0123456789abcdef0"}


# --- per queue: the capacity type's rate ---------------------------------------------------------------


def test_a_capacity_block_queue_is_priced_at_its_block_rate_not_on_demand():
    """Issue 20's cluster: two p5e.48xlarge on a Capacity Block. p5e has no On-Demand price, so an
    On-Demand-only model priced it at nothing."""
    spec = _spec(network=OWN_SUBNET, queue={"instance_type": "p5e.48xlarge", "nodes": 2,
                                            "capacity": {"type": "capacity-block",
                                                         "reservation_id": "cr-0abcdef0123456789"}})
    cost = spec_cost(spec)
    assert cost.queues[0].price.basis == "capacity-block"
    assert cost.queues[0].usd_per_hour == pytest.approx(2 * P5E_48XL_BLOCK)
    assert cost.usd_per_hour == pytest.approx(95.52)
    assert usd_per_hour_max(spec) == cost.usd_per_hour


def test_a_capacity_block_rate_differs_from_on_demand_for_the_same_type():
    """With both rates known (a priced block offering read live), the block queue takes the block's rate
    and an On-Demand queue of the same type the On-Demand one."""
    spec = _spec(network=OWN_SUBNET, queues=[
        {"name": "block", "instance_type": "p5en.48xlarge", "nodes": 2,
         "capacity": {"type": "capacity-block", "reservation_id": "cr-0abcdef0123456789"}},
        {"name": "od", "instance_type": "p5en.48xlarge", "nodes": {"min": 0, "max": 2}}])
    prices = LivePriceBook("us-east-1", {"p5en.48xlarge": P5EN_48XL_ON_DEMAND},
                           {"block": BlockPrice(40.0, "Capacity Block offering")})
    block, od = spec_cost(spec, prices).queues
    assert (block.price.basis, block.usd_per_hour) == ("capacity-block", 80.0)
    assert (od.price.basis, od.usd_per_hour) == ("on-demand", pytest.approx(2 * P5EN_48XL_ON_DEMAND))


def test_an_odcr_queue_bills_at_the_on_demand_rate_and_says_so():
    spec = _spec(network=OWN_SUBNET, queue={"nodes": 3, "capacity": {"type": "reservation",
                                                                     "reservation_id": "cr-0123456789abcdef0"}})
    queue = spec_cost(spec).queues[0]
    assert queue.price.basis == "on-demand"
    assert "On-Demand Capacity Reservation" in queue.price.note
    assert queue.usd_per_hour == pytest.approx(3 * P5_4XL_ON_DEMAND)


def test_a_spot_queue_is_priced_at_its_on_demand_ceiling_and_says_so():
    spec = _spec(network=OWN_SUBNET, queue={"capacity": {"type": "spot"}})
    queue = spec_cost(spec).queues[0]
    assert queue.price.basis == "on-demand"
    assert "Spot costs less" in queue.price.note
    assert queue.usd_per_hour == pytest.approx(2 * P5_4XL_ON_DEMAND)


def test_an_on_demand_queue_is_priced_at_its_maximum():
    cost = spec_cost(_spec(network=OWN_SUBNET, queue={"nodes": {"min": 1, "max": 5}}))
    assert cost.queues[0].nodes == 5
    assert cost.compute_usd_per_hour == pytest.approx(5 * P5_4XL_ON_DEMAND)


# --- network: NAT gateway and public IPv4, only for a network fmcluster creates ------------------------


def test_a_created_network_adds_its_nat_gateway_and_public_ipv4_address():
    created, own = spec_cost(_spec()), spec_cost(_spec(network=OWN_SUBNET))
    assert created.network_usd_per_hour == pytest.approx(NAT_AND_IPV4)
    assert own.network_usd_per_hour == 0.0
    assert created.usd_per_hour == pytest.approx(own.usd_per_hour + NAT_AND_IPV4)
    assert PUBLIC_IPV4_USD_PER_HOUR == 0.005  # AWS's per-address price since February 2024


def test_a_created_network_where_the_nat_price_is_not_bundled_is_listed_unknown():
    cost = spec_cost(_spec(region="eu-west-1"))
    assert cost.network_usd_per_hour is None
    assert any("NAT gateway" in part for part in cost.unknown), cost.unknown


def test_the_network_alone_is_no_total():
    """No node priced (c7i.xlarge and m7i.2xlarge have no bundled price): the NAT gateway's price is no cluster
    total."""
    cost = spec_cost(_spec(queue={"instance_type": "c7i.xlarge", "efa": False}))
    assert cost.network_usd_per_hour == pytest.approx(NAT_AND_IPV4)
    assert cost.compute_usd_per_hour is None and cost.head_node.usd_per_hour is None
    assert cost.usd_per_hour is None


# --- status: the same figure from the same function --------------------------------------------------


def _report(spec: Spec, instances: list[dict], resources: list[dict] | None = None) -> dict:
    return {"region": spec.region, "instances": instances, "resources": resources or [],
            "queues": [{"name": q.name, "instance_type": q.instance_type, "max": 99} for q in spec.queues]}


def test_status_prices_running_block_nodes_at_the_block_rate_and_its_maximum_is_plans():
    spec = _spec(network=OWN_SUBNET, queue={"instance_type": "p5e.48xlarge", "nodes": 2,
                                            "capacity": {"type": "capacity-block",
                                                         "reservation_id": "cr-0abcdef0123456789"}})
    now = dt.datetime(2026, 12, 4, 12, tzinfo=dt.timezone.utc)
    launched = (now - dt.timedelta(hours=2)).isoformat()
    node = {"queue": "gpu", "instance_type": "p5e.48xlarge", "state": "running", "launch_time": launched}
    live = live_cost(_report(spec, [node]), spec, now)
    assert live["usd_per_hour_now"] == P5E_48XL_BLOCK
    assert live["usd_so_far"] == pytest.approx(2 * P5E_48XL_BLOCK)
    # the report's own queue maxima (99) are not what plan computes: the spec's are
    assert live["usd_per_hour_max"] == spec_cost(spec).usd_per_hour == pytest.approx(95.52)


def test_status_counts_a_live_nat_gateway_from_its_creation():
    spec = _spec()
    now = dt.datetime(2026, 12, 4, 12, tzinfo=dt.timezone.utc)
    gateway = {"type": "nat_gateway", "status": "available", "created": (now - dt.timedelta(hours=10)).isoformat()}
    live = live_cost(_report(spec, [], [gateway]), spec, now)
    assert live["usd_per_hour_now"] == pytest.approx(NAT_AND_IPV4)
    assert live["usd_so_far"] == pytest.approx(10 * NAT_AND_IPV4)
    assert live["usd_per_hour_max"] == spec_cost(spec).usd_per_hour


def test_status_without_the_spec_prices_the_reported_queues_at_on_demand():
    spec = _spec(network=OWN_SUBNET)
    live = live_cost(_report(spec, []), None)
    assert live["usd_per_hour_max"] == pytest.approx(99 * P5_4XL_ON_DEMAND)
    assert "no spec" in live["cost_basis"]
