"""Per instance-hour rates by capacity type: the bundled catalog (default) or the AWS Pricing API.

On-Demand and Spot queues are priced at the On-Demand rate (Spot is not bundled, so that is its ceiling);
an On-Demand Capacity Reservation bills at the On-Demand rate; a Capacity Block at its own rate, never at
On-Demand. Prices are never guessed. A type the catalog has no price for (or a Capacity Block queue whose type
has no bundled block rate) stays ``None`` and the report shows "n/a"; a fallback (a Capacity Block rate instead
of On-Demand, for a type with no On-Demand price) is always labelled as such.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fmcluster import catalog
from fmcluster.catalog import InstanceFacts
from fmcluster.connection import aws
from fmcluster.errors import FmclusterError
from fmcluster.spec.models import Queue

PRICING_REGION = "us-east-1"  # the Pricing API's own endpoint; it serves every region's prices
# The Pricing API's EC2 `location` attribute is the region's display name, not its code.
REGION_LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "ca-central-1": "Canada (Central)",
    "eu-west-1": "EU (Ireland)",
    "eu-west-2": "EU (London)",
    "eu-west-3": "EU (Paris)",
    "eu-central-1": "EU (Frankfurt)",
    "eu-north-1": "EU (Stockholm)",
    "eu-south-2": "EU (Spain)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-northeast-2": "Asia Pacific (Seoul)",
    "ap-south-1": "Asia Pacific (Mumbai)",
    "ap-south-2": "Asia Pacific (Hyderabad)",
    "ap-southeast-1": "Asia Pacific (Singapore)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
    "sa-east-1": "South America (Sao Paulo)",
}


class PriceError(FmclusterError):
    """--live-prices could not get prices; the message says why and how to go on without them."""

    exit_code = 1


@dataclass(frozen=True)
class QueuePrice:
    """USD per instance-hour, what kind of price it is, and anything the reader should know about it."""

    usd_per_hour: float | None
    basis: str | None  # "on-demand" | "capacity-block" | None (unknown)
    note: str
    as_of: str | None


def _bundled_price(facts: InstanceFacts | None, name: str, capacity_type: str, region: str) -> QueuePrice:
    if facts is None:
        general = catalog.general_price(name)
        if general is None:
            return QueuePrice(None, None, f"{name} is not in fmcluster's catalog: price unknown (no bundled price; "
                              "--live-prices reads it from the AWS Pricing API)", None)
        usd, prices = general
        where = "" if prices.region == region else f"; the bundled price is for {prices.region}, not {region}"
        return QueuePrice(usd, "on-demand", "On-Demand" + where, prices.as_of)
    price = facts.price
    where = "" if price.region == region else f"; the bundled price is for {price.region}, not {region}"
    block = price.capacity_block_usd_per_hour
    block_note = "Capacity Block price"
    if block is None and price.capacity_block_usd_per_accelerator_hour is not None:
        # AWS bills Capacity Blocks per accelerator-hour; per instance is that rate x accelerators.
        block = round(price.capacity_block_usd_per_accelerator_hour * facts.accelerators, 4)
        block_note = (
            f"Capacity Block price (${price.capacity_block_usd_per_accelerator_hour}/accelerator-h x "
            f"{facts.accelerators})"
        )
    block_as_of = price.as_of
    if price.capacity_block_source and block is not None:
        # a rate from its own page carries that page's date in the note, not the catalog's
        block_note, block_as_of = f"{block_note}: {price.capacity_block_source}", None
    if capacity_type == "capacity-block":
        if block is not None:
            return QueuePrice(block, "capacity-block", block_note + where, block_as_of)
        # A block bills its own upfront rate, not On-Demand: with none bundled the queue's price is unknown, said
        # and left out of the total rather than shown at another rate.
        on_demand = f" (On-Demand would be ${price.usd_per_hour:,.4f}/h, but a block bills its own rate)" \
            if price.usd_per_hour is not None else ""
        return QueuePrice(None, None, f"{name}'s Capacity Block rate is not bundled: price unknown{on_demand}; "
                          "`plan --live-prices` reads EC2's offering", price.as_of)
    if price.usd_per_hour is not None:
        note = "On-Demand"
        if capacity_type == "spot":
            note += " (Spot costs less; Spot prices are not bundled)"
        elif capacity_type == "reservation":
            note += " (an On-Demand Capacity Reservation bills at the On-Demand rate)"
        return QueuePrice(price.usd_per_hour, "on-demand", note + where, price.as_of)
    if block is not None:
        return QueuePrice(
            block,
            "capacity-block",
            f"no On-Demand price in the catalog; {block_note} shown" + where,
            block_as_of,
        )
    return QueuePrice(None, None, "no On-Demand or Capacity Block price in the catalog", price.as_of)


class PriceBook:
    """Bundled catalog prices. ``source`` and ``as_of`` describe where the figures come from."""

    source = "bundled"

    def __init__(self, region: str):
        self.region = region

    @property
    def as_of(self) -> str | None:
        return catalog.price_as_of()

    def instance_price(self, name: str, capacity_type: str = "on-demand") -> QueuePrice:
        return _bundled_price(catalog.instance(name), name, capacity_type, self.region)

    def queue_price(self, queue: Queue) -> QueuePrice:
        price = self.instance_price(queue.instance_type, queue.capacity.type)
        if queue.capacity.type == "capacity-block" and not queue.capacity.reservation_id:
            # no block bought yet: where to find one, and how to see what EC2 asks for it now
            return QueuePrice(price.usd_per_hour, price.basis, f"{price.note}; no block bought yet: `fmcluster "
                              "capacity find SPEC` lists the offerings (`plan --live-prices` prices the cheapest)",
                              price.as_of)
        return price

    def block_hours(self, queue: Queue) -> int | None:
        """The length of the Capacity Block the queue runs on, when known: bundled prices read no block."""
        return None


class LivePriceBook(PriceBook):
    """On-Demand prices read from the AWS Pricing API now; Capacity Block rates still come from the
    catalog (the Pricing API has none)."""

    source = "live"

    def __init__(self, region: str, on_demand: dict[str, float | None],
                 capacity_blocks: dict[str, Any] | None = None):
        super().__init__(region)
        self.on_demand = on_demand
        # queue name -> capacity_block_prices.BlockPrice (or None: EC2 offered no priced block)
        self.capacity_blocks = capacity_blocks or {}
        self._as_of = _dt.datetime.now(_dt.timezone.utc).date().isoformat()

    def queue_price(self, queue: Queue) -> QueuePrice:
        block = self.capacity_blocks.get(queue.name)
        if queue.capacity.type == "capacity-block" and block is not None:
            return QueuePrice(block.usd_per_instance_hour, "capacity-block", block.note, self._as_of)
        price = super().queue_price(queue)
        if queue.capacity.type == "capacity-block" and queue.name in self.capacity_blocks:
            return QueuePrice(price.usd_per_hour, price.basis,
                              f"{price.note}; EC2 offers no priced Capacity Block for this queue now", price.as_of)
        return price

    def block_hours(self, queue: Queue) -> int | None:
        block = self.capacity_blocks.get(queue.name)
        return getattr(block, "hours", None) if queue.capacity.type == "capacity-block" else None

    @property
    def as_of(self) -> str | None:
        return self._as_of

    def instance_price(self, name: str, capacity_type: str = "on-demand") -> QueuePrice:
        bundled = super().instance_price(name, capacity_type)
        live = self.on_demand.get(name)
        if capacity_type == "capacity-block" and bundled.basis != "capacity-block":
            return bundled  # the Pricing API has On-Demand rates only: a block's stays unknown
        if capacity_type == "capacity-block" and bundled.basis == "capacity-block":
            return QueuePrice(
                bundled.usd_per_hour,
                bundled.basis,
                f"{bundled.note} (bundled, as of {bundled.as_of}; the Pricing API has no "
                "Capacity Block rates)",
                bundled.as_of,
            )
        if live is not None:
            note = "On-Demand (AWS Pricing API)"
            if capacity_type == "spot":
                note += "; Spot costs less"
            elif capacity_type == "reservation":
                note += "; an On-Demand Capacity Reservation bills at this rate"
            return QueuePrice(live, "on-demand", note, self._as_of)
        if bundled.basis == "capacity-block":
            return QueuePrice(
                bundled.usd_per_hour,
                bundled.basis,
                f"no On-Demand price from the AWS Pricing API; {bundled.note} "
                f"(bundled, as of {bundled.as_of})",
                bundled.as_of,
            )
        return QueuePrice(
            None,
            None,
            f"the AWS Pricing API lists no On-Demand Linux price for {name} in {self.region}",
            None,
        )


def on_demand_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """get_products filters for one shared-tenancy Linux On-Demand instance-hour without extra software."""
    where = (
        {"Type": "TERM_MATCH", "Field": "location", "Value": REGION_LOCATIONS[region]}
        if region in REGION_LOCATIONS
        else {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}
    )
    return [
        {"Type": "TERM_MATCH", "Field": "instanceType", "Value": instance_type},
        where,
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    ]


def parse_on_demand(price_list: Iterable[str | dict[str, Any]]) -> float | None:
    """The hourly On-Demand USD price in a get_products ``PriceList`` (JSON strings), or None."""
    for item in price_list:
        product = json.loads(item) if isinstance(item, str) else item
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = dimension.get("pricePerUnit", {}).get("USD")
                if usd is not None and dimension.get("unit", "Hrs") in ("Hrs", "Hours") and float(usd) > 0:
                    return float(usd)
    return None


def fetch_on_demand(instance_types: Iterable[str], region: str) -> dict[str, float | None]:
    """Ask the AWS Pricing API for each type's On-Demand price. Any failure raises :class:`PriceError`."""
    try:
        client = _pricing_client()
        prices: dict[str, float | None] = {}
        for name in dict.fromkeys(instance_types):
            response = client.get_products(
                ServiceCode="AmazonEC2",
                Filters=on_demand_filters(name, region),
                FormatVersion="aws_v1",
                MaxResults=20,
            )
            prices[name] = parse_on_demand(response.get("PriceList", []))
        return prices
    except PriceError:
        raise
    except Exception as exc:  # any failure becomes one clear message, never a traceback
        raise PriceError(_failure_message(exc)) from None


def _pricing_client() -> Any:
    from botocore.config import Config

    # Few retries: a user waiting on an offline report should hear about a dead endpoint quickly.
    config = Config(
        retries={"mode": "standard", "max_attempts": 2},
        connect_timeout=5,
        read_timeout=30,
        user_agent_extra="fmcluster",
    )
    return aws.session(PRICING_REGION).client(
        "pricing", endpoint_url=aws.target().endpoint_url, config=config
    )


def _failure_message(exc: BaseException) -> str:
    detail = str(aws.describe_error("AWS Pricing API (pricing.get_products)", exc))
    bundled = catalog.price_as_of()
    return (
        f"--live-prices: could not read prices: {detail}\n"
        f"  → run without --live-prices to use the bundled prices (as of {bundled})"
    )
