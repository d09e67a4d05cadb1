"""What the network fmcluster creates costs before any traffic: its NAT gateway and that gateway's public
IPv4 address. A spec that names its own subnet pays for no network of fmcluster's."""

from __future__ import annotations

from fmcluster.spec.models import Spec
from fmcluster.spec.networking import creates_network

# AWS's published price of a NAT gateway (Amazon VPC pricing, "NAT Gateway pricing"): per hour it exists,
# plus the same per GB it processes. Bundled for the regions where it is $0.045; elsewhere the plan says the
# price is not known rather than guess.
NAT_GATEWAY_USD_PER_HOUR = 0.045
NAT_GATEWAY_USD_PER_GB = 0.045
NAT_GATEWAY_PRICED_REGIONS = ("us-east-1", "us-east-2", "us-west-2")
# Every public IPv4 address is billed per hour since February 2024 (Amazon VPC pricing, "Public IPv4
# address"): the NAT gateway's Elastic IP.
PUBLIC_IPV4_USD_PER_HOUR = 0.005
NETWORK_NOTE = (f"${NAT_GATEWAY_USD_PER_HOUR} per NAT gateway-hour plus ${NAT_GATEWAY_USD_PER_GB}/GB processed, and "
                f"${PUBLIC_IPV4_USD_PER_HOUR} per public IPv4 address-hour (Amazon VPC pricing, "
                "aws.amazon.com/vpc/pricing); traffic extra")


def nat_gateway_usd_per_hour(region: str | None) -> float | None:
    """One NAT gateway with its public IPv4 address, per hour it exists; None when the region's price is not
    bundled."""
    if region not in NAT_GATEWAY_PRICED_REGIONS:
        return None
    return round(NAT_GATEWAY_USD_PER_HOUR + PUBLIC_IPV4_USD_PER_HOUR, 4)


def network_usd_per_hour(spec: Spec) -> float | None:
    """What the created network costs per hour before any traffic (NAT gateway and its address); 0 when the
    spec's own network is used; None when the region's NAT gateway price is not bundled."""
    if not creates_network(spec):
        return 0.0
    return nat_gateway_usd_per_hour(spec.region)
