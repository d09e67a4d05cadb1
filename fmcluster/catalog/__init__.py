"""Instance catalog: facts about the accelerated EC2 instance types fmcluster can launch.

The data lives in ``instances.yaml`` next to this module (shipped inside the wheel and read with
:mod:`importlib.resources`). It is parsed once, validated, and returned as frozen pydantic models.
Every fact carries a confidence label (``local``, ``doc``, ``secondary``, ``derived``,
``unconfirmed``) per group of facts; see ``meta.confidence_labels`` in the YAML.

Public API::

    instance("p5.48xlarge")          -> InstanceFacts | None
    instance_names()                 -> list[str]
    is_valid_ec2_type_name("m7i-flex.large") -> True
    fsx_lustre_facts()               -> FsxLustreFacts
    price_as_of()                    -> "2026-09-19"
"""

from __future__ import annotations

import functools
from importlib import resources

import yaml

from fmcluster.catalog.facts import (
    CONFIDENCE_GROUPS,
    CONFIDENCE_LABELS,
    Accelerator,
    CatalogMeta,
    ConfidenceLabel,
    Efa,
    FsxLustreFacts,
    InstanceFacts,
    Interconnect,
    OnDemandPrices,
    Price,
    UltraServer,
    UltraServerType,
    _Catalog,
)
from fmcluster.catalog.type_names import COMMON_EC2_TYPES, is_valid_ec2_type_name

__all__ = [
    "Accelerator",
    "CatalogMeta",
    "ConfidenceLabel",
    "Efa",
    "FsxLustreFacts",
    "InstanceFacts",
    "Interconnect",
    "Price",
    "UltraServer",
    "UltraServerType",
    "COMMON_EC2_TYPES",
    "CONFIDENCE_GROUPS",
    "CONFIDENCE_LABELS",
    "catalog_meta",
    "fsx_lustre_facts",
    "general_price",
    "instance",
    "instance_names",
    "is_valid_ec2_type_name",
    "on_demand_usd_per_hour",
    "price_as_of",
]

_DATA_FILE = "instances.yaml"


@functools.cache
def _catalog() -> _Catalog:
    text = resources.files(__name__).joinpath(_DATA_FILE).read_text(encoding="utf-8")
    return _Catalog.model_validate(yaml.safe_load(text))


# --- public API ---------------------------------------------------------------------------------


def instance(name: str) -> InstanceFacts | None:
    """Facts for one instance type, or ``None`` if it is not in the catalog."""
    return _catalog().instances.get(name)


def on_demand_usd_per_hour(name: str | None) -> float | None:
    """The bundled On-Demand USD per instance-hour of ``name``; ``None`` when the type is not in the catalog or
    has no On-Demand SKU. The one reading of it: :mod:`fmcluster.pricing` rates with it, and the spec ranks a
    queue's instance types by it (the spec cannot import the pricing, which reads the spec)."""
    facts = instance(name) if name else None
    if facts is None and name:
        return _catalog().on_demand_prices.usd_per_hour.get(name)
    return facts.usd_per_hour if facts is not None else None


def general_price(name: str) -> tuple[float, OnDemandPrices] | None:
    """The bundled On-Demand price of a type outside the accelerated catalog, with where it comes from; None when
    fmcluster bundles none for it."""
    prices = _catalog().on_demand_prices
    usd = prices.usd_per_hour.get(name)
    return (usd, prices) if usd is not None else None


def instance_names() -> list[str]:
    """Catalog instance type names, in file order."""
    return list(_catalog().instances)


def catalog_meta() -> CatalogMeta:
    return _catalog().meta


def fsx_lustre_facts() -> FsxLustreFacts:
    return _catalog().fsx_lustre


def price_as_of(name: str | None = None) -> str | None:
    """The ``as_of`` date of one instance's price, or (no name) the latest price date in the catalog."""
    if name is not None:
        facts = instance(name)
        return facts.price.as_of if facts is not None else None
    dates = [i.price.as_of for i in _catalog().instances.values() if i.price.as_of]
    return max(dates) if dates else None
