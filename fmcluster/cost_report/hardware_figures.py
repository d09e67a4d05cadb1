"""Per queue and storage figures of the plan: accelerators, HBM, EFA, UltraServer domains and Lustre
throughput, from the catalog or the instance facts read from EC2."""

from __future__ import annotations

from dataclasses import replace

from fmcluster import catalog
from fmcluster.catalog.hardware import hardware
from fmcluster.cost_report.assumptions import GB_PER_GIB, GIB_PER_FSX_TIB
from fmcluster.cost_report.report_model import (
    HomeFigures,
    InterconnectFigures,
    LustreFigures,
    QueueFigures,
    StorageFigures,
    UltraServerFigures,
)
from fmcluster.pricing.model import QueueCost
from fmcluster.spec.decisions import efa_enabled, ultraserver_shape
from fmcluster.spec.models import Queue, Spec, max_nodes, min_nodes


def queue_figures(queue: Queue, cost: QueueCost) -> QueueFigures:
    facts = catalog.instance(queue.instance_type)
    if facts is None:
        return _described_queue_figures(queue, cost)
    figures = _catalog_queue_figures(queue, cost, facts)
    shape = ultraserver_shape(queue.capacity.ultraserver) if queue.capacity.ultraserver else None
    if shape is None:
        return figures
    domains = UltraServerFigures(shape.name, max_nodes(queue) // shape.instances, shape.instances,
                                 shape.accelerators, shape.domain)
    return replace(figures, ultraserver=domains)


def _catalog_queue_figures(queue: Queue, cost: QueueCost, facts: catalog.InstanceFacts) -> QueueFigures:
    nodes, price = cost.nodes, cost.price
    per_node = facts.accelerators if facts else 0
    efa_on = facts is not None and facts.efa is not None and efa_enabled(queue)
    link = facts.interconnect if facts else None
    tflops = facts.bf16_dense_tflops_per_accelerator if facts else None
    return QueueFigures(
        name=queue.name,
        instance_type=queue.instance_type,
        nodes=nodes,
        min_nodes=min_nodes(queue),
        dynamic=not isinstance(queue.nodes, int),
        in_catalog=facts is not None,
        accelerators_per_node=per_node,
        accelerators=per_node * nodes,
        accelerator_model=facts.accelerator.model if facts else None,
        accelerator_kind=facts.accelerator.kind if facts else None,
        gpus=per_node * nodes,
        hbm_total_gb=round(facts.hbm_gb_total * nodes, 1) if facts else 0.0,
        hbm_bandwidth_tbps=round(facts.hbm_tbps_total * nodes, 3) if facts else 0.0,
        bf16_dense_pflops=round(tflops * per_node * nodes / 1000, 2) if tflops else None,
        interconnect=InterconnectFigures(link.name, link.gb_s_per_accelerator, link.bidirectional)
        if link
        else None,
        efa_version=facts.efa.version if efa_on and facts and facts.efa else None,
        efa_gbps_per_node=facts.efa_gbps if efa_on and facts else None,
        efa_gbps_total=(facts.efa_gbps or 0) * nodes if efa_on and facts else None,
        usd_per_node_hour=price.usd_per_hour,
        usd_per_hour=cost.usd_per_hour,
        price_basis=price.basis,
        price_note=price.note,
        price_as_of=price.as_of,
    )


def _described_queue_figures(queue: Queue, cost: QueueCost) -> QueueFigures:
    """A type outside the catalog: what DescribeInstanceTypes told (accelerators and their memory), or nothing."""
    facts = hardware(queue.instance_type)
    nodes, price = cost.nodes, cost.price
    per_node = facts.accelerators or 0
    hbm_gb = (facts.accelerator_memory_gib or 0) * GB_PER_GIB * per_node * nodes
    return QueueFigures(
        name=queue.name, instance_type=queue.instance_type, nodes=nodes, min_nodes=min_nodes(queue),
        dynamic=not isinstance(queue.nodes, int), in_catalog=False, accelerators_per_node=per_node,
        accelerators=per_node * nodes, accelerator_model=facts.accelerator_model,
        accelerator_kind=facts.accelerator_kind, gpus=per_node * nodes,
        hbm_total_gb=round(hbm_gb, 1), hbm_bandwidth_tbps=0.0, bf16_dense_pflops=None, interconnect=None,
        efa_version=None, efa_gbps_per_node=None, efa_gbps_total=None, usd_per_node_hour=price.usd_per_hour,
        usd_per_hour=cost.usd_per_hour, price_basis=price.basis, price_note=price.note, price_as_of=price.as_of,
        facts_source=facts.source)


def training_queue(queues: list[QueueFigures]) -> QueueFigures | None:
    """The largest accelerated queue (most accelerators at its maximum; first wins ties)."""
    accelerated = [q for q in queues if q.accelerators > 0]
    return max(accelerated, key=lambda q: q.accelerators) if accelerated else None


# --- storage ----------------------------------------------------------------------------------------


def storage_figures(spec: Spec) -> StorageFigures:
    lustre = spec.storage.lustre
    home = spec.storage.home
    lustre_figures = None
    if lustre is not None:
        tib = lustre.capacity_gib / GIB_PER_FSX_TIB
        mb_s = tib * lustre.throughput_per_tib
        iops = None if lustre.metadata_iops == "auto" else int(lustre.metadata_iops)
        lustre_figures = LustreFigures(
            mount=lustre.mount,
            capacity_gib=lustre.capacity_gib,
            capacity_tib=tib,
            throughput_per_tib_mb_s=lustre.throughput_per_tib,
            throughput_mb_s=round(mb_s, 3),
            throughput_gb_s=round(mb_s / 1000, 4),
            metadata_mode="AUTOMATIC" if iops is None else "USER_PROVISIONED",
            metadata_iops=iops,
            existing_id=lustre.existing_id,
            s3_import=lustre.s3_import,
        )
    home_figures = None
    if home is not None:
        home_figures = HomeFigures(
            type=home.type,
            mount=home.mount,
            capacity_gib=home.capacity_gib if home.type == "openzfs" and not home.existing_id else None,
        )
    return StorageFigures(lustre=lustre_figures, home=home_figures)


def lustre_gb_s(capacity_gib: int, throughput_per_tib: int) -> float:
    return capacity_gib / GIB_PER_FSX_TIB * throughput_per_tib / 1000
