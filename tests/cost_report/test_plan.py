"""`fmcluster plan`: figures checked against sums done by hand, the JSON contract, the report, the chart."""

from __future__ import annotations

import json
import math
import socket
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from fmcluster import catalog
from fmcluster.connection import aws
from fmcluster.cost_report.command import run_plan
from fmcluster.cost_report.figures import plan_report
from fmcluster.cost_report.report import render
from fmcluster.errors import SpecError
from fmcluster.pricing.network import network_usd_per_hour
from fmcluster.pricing.rates import LivePriceBook, PriceBook, on_demand_filters, parse_on_demand
from fmcluster.spec.loader import load_spec

# Specs here name no subnet, so fmcluster creates their network: its NAT gateway is part of the total.
NETWORK = 0.05

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def write_spec(tmp_path: Path, queues: list[dict], **extra: object) -> Path:
    doc = {
        "name": "plan-test",
        "region": "us-east-1",
        "backend": "parallelcluster",
        "queues": queues,
        **extra,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def report_for(path: Path, prices: PriceBook | None = None):
    spec = load_spec(path).spec
    return plan_report(spec, prices or PriceBook(spec.region))


def run(path: Path, *, as_json: bool = False, svg: str | None = None, live: bool = False, width: int = 100):
    out = Console(width=width, record=True, force_terminal=False, color_system=None)
    err = Console(width=width, record=True, stderr=True, force_terminal=False, color_system=None)
    code = run_plan(str(path), as_json, svg, live, out, err)
    return code, out.export_text(), err.export_text()


# --- the headline case ----------------------------------------------------------------------------------


def test_sixteen_p5_nodes_by_hand(tmp_path: Path) -> None:
    path = write_spec(tmp_path, [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 16}])
    q = report_for(path).queues[0]
    assert q.accelerators == q.gpus == 128  # 16 x 8 H100
    assert q.accelerator_model == "H100 SXM"
    assert q.hbm_total_gb == 10_240  # 128 x 80 GB
    assert q.hbm_bandwidth_tbps == pytest.approx(428.8)  # 128 x 3.35 TB/s
    assert q.efa_gbps_per_node == 3_200
    assert q.efa_gbps_total == 51_200  # 16 x 3,200 Gbps
    assert q.efa_version == 2
    assert q.interconnect is not None and q.interconnect.gb_s_per_accelerator == 900
    assert q.usd_per_hour == pytest.approx(880.64)  # 16 x $55.04
    assert q.price_basis == "on-demand"


# --- every catalog family ------------------------------------------------------------------------------

# instance type: (accelerators per node, HBM GB per node, EFA Gbps per node, EFA version, $/node-hour, basis)
# HBM: nameplate GB x count; Trainium has no GB nameplate, so GiB x 1.073741824
# (trn1 512 GiB, trn2 1,536 GiB).
FAMILIES = {
    "p4d.24xlarge": (8, 320, 400, 1, 21.9576, "on-demand"),
    "p4de.24xlarge": (8, 640, 400, 1, 27.44705, "on-demand"),
    "p5.4xlarge": (1, 80, 100, 2, 6.88, "on-demand"),
    "p5.48xlarge": (8, 640, 3_200, 2, 55.04, "on-demand"),
    "p5e.48xlarge": (8, 1_128, 3_200, 2, 47.76, "capacity-block"),  # no On-Demand SKU
    "p5en.48xlarge": (8, 1_128, 3_200, 3, 63.296, "on-demand"),
    "p6-b200.48xlarge": (8, 1_440, 3_200, 4, 113.9328, "on-demand"),
    "p6-b300.48xlarge": (8, 2_304, 6_400, 4, 142.416, "on-demand"),
    "p6e-gb200.36xlarge": (4, 744, 1_600, 4, 42.328, "capacity-block"),  # 4 x $10.582 per GPU-hour
    "trn1.32xlarge": (16, 549.8, 800, 2, 21.5, "on-demand"),
    "trn2.48xlarge": (16, 1_649.3, 3_200, 3, None, None),  # no price of any kind in the catalog
}


@pytest.mark.parametrize("instance_type", sorted(FAMILIES))
def test_catalog_family(tmp_path: Path, instance_type: str) -> None:
    per_node, hbm_gb, efa_gbps, efa_version, usd, basis = FAMILIES[instance_type]
    nodes = 3
    # ParallelCluster needs a head node of the compute nodes' architecture (arm64 for GB200's Grace CPUs).
    head = "m7g.2xlarge" if catalog.instance(instance_type).arch == "arm64" else "m7i.2xlarge"
    queue = {"name": "train", "instance_type": instance_type, "nodes": nodes}
    if catalog.instance(instance_type).is_ultraserver_only:  # EC2 sells it only in UltraServer Capacity Blocks
        queue["capacity"] = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
    path = write_spec(tmp_path, [queue], head_node={"instance_type": head})
    report = report_for(path)
    q = report.queues[0]
    assert q.accelerators == per_node * nodes
    assert q.hbm_total_gb == pytest.approx(hbm_gb * nodes, abs=0.2)
    assert q.efa_gbps_per_node == efa_gbps
    assert q.efa_gbps_total == efa_gbps * nodes
    assert q.efa_version == efa_version
    assert q.price_basis == basis
    if usd is None:
        assert q.usd_per_hour is None
        assert report.usd_per_hour is None
        assert any(instance_type in item for item in report.cost.unknown)
    else:
        assert q.usd_per_hour == pytest.approx(usd * nodes)
        assert report.usd_per_hour == pytest.approx(usd * nodes + NETWORK)
        assert report.usd_per_day == pytest.approx((usd * nodes + NETWORK) * 24, abs=0.01)


def test_capacity_block_fallback_is_labelled(tmp_path: Path) -> None:
    path = write_spec(tmp_path, [{"name": "train", "instance_type": "p5e.48xlarge", "nodes": 2}])
    q = report_for(path).queues[0]
    assert "no On-Demand price" in q.price_note and "Capacity Block" in q.price_note
    code, text, _ = run(path)
    assert code == 0 and "Capacity Block" in text


def test_trn2_price_is_unknown_not_invented(tmp_path: Path) -> None:
    path = write_spec(tmp_path, [{"name": "train", "instance_type": "trn2.48xlarge", "nodes": 2}])
    code, text, _ = run(path)
    assert code == 0
    assert "n/a" in text
    payload = json.loads(run(path, as_json=True)[1])
    assert payload["queues"][0]["usd_per_hour"] is None and payload["usd_per_hour"] is None


# --- queue shapes ----------------------------------------------------------------------------------------


def test_dynamic_queue_counts_its_maximum(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path, [{"name": "gpu", "instance_type": "p5en.48xlarge", "nodes": {"min": 1, "max": 4}}]
    )
    q = report_for(path).queues[0]
    assert (q.nodes, q.min_nodes, q.dynamic) == (4, 1, True)
    assert q.accelerators == 32
    assert q.efa_gbps_total == 12_800
    assert q.usd_per_hour == pytest.approx(4 * 63.296)
    code, text, _ = run(path)
    assert code == 0 and "1-4" in text


def test_multi_queue_cluster(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        [
            {"name": "small", "instance_type": "p5.48xlarge", "nodes": 2},
            {"name": "big", "instance_type": "p6-b200.48xlarge", "nodes": {"min": 0, "max": 6}},
            {"name": "cpu", "instance_type": "c7i.8xlarge", "nodes": {"min": 0, "max": 8}},
        ],
        workload={"model_params_b": 8, "checkpoint_every_min": 60},
        storage={"lustre": {"capacity_gib": 2400, "throughput_per_tib": 125}},
    )
    report = report_for(path)
    small, big, cpu = report.queues
    assert (small.accelerators, big.accelerators, cpu.accelerators) == (16, 48, 0)
    assert cpu.usd_per_hour is None and cpu.efa_gbps_total is None
    assert report.workload is not None and report.workload.training_queue == "big"  # most accelerators
    assert report.workload.allreduce_gpus == 48
    assert report.usd_per_hour == pytest.approx(2 * 55.04 + 6 * 113.9328 + NETWORK)
    assert "queue cpu (c7i.8xlarge)" in report.cost.unknown
    assert "FSx for Lustre" in report.cost.unknown


def test_spec_without_workload(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2}],
        storage={"lustre": {"capacity_gib": 1200}},
    )
    report = report_for(path)
    assert report.workload is None
    assert report.bottleneck is None
    assert any("workload" in line for line in report.advice)
    payload = json.loads(report.to_json())
    assert payload["workload"] is None
    code, text, _ = run(path)
    assert code == 0 and "not assessed" in text


# --- workload figures, by hand ---------------------------------------------------------------------------


def test_workload_figures_for_70b_on_16_p5(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 16}],
        storage={"lustre": {"capacity_gib": 4800, "throughput_per_tib": 250}},
        workload={"model_params_b": 70, "checkpoint_every_min": 30},
    )
    report = report_for(path)
    lustre = report.storage.lustre
    assert lustre is not None and lustre.throughput_gb_s == pytest.approx(1.2)  # 4.8 TiB x 250 MB/s/TiB
    w = report.workload
    assert w is not None
    assert w.state_bytes == 16 * 70e9 == 1.12e12
    assert w.fits_in_hbm is True  # 1.12 TB <= 0.7 x 10.24 TB
    assert w.min_nodes == 3  # ceil(1.12e12 / (0.7 x 640e9)) = ceil(2.5)
    assert w.checkpoint_bytes == 14 * 70e9
    assert w.checkpoint_limited_by == "lustre"  # 1.2 GB/s << 16 x 3,200 Gbps / 8
    assert w.checkpoint_seconds == pytest.approx(980e9 / 1.2e9, abs=0.01)  # 816.67 s
    assert w.checkpoint_fraction == pytest.approx(816.67 / 1800, abs=1e-4)
    # ring all-reduce: 2 x 127/128 x 140 GB / (3,200 Gbps / 8 GPUs / 8 bits = 50 GB/s per GPU)
    assert w.allreduce_over == "EFA" and w.allreduce_gb_s_per_gpu == 50
    assert w.allreduce_seconds == pytest.approx(2 * 127 / 128 * 140e9 / 50e9, abs=1e-3)
    assert report.bottleneck == "checkpoint_write"
    assert any("45% of each 30-min interval" in line for line in report.advice)
    assert any("FSx prices are not bundled" in line for line in report.advice)


def test_state_that_does_not_fit(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2}],
        workload={"model_params_b": 405, "checkpoint_every_min": 60},
    )
    report = report_for(path)
    w = report.workload
    assert w is not None and w.fits_in_hbm is False
    assert w.min_nodes == math.ceil(405e9 * 16 / (0.7 * 640e9)) == 15
    assert w.checkpoint_seconds is None  # no Lustre
    assert report.bottleneck == "hbm_capacity"
    assert "at least 15 nodes" in report.advice[0]


def test_checkpoint_limited_by_the_nodes_network(tmp_path: Path) -> None:
    # One p5.4xlarge (100 Gbps = 12.5 GB/s) against 24,000 GiB x 1,000 MB/s/TiB = 24 GB/s of Lustre.
    path = write_spec(
        tmp_path,
        [{"name": "train", "instance_type": "p5.4xlarge", "nodes": 1}],
        storage={"lustre": {"capacity_gib": 24000, "throughput_per_tib": 1000}},
        workload={"model_params_b": 1, "checkpoint_every_min": 10},
    )
    w = report_for(path).workload
    assert w is not None
    assert w.checkpoint_limited_by == "network"
    assert w.checkpoint_write_gb_s == pytest.approx(12.5)
    assert w.checkpoint_seconds == pytest.approx(14e9 / 12.5e9, abs=0.01)
    assert w.allreduce_seconds == 0  # one GPU: nothing to reduce


def test_single_node_allreduce_runs_on_nvlink(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 1}],
        workload={"model_params_b": 7, "checkpoint_every_min": 30},
    )
    w = report_for(path).workload
    assert w is not None and w.allreduce_over == "NVLink 4"
    # 900 GB/s bidirectional -> 450 GB/s per direction; 2 x 7/8 x 14 GB / 450 GB/s
    assert w.allreduce_seconds == pytest.approx(2 * 7 / 8 * 14e9 / 450e9, abs=1e-3)


def test_tokens_per_second_beyond_peak_is_flagged(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 16}],
        workload={
            "model_params_b": 70,
            "checkpoint_every_min": 30,
            "tokens_per_second": 400000,
            "sequence_length": 8192,
        },
    )
    report = report_for(path)
    w = report.workload
    assert w is not None
    # 6 x 70e9 x 4e5 FLOP/s over 128 x 989.4 TFLOPS
    assert w.implied_bf16_utilization == pytest.approx(6 * 70e9 * 4e5 / (128 * 989.4e12), abs=1e-4)
    assert report.bottleneck == "compute"  # no Lustre, state fits: the tokens/s target is the limit
    assert any("sequences of 8,192" in line for line in report.advice)


# --- configs/ and the JSON contract ---------------------------------------------------------------------

QUEUE_KEYS = {
    "name",
    "instance_type",
    "nodes",
    "min_nodes",
    "accelerators",
    "accelerator_model",
    "gpus",
    "hbm_total_gb",
    "hbm_bandwidth_tbps",
    "interconnect",
    "efa_version",
    "efa_gbps_per_node",
    "efa_gbps_total",
    "usd_per_hour",
}
WORKLOAD_KEYS = {
    "state_bytes",
    "state_accounting",
    "fits_in_hbm",
    "min_nodes",
    "checkpoint_bytes",
    "checkpoint_seconds",
    "checkpoint_fraction",
    "allreduce_seconds",
}
TOP_KEYS = {
    "cluster",
    "backend",
    "region",
    "queues",
    "storage",
    "workload",
    "usd_per_hour",
    "usd_per_day",
    "bottleneck",
    "advice",
    "prices",
}


# The instance types the examples use, hand-typed from ../shared/reference/instance-facts.yaml (accelerator.count,
# hbm_per_gpu_GB, hbm_bandwidth_per_gpu_TBps, efa_total_Gbps, efa_version, on_demand_usd_per_hr_us_east_1 as of
# 2026-09-19 from AWS's public price feed): GPUs, HBM GB and TB/s per GPU, EFA Gbps per node, EFA generation, USD/h.
# c7i.8xlarge (no GPU) is not in fmcluster's catalog.
FACTS: dict[str, tuple[int, float, float, float, int, float]] = {
    "p5.4xlarge": (1, 80, 3.35, 100, 2, 6.88),  # H100; EFAv2 (Nitro v4)
    "p5.48xlarge": (8, 80, 3.35, 3200, 2, 55.04),  # H100; EFAv2 (Nitro v4)
    "p5en.48xlarge": (8, 141, 4.8, 3200, 3, 63.296),  # H200; EFAv3 (Nitro v5)
    "p6-b200.48xlarge": (8, 180, 8.0, 3200, 4, 113.9328),  # B200 180 GB per AWS/NVIDIA; EFAv4 (Nitro v6)
    "p6-b300.48xlarge": (8, 288, 8.0, 6400, 4, 142.416),  # B300 288 GB nameplate; EFAv4 (Nitro v6)
}
PRICES_AS_OF = "2026-09-19"


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_plan_json_on_every_config_matches_the_catalog(config: Path) -> None:
    code, text, _ = run(config, as_json=True)
    assert code == 0
    payload = json.loads(text)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    assert TOP_KEYS <= set(payload)
    assert payload["cluster"] == raw["name"] and payload["backend"] == raw["backend"]
    assert payload["prices"] == {"source": "bundled", "as_of": PRICES_AS_OF}
    assert isinstance(payload["advice"], list) and all(isinstance(a, str) for a in payload["advice"])
    for queue, spec_queue in zip(payload["queues"], raw["queues"], strict=True):
        assert QUEUE_KEYS <= set(queue)
        nodes = spec_queue["nodes"] if isinstance(spec_queue["nodes"], int) else spec_queue["nodes"]["max"]
        facts = FACTS.get(spec_queue["instance_type"])
        assert queue["nodes"] == nodes
        if facts is None:
            assert queue["accelerators"] == 0 and queue["usd_per_hour"] is None
            continue
        gpus, hbm_gb, hbm_tbps, efa_gbps, efa_version, usd_per_hour = facts
        assert queue["gpus"] == queue["accelerators"] == gpus * nodes
        assert queue["hbm_total_gb"] == pytest.approx(gpus * hbm_gb * nodes)
        assert queue["hbm_bandwidth_tbps"] == pytest.approx(gpus * hbm_tbps * nodes)
        if spec_queue.get("efa") is False:  # EFA turned off in the spec: no EFA figures
            assert queue["efa_gbps_total"] is None
        else:
            assert queue["efa_gbps_total"] == efa_gbps * nodes
            assert queue["efa_version"] == efa_version
        if queue["price_basis"] == "on-demand":
            assert queue["usd_per_hour"] == pytest.approx(usd_per_hour * nodes)
    if raw.get("workload"):
        assert WORKLOAD_KEYS <= set(payload["workload"])
        assert payload["workload"]["state_bytes"] == 16 * raw["workload"]["model_params_b"] * 10**9
    else:
        assert payload["workload"] is None
    if raw.get("storage", {}).get("lustre"):
        lustre = raw["storage"]["lustre"]
        expected = lustre["capacity_gib"] / 1000 * lustre["throughput_per_tib"] / 1000
        assert payload["storage"]["lustre"]["throughput_gb_s"] == pytest.approx(expected)


def test_p5_odcr_example_figures() -> None:
    config = next(p for p in CONFIGS if p.name == "p5-odcr-parallelcluster.yaml")
    payload = json.loads(run(config, as_json=True)[1])
    queue = payload["queues"][0]
    assert (queue["gpus"], queue["hbm_total_gb"], queue["efa_gbps_total"]) == (128, 10240, 51200)
    assert payload["storage"]["lustre"]["throughput_gb_s"] == pytest.approx(1.2)
    assert payload["workload"]["checkpoint_seconds"] == pytest.approx(816.67, abs=0.01)
    assert payload["bottleneck"] == "checkpoint_write"
    assert payload["usd_per_hour"] == pytest.approx(16 * 55.04)
    assert payload["cost"]["head_node_usd_per_hour"] is None  # m7i has no bundled price


# --- the human report ---------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_report_fits_100_columns(config: Path) -> None:
    spec = load_spec(config).spec
    console = Console(width=100, record=True, force_terminal=False, color_system=None)
    console.print(render(plan_report(spec, PriceBook(spec.region))))
    lines = console.export_text().splitlines()
    assert lines and max(len(line) for line in lines) <= 100
    text = "\n".join(lines)
    assert "as of " + str(catalog.price_as_of()) in text
    assert "Cost" in text and "$/day" in text


def test_report_of_a_wide_cluster_fits_100_columns(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        [
            # EC2 sells p6e-gb200 only in UltraServer Capacity Blocks, whose nodes ParallelCluster keeps static
            {"name": "pretrain-main-queue", "instance_type": "p6e-gb200.36xlarge", "nodes": 72,
             "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0",
                          "ultraserver": "u-p6e-gb200x72"}},
            {"name": "eval", "instance_type": "p6e-gb200.36xlarge", "nodes": 18,
             "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef1",
                          "ultraserver": "u-p6e-gb200x72"}},
            {"name": "prep", "instance_type": "c7g.8xlarge", "nodes": {"min": 0, "max": 128}},
        ],
        # one architecture on ParallelCluster: arm64, as GB200's Grace CPUs
        head_node={"instance_type": "m7g.4xlarge"},
        storage={
            "lustre": {"capacity_gib": 96000, "throughput_per_tib": 125, "s3_import": "s3://bucket/data"},
            "home": {"type": "efs"},
        },
        workload={
            "model_params_b": 1800,
            "checkpoint_every_min": 15,
            "tokens_per_second": 1e6,
            "sequence_length": 4096,
        },
    )
    code, text, _ = run(path, width=100)
    assert code == 0
    assert max(len(line) for line in text.splitlines()) <= 100


# --- chart and SVG ---------------------------------------------------------------------------------------


def test_svg_is_written_and_is_valid_xml(tmp_path: Path) -> None:
    config = next(p for p in CONFIGS if p.name == "p5-odcr-parallelcluster.yaml")
    svg = tmp_path / "checkpoint.svg"
    code, text, err = run(config, svg=str(svg))
    assert code == 0 and "wrote" in err
    root = ET.fromstring(svg.read_text(encoding="utf-8"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    for tier in (125, 250, 500, 1000):
        assert f"{tier} MB/s/TiB" in labels
    assert len(list(root.iter("{http://www.w3.org/2000/svg}rect"))) == 1 + 8  # background + 2 x 4 bars
    # the terminal chart shows the same tiers, with the spec's tier marked
    assert "◀ spec" in text and "1000 MB/s/TiB" in text


@pytest.mark.parametrize("target_exists", [True, False], ids=["onto-a-file", "dangling"])
def test_svg_onto_a_symlink_is_refused(tmp_path: Path, target_exists: bool) -> None:
    """A link at the --svg path could aim the chart at any file the user can write: refused, not followed."""
    config = next(p for p in CONFIGS if p.name == "p5-odcr-parallelcluster.yaml")
    target = tmp_path / "precious.txt"
    if target_exists:
        target.write_text("keep\n")
    link = tmp_path / "chart.svg"
    link.symlink_to(target)
    code, text, err = run(config, svg=str(link), width=1000)
    assert code == 2
    assert err.splitlines() == [f"error: --svg: {link} is a symbolic link (to {target}); plan does not write "
                                "through links: give the real file's path"]
    assert text == ""
    assert link.is_symlink()
    assert (target.read_text() == "keep\n") if target_exists else not target.exists()


def test_svg_without_lustre_is_a_clear_error(tmp_path: Path) -> None:
    path = write_spec(tmp_path, [{"name": "gpu", "instance_type": "p5.4xlarge", "nodes": 1}])
    code, _, err = run(path, svg=str(tmp_path / "x.svg"))
    assert code == 1 and "no storage.lustre" in err
    assert not (tmp_path / "x.svg").exists()


# --- prices ----------------------------------------------------------------------------------------------

PRICE_LIST_ITEM = {
    "product": {"attributes": {"instanceType": "p5.48xlarge", "location": "US East (N. Virginia)"}},
    "terms": {
        "OnDemand": {
            "ABC.JRTCKXETXF": {
                "priceDimensions": {
                    "ABC.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": "55.0400000000"}}
                }
            }
        }
    },
}


def test_parse_on_demand_price_list() -> None:
    assert parse_on_demand([json.dumps(PRICE_LIST_ITEM)]) == 55.04
    assert parse_on_demand([]) is None


def test_on_demand_filters_name_the_location() -> None:
    filters = {f["Field"]: f["Value"] for f in on_demand_filters("p5.48xlarge", "us-east-1")}
    assert filters == {
        "instanceType": "p5.48xlarge",
        "location": "US East (N. Virginia)",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }


def test_live_price_book_uses_live_on_demand_and_labels_fallbacks(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        [
            {"name": "a", "instance_type": "p5.48xlarge", "nodes": 1},
            {"name": "b", "instance_type": "p5e.48xlarge", "nodes": 1},
        ],
        head_node={"instance_type": "m7i.2xlarge"},
    )
    book = LivePriceBook("us-east-1", {"p5.48xlarge": 50.0, "p5e.48xlarge": None, "m7i.2xlarge": 0.4032})
    report = report_for(path, book)
    a, b = report.queues
    assert a.usd_per_hour == 50.0 and a.price_basis == "on-demand"
    assert b.price_basis == "capacity-block" and "bundled" in b.price_note
    assert report.cost.head_node_usd_per_hour == 0.4032
    assert report.prices.source == "live"
    assert report.usd_per_hour == pytest.approx(50.0 + 47.76 + 0.4032 + NETWORK)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_live_prices_failure_is_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_spec(tmp_path, [{"name": "gpu", "instance_type": "p5.4xlarge", "nodes": 1}])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_closed_port()}")
    aws.configure(None, None, None)
    try:
        code, out, err = run(path, live=True)
    finally:
        monkeypatch.delenv("AWS_ENDPOINT_URL")
        aws.configure(None, None, None)
    assert code == 1
    assert "--live-prices" in err and "without --live-prices" in err
    assert "Traceback" not in err and out == ""


def test_bad_spec_raises_spec_error(tmp_path: Path) -> None:
    path = write_spec(tmp_path, [{"name": "gpu", "instance_type": "p5.48xlarg", "nodes": 1}])
    with pytest.raises(SpecError) as exc:
        run(path)
    assert exc.value.exit_code == 2 and "did you mean 'p5.48xlarge'" in str(exc.value)


def test_the_created_network_is_priced_and_a_named_subnet_is_not(tmp_path: Path) -> None:
    path = write_spec(tmp_path, [{"name": "a", "instance_type": "p5.48xlarge", "nodes": 1}])
    spec = load_spec(path).spec
    assert network_usd_per_hour(spec) == NETWORK
    report = report_for(path)
    assert report.cost.network_usd_per_hour == NETWORK
    assert report.usd_per_hour == pytest.approx(55.04 + NETWORK)
    subnet = spec.network.model_copy(update={"subnet_id": "subnet-0123456789abcdef0"})
    named = spec.model_copy(update={"network": subnet})
    assert network_usd_per_hour(named) == 0.0
    elsewhere = spec.model_copy(update={"region": "ap-northeast-1"})
    assert network_usd_per_hour(elsewhere) is None
