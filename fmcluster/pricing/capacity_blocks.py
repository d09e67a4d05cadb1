"""`plan --live-prices` for Capacity Block queues: EC2's own offerings, not a price list.

AWS sells Capacity Blocks at an upfront fee for a whole block (DescribeCapacityBlockOfferings ``UpfrontFee`` for
``InstanceCount`` instances over ``CapacityBlockDurationHours``; UltraServers by ``UltraserverType`` and
``UltraserverCount``). The Pricing API has no Capacity Block rates, so the rate per instance-hour is that fee over
instances × hours, from the cheapest offering EC2 makes now for the queue's size and a one-day block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fmcluster import aws
from fmcluster.pricing.rates import PriceError
from fmcluster.spec.decisions import ultraserver_shape
from fmcluster.spec.models import Queue, Spec, max_nodes

#: The block length asked about: one day, the shortest Capacity Block EC2 sells (1 to 14 days in 1-day steps).
OFFERING_HOURS = 24


@dataclass(frozen=True)
class BlockPrice:
    usd_per_instance_hour: float
    note: str


def offering_request(queue: Queue) -> dict[str, Any]:
    request: dict[str, Any] = {"CapacityDurationHours": OFFERING_HOURS}
    shape = ultraserver_shape(queue.capacity.ultraserver) if queue.capacity.ultraserver else None
    if shape is not None:
        request.update(UltraserverType=shape.name, UltraserverCount=max(1, max_nodes(queue) // shape.instances))
    else:
        request.update(InstanceType=queue.instance_type, InstanceCount=max_nodes(queue))
    return request


def block_price(offerings: list[dict[str, Any]]) -> BlockPrice | None:
    """The cheapest priced offering as USD per instance-hour (None: no offering carries a fee)."""
    priced = [o for o in offerings if o.get("UpfrontFee") and o.get("CurrencyCode", "USD") == "USD"
              and o.get("InstanceCount") and o.get("CapacityBlockDurationHours")]
    if not priced:
        return None
    best = min(priced, key=lambda o: float(o["UpfrontFee"]))
    hours, instances = int(best["CapacityBlockDurationHours"]), int(best["InstanceCount"])
    fee = float(best["UpfrontFee"])
    start = best.get("StartDate")
    when = f" from {start:%Y-%m-%d %H:%M} UTC" if hasattr(start, "strftime") else ""
    return BlockPrice(round(fee / instances / hours, 4),
                      f"Capacity Block (EC2 DescribeCapacityBlockOfferings: ${fee:,.2f} upfront for {instances} × "
                      f"{best.get('InstanceType')} × {hours} h in {best.get('AvailabilityZone')}{when})")


def fetch_capacity_block_prices(spec: Spec, region: str, ec2: Any = None) -> dict[str, BlockPrice | None]:
    """Per Capacity Block queue name, the price of the cheapest offering EC2 makes now (None: no priced offering)."""
    queues = [q for q in spec.queues if q.capacity.type == "capacity-block"]
    if not queues:
        return {}
    try:
        client = ec2 or aws.client("ec2", region, aws.READING)
        return {q.name: block_price(client.describe_capacity_block_offerings(**offering_request(q))
                                    .get("CapacityBlockOfferings", [])) for q in queues}
    except Exception as exc:  # any failure becomes one clear message, never a traceback
        detail = str(aws.describe_error("EC2 DescribeCapacityBlockOfferings", exc))
        raise PriceError(f"--live-prices: could not read Capacity Block offerings: {detail}\n"
                         "  → run without --live-prices to use the bundled prices") from None
