"""`plan --live-prices` for Capacity Block queues: EC2's own offerings, not a price list.

AWS sells Capacity Blocks at an upfront fee for a whole block (DescribeCapacityBlockOfferings ``UpfrontFee`` for
``InstanceCount`` instances over ``CapacityBlockDurationHours``; UltraServers by ``UltraserverType`` and
``UltraserverCount``). The Pricing API has no Capacity Block rates, so the rate per instance-hour is that fee over
instances × hours, from the cheapest offering EC2 makes now for the queue's size and a one-day block.

A queue on a bought block: EC2 returns no fee for it (botocore's EC2 model: only CapacityBlockOffering,
CapacityBlockOfferingSegment and the extension shapes carry ``UpfrontFee``; CapacityReservation and CapacityBlock
carry none), so the best AWS source is the fee EC2 asks now for the same block: its instance type (or UltraServer
type) and count from DescribeCapacityReservations, for its own length in days. The note says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fmcluster.connection import aws
from fmcluster.pricing.rates import PriceError
from fmcluster.spec.decisions import ultraserver_shape
from fmcluster.spec.models import Queue, Spec, max_nodes

#: The block length asked about: one day, the shortest Capacity Block EC2 sells (1 to 14 days in 1-day steps).
OFFERING_HOURS = 24


@dataclass(frozen=True)
class BlockPrice:
    usd_per_instance_hour: float
    note: str
    # The bought block's own length (its dates, as EC2 sells it); None for an offering the queue has not bought.
    hours: int | None = None


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
    """Per Capacity Block queue name, the price of its bought block (as EC2 sells the same block now), or of the
    cheapest offering EC2 makes now for a queue with no block yet (None: no priced offering)."""
    queues = [q for q in spec.queues if q.capacity.type == "capacity-block"]
    if not queues:
        return {}
    try:
        client = ec2 or aws.client("ec2", region, aws.READING)
        return {q.name: _queue_price(client, q) for q in queues}
    except Exception as exc:  # any failure becomes one clear message, never a traceback
        detail = str(aws.describe_error("EC2 DescribeCapacityBlockOfferings", exc))
        raise PriceError(f"--live-prices: could not read Capacity Block offerings: {detail}\n"
                         "  → run without --live-prices to use the bundled prices") from None


def _queue_price(ec2: Any, queue: Queue) -> BlockPrice | None:
    rid = queue.capacity.reservation_id
    bought = _reservation(ec2, rid) if rid else []
    if not bought or bought[0].get("ReservationType") != "capacity-block":
        price = block_price(ec2.describe_capacity_block_offerings(**offering_request(queue))
                            .get("CapacityBlockOfferings", []))
        if price is None or rid:  # a reservation that is no block: preflight says why
            return price
        return BlockPrice(price.usd_per_instance_hour, f"{price.note}; no block bought yet: `fmcluster capacity "
                                                       "find SPEC` lists the offerings, `fmcluster capacity buy` "
                                                       "buys one")
    block = bought[0]
    request = offering_request(queue)
    if "InstanceType" in request:
        request.update(InstanceType=block["InstanceType"], InstanceCount=int(block["TotalInstanceCount"]))
    hours = sold_hours(block.get("StartDate"), block.get("EndDate"))
    request["CapacityDurationHours"] = hours
    price = block_price(ec2.describe_capacity_block_offerings(**request).get("CapacityBlockOfferings", []))
    if price is None:
        return None
    return BlockPrice(price.usd_per_instance_hour,
                      f"Capacity Block {rid}: EC2 returns no fee for a bought block, so this is what it asks now for "
                      f"the same block — {price.note}", hours)


def _reservation(ec2: Any, rid: str) -> list[dict[str, Any]]:
    """The reservation, or [] when EC2 does not know it (preflight says why; the plan prices an offering)."""
    from botocore.exceptions import ClientError

    try:
        return ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code", "")).startswith("InvalidCapacityReservationId"):
            return []
        raise


def sold_hours(start: Any, end: Any) -> int:
    """A block's length as EC2 sells it: whole days, 1 to 14, then weeks up to 182 days (EC2 user guide, "Capacity
    Blocks for ML"); a block that ends at 11:30 UTC after a start at another time rounds to the nearest."""
    if start is None or end is None:
        return OFFERING_HOURS
    days = max(1, round((end - start).total_seconds() / 86400))
    if days > 14:
        days = min(182, -(-days // 7) * 7)
    return days * 24
