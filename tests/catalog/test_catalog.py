"""Instance catalog: data loads, matches the reference facts, and the name helpers behave."""

from __future__ import annotations

import pytest

from fmcluster import catalog
from fmcluster.catalog import (
    CONFIDENCE_GROUPS,
    CONFIDENCE_LABELS,
    fsx_lustre_facts,
    instance,
    instance_names,
    is_valid_ec2_type_name,
    price_as_of,
)
from fmcluster.catalog.names import suggest_instance

EXPECTED_TYPES = [
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.4xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6-b200.48xlarge",
    "p6-b300.48xlarge",
    "p6e-gb200.36xlarge",
    "trn1.32xlarge",
    "trn2.48xlarge",
    "trn2u.48xlarge",
]


def test_every_catalog_type_loads():
    assert instance_names() == EXPECTED_TYPES
    for name in EXPECTED_TYPES:
        facts = instance(name)
        assert facts is not None, name
        assert facts.name == name
        assert name.startswith(facts.family + ".")
        assert facts.accelerators >= 1
        assert facts.vcpus > 0 and facts.memory_gib > 0


def test_unknown_type_is_none():
    assert instance("p5.48xlarg") is None
    assert instance("m7i.8xlarge") is None  # head-node types carry no facts


def test_loaded_once_and_immutable():
    assert instance("p5.48xlarge") is instance("p5.48xlarge")
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError on frozen models
        instance("p5.48xlarge").vcpus = 1  # type: ignore[misc,union-attr]


def test_data_file_ships_in_package():
    from importlib import resources

    assert resources.files("fmcluster.catalog").joinpath("instances.yaml").is_file()


# --- spot checks against shared/reference/instance-facts.yaml ---------------------------------------


@pytest.mark.parametrize(
    ("name", "count", "hbm_gib", "efa_version", "efa_gbps", "cards", "efa_ifaces", "vcpus", "mem"),
    [
        ("p4d.24xlarge", 8, 40, 1, 400, 4, 4, 96, 1152),
        ("p4de.24xlarge", 8, 80, 1, 400, 4, 4, 96, 1152),
        ("p5.4xlarge", 1, 80, 2, 100, 1, 1, 16, 256),
        ("p5.48xlarge", 8, 80, 2, 3200, 32, 32, 192, 2048),
        ("p5e.48xlarge", 8, 141, 2, 3200, 32, 32, 192, 2048),
        ("p5en.48xlarge", 8, 141, 3, 3200, 16, 16, 192, 2048),
        ("p6-b200.48xlarge", 8, 179, 4, 3200, 8, 8, 192, 2048),
        ("p6-b300.48xlarge", 8, 268, 4, 6400, 17, 16, 192, 4096),
        # 16: AWS ParallelCluster 3.16.1 queues_stack.py puts one EFA interface on each of cards 1-16, none on card 0
        ("p6e-gb200.36xlarge", 4, 185, 4, 1600, 17, 16, 144, 960),
        ("trn1.32xlarge", 16, 32, 2, 800, 8, 8, 128, 512),
        ("trn2.48xlarge", 16, 96, 3, 3200, 16, 16, 192, 2048),
        ("trn2u.48xlarge", 16, 96, 3, 3200, 16, 16, 192, 2048),
    ],
)
def test_core_facts(name, count, hbm_gib, efa_version, efa_gbps, cards, efa_ifaces, vcpus, mem):
    f = instance(name)
    assert f is not None
    assert f.accelerators == count
    assert f.hbm_gib_per_accelerator == hbm_gib
    assert f.efa_supported
    assert f.efa is not None
    assert f.efa.version == efa_version
    assert f.efa.gbps == efa_gbps
    assert f.efa.network_cards == cards
    assert f.efa_interfaces == efa_ifaces
    assert f.vcpus == vcpus
    assert f.memory_gib == mem


def test_p5_48xlarge():
    f = instance("p5.48xlarge")
    assert f is not None
    assert f.accelerator.vendor == "nvidia" and f.accelerator.kind == "gpu"
    assert (f.accelerators, f.hbm_gb_per_accelerator) == (8, 80)
    assert f.hbm_gb_total == 640
    assert f.hbm_tbps_per_accelerator == 3.35
    assert f.interconnect is not None
    assert f.interconnect.name == "NVLink 4"
    assert f.interconnect.gb_s_per_accelerator == 900 and f.interconnect.bidirectional is True
    assert f.efa_interfaces == 32 and f.efa_gbps == 3200
    assert f.nvme_gb == 30400 and f.arch == "x86_64"
    # post-June-2025 price; 98.32 is the old one, kept only in notes
    assert f.usd_per_hour == 55.04
    assert f.price.region == "us-east-1"
    assert "98.32" in f.notes
    assert f.confidence["price"] == "secondary"
    assert f.confidence["accelerator"] == "local"


def test_p5_4xlarge_has_no_gpudirect_and_no_nvlink():
    f = instance("p5.4xlarge")
    assert f is not None and f.efa is not None
    assert f.interconnect is None
    assert f.efa.gpudirect_rdma is False


def test_derived_totals_agree_with_aws_quoted_totals():
    # AWS quotes these totals; they are the facts file's per-accelerator values x count.
    assert instance("p5e.48xlarge").hbm_gib_total == 1128  # type: ignore[union-attr]
    assert instance("p6-b200.48xlarge").hbm_gb_total == 1440  # type: ignore[union-attr]
    assert instance("p6-b300.48xlarge").hbm_gib_total == 2144  # type: ignore[union-attr]
    assert instance("p6e-gb200.36xlarge").hbm_gib_total == 740  # type: ignore[union-attr]
    assert instance("trn2.48xlarge").hbm_gib_total == 1536  # type: ignore[union-attr]
    assert instance("trn2.48xlarge").hbm_tbps_total == pytest.approx(46.4)  # type: ignore[union-attr]


def test_blackwell_and_hopper_specifics():
    b200 = instance("p6-b200.48xlarge")
    b300 = instance("p6-b300.48xlarge")
    p5en = instance("p5en.48xlarge")
    assert b200 is not None and b300 is not None and p5en is not None
    assert b200.hbm_gb_per_accelerator == 180 and b200.interconnect.gb_s_per_accelerator == 1800  # type: ignore[union-attr]
    assert b200.usd_per_hour == 113.9328
    assert b300.hbm_gb_per_accelerator == 288 and b300.efa.network_cards == 17  # type: ignore[union-attr]
    assert b300.usd_per_hour == 142.416
    assert p5en.usd_per_hour == 63.296 and p5en.efa.nitro == "v5"  # type: ignore[union-attr]


def test_p6e_gb200_ultraserver_and_unknowns():
    f = instance("p6e-gb200.36xlarge")
    assert f is not None
    assert f.arch == "arm64"
    assert f.is_ultraserver_only
    assert f.usd_per_hour is None
    assert f.price.capacity_block_usd_per_accelerator_hour == 10.582
    # the facts file leaves it unknown; ParallelCluster 3.16.1's launch template code attaches one per card 1-16,
    # and only efa-only interfaces on the odd cards
    assert f.efa_interfaces == 16
    assert f.efa.efa_only_cards == (1, 3, 5, 7, 9, 11, 13, 15)
    assert f.confidence["efa_version"] == "unconfirmed"
    assert "EFA v3" in f.notes  # the contradicting alternative is recorded
    assert f.ultraserver is not None
    x72 = f.ultraserver.types["u-p6e-gb200x72"]
    assert (x72.instances, x72.accelerators, x72.efa_tbps, x72.nvlink_domain_tbps) == (18, 72, 28.8, 130)
    assert x72.capacity_block_usd_per_hour == 761.904
    x36 = f.ultraserver.types["u-p6e-gb200x36"]
    assert (x36.instances, x36.accelerators) == (9, 36)
    # UltraServer totals are consistent with per-instance values
    assert x72.instances * f.accelerators == x72.gpus
    assert x72.instances * f.vcpus == x72.vcpus
    assert x72.instances * f.memory_gib == x72.memory_gib


def test_trainium():
    trn1 = instance("trn1.32xlarge")
    trn2 = instance("trn2.48xlarge")
    trn2u = instance("trn2u.48xlarge")
    assert trn1 is not None and trn2 is not None and trn2u is not None
    for f in (trn1, trn2, trn2u):
        assert f.accelerator.vendor == "aws" and f.accelerator.kind == "trainium"
        assert f.efa is not None and f.efa.gpudirect_rdma is None
    assert trn1.usd_per_hour == 21.5
    assert trn1.bf16_dense_tflops_per_accelerator == 190
    assert trn2.bf16_dense_tflops_per_accelerator == 667
    assert trn2.usd_per_hour is None  # not offered On-Demand in us-east-1
    assert "524,288 MiB" in trn2.notes  # the moto HBM conflict is recorded, 96 GiB used
    assert trn2u.ultraserver is not None
    u = trn2u.ultraserver.types["u-trn2x64"]
    assert (u.instances, u.accelerators) == (4, 64)
    assert trn2u.confidence["accelerator"] == "doc"  # moto has no accelerator data for trn2u


def test_p4de_price():
    f = instance("p4de.24xlarge")
    assert f is not None and f.usd_per_hour == 27.44705
    assert instance("p4d.24xlarge").usd_per_hour == 21.9576  # type: ignore[union-attr]


# --- confidence labels ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXPECTED_TYPES)
def test_confidence_labels_present(name):
    f = instance(name)
    assert f is not None
    for group in CONFIDENCE_GROUPS:
        assert f.confidence[group] in CONFIDENCE_LABELS, (name, group)
    if f.ultraserver is not None:
        assert f.confidence["ultraserver"] in CONFIDENCE_LABELS
    assert f.price.source


def test_meta_defines_every_label():
    meta = catalog.catalog_meta()
    assert set(meta.confidence_labels) == set(CONFIDENCE_LABELS)
    assert "instance-facts.yaml" in meta.source
    assert meta.units


def test_price_as_of():
    assert price_as_of() == "2026-09-19"
    assert price_as_of("trn1.32xlarge") == "2026-07-28"
    assert price_as_of("nope.large") is None


# --- FSx for Lustre -------------------------------------------------------------------------------


def test_fsx_lustre_facts():
    fsx = fsx_lustre_facts()
    p2 = fsx.persistent_2
    assert p2.ssd_throughput_mb_s_per_tib == (125, 250, 500, 1000)
    assert set(p2.ssd_performance_per_tib) == {125, 250, 500, 1000}
    assert p2.ssd_performance_per_tib[1000].network_baseline_mb_s == 2600
    caps = p2.capacity_gib
    assert caps.first_steps == (1200, 2400) and caps.increment_after == 2400
    assert [caps.is_valid(g) for g in (1200, 2400, 4800, 7200, 3600, 600)] == [
        True, True, True, True, False, False,
    ]  # fmt: skip
    assert caps.round_up(1) == 1200 and caps.round_up(2401) == 4800 and caps.round_up(4800) == 4800
    assert "600 GiB" in caps.notes  # AWS's own conflicting minimum is recorded
    assert fsx.prices is None  # the facts file has no FSx prices
    assert "PERSISTENT_2" in fsx.efa.notes
    assert fsx.confidence["prices"] == "unconfirmed"


# --- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "p6-b200.48xlarge",
        "p6e-gb200.36xlarge",
        "m7i-flex.large",
        "trn2u.48xlarge",
        "u-6tb1.metal",
        "c7gn.16xlarge",
        "p5.48xlarge",
        "t3.nano",
        "c5.large",
        "m7i.metal-24xl",
        "x2iedn.xlarge",
    ],
)
def test_valid_names(name):
    assert is_valid_ec2_type_name(name)


@pytest.mark.parametrize(
    "name",
    ["p5.48xlarg", "P5.48XLARGE", "p5", ".large", "p5..large", "", "p5.", "large.p5", "m.large",
     "p5.48 xlarge", "p5.48xlarge ", "p5.48xlarge\n", "-p5.large", "p5-.large"],
)  # fmt: skip
def test_invalid_names(name):
    assert not is_valid_ec2_type_name(name)


def test_every_catalog_name_is_valid():
    assert all(is_valid_ec2_type_name(n) for n in instance_names())
    assert all(is_valid_ec2_type_name(n) for n in catalog.COMMON_EC2_TYPES)


@pytest.mark.parametrize(
    ("typo", "expected"),
    [
        ("p5.48xlarg", "p5.48xlarge"),
        ("p5en.48xlage", "p5en.48xlarge"),
        ("P5.48XLARGE", "p5.48xlarge"),
        ("p6b200.48xlarge", "p6-b200.48xlarge"),
        ("trn2.48xlarg", "trn2.48xlarge"),
        ("m7i.8xlarg", "m7i.8xlarge"),
        ("c5.larg", "c5.large"),
    ],
)
def test_suggest_instance(typo, expected):
    assert suggest_instance(typo) == expected


def test_suggest_instance_gives_up_on_nonsense():
    assert suggest_instance("zzzz") is None
    assert suggest_instance("") is None
