"""The one rule every backend applies to a type EC2 sells only inside UltraServers (p6e-gb200.36xlarge): such a
queue must run on an UltraServer Capacity Block. Each backend calls it with its own guide's page, so the refusal
cites the page its users read; which queues it applies to is the backend's call."""

from __future__ import annotations

from fmcluster import catalog
from fmcluster.spec.backend_rules import Report
from fmcluster.spec.models import Queue


def refuse_unless_capacity_block(index: int, queue: Queue, page: str, error: Report) -> None:
    """Refuse ``queues[index]`` bought as Spot, On-Demand or an ODCR when EC2 sells its type only inside
    UltraServers, which are bought only as Capacity Blocks (EC2 Capacity Blocks for ML)."""
    facts = catalog.instance(queue.instance_type)
    if facts is None or not facts.is_ultraserver_only or queue.capacity.type == "capacity-block" \
            or queue.capacity.ultraserver is not None:  # with ultraserver set, the common rules say it
        return
    error(("queues", index, "capacity", "type"),
          f"EC2 sells {queue.instance_type} only inside UltraServers, bought as Capacity Blocks ({page}), not as "
          f"{queue.capacity.type}: set capacity.type capacity-block, capacity.reservation_id and "
          "capacity.ultraserver")
