"""``fmcluster capacity list``: read the account's Capacity Blocks (:mod:`fmcluster.aws.capacity_blocks`) and lay
them out as a table."""

from __future__ import annotations

from typing import Any

from fmcluster.backends import registry
from fmcluster.connection import aws


@aws.read_only()
def run_list() -> list[dict[str, Any]]:
    """Every Capacity Block in the command's Region, as :func:`fmcluster.aws.capacity_blocks.list_blocks` gives them."""
    from botocore.exceptions import BotoCoreError, ClientError

    from fmcluster.aws.capacity_blocks import list_blocks

    region = aws.region_for(None)
    # What a backend's own stack launches names its cluster by that backend's tag.
    backend_tags = [p.cluster_name_tag for p in registry.profiles() if p.cluster_name_tag]
    try:
        return list_blocks(aws.client("ec2", region, aws.READING), backend_tags=backend_tags)
    except (BotoCoreError, ClientError) as exc:  # one clear line, never a traceback
        raise aws.describe_error(f"EC2 Capacity Blocks in {region}", exc) from None


def blocks_table(rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table
    from rich.text import Text

    from fmcluster.aws.capacity_blocks import countdown

    if not rows:
        return Text(f"no Capacity Blocks in {aws.region_for(None)}: `fmcluster capacity find` shows what EC2 sells")
    table = Table(box=None, header_style="bold")
    for column in ("block", "reservation", "state", "instances", "AZ", "start → end (UTC)", "time",
                   "in use / free", "interconnect", "clusters"):
        table.add_column(column)
    for row in rows:
        kind = f"{row['instance_count']} × {row['instance_type']}" + (
            f" ({row['ultraserver_type']})" if row.get("ultraserver_type") else "")
        use = f"{row['instances_in_use']} / {row['instances_free']}" + (
            f" ({row['instances_unavailable']} unavailable)" if row.get("instances_unavailable") else "")
        table.add_row(*map(Text, (
            str(row["capacity_block_id"]), ", ".join(row["reservation_ids"]), str(row["state"]), kind,
            str(row["availability_zone"]), f"{_short(row['start'])} → {_short(row['end'])}", countdown(row), use,
            str(row.get("interconnect_status") or "-"), ", ".join(row["clusters"]) or "-")))
    return table


def _short(iso: str | None) -> str:
    return f"{iso[:10]} {iso[11:16]}" if iso else "?"
