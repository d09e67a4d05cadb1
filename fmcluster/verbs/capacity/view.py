"""Capacity Block offerings and purchases as tables and lines (stdout: results; stderr: notes)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fmcluster.output import ui
from fmcluster.verbs.capacity import when


def money(value: float | None, currency: str | None = "USD") -> str:
    if value is None:
        return "n/a"
    return f"${value:,.2f}" if (currency or "USD") == "USD" else f"{value:,.2f} {currency}"


def rate(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.3f}"


def print_offerings(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    if not rows:
        return
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("offering", "region / zone", "start (UTC · local)", "end (UTC)", "length", "upfront fee",
                   "$/instance-h", "$/GPU-h", "vs On-Demand"):
        table.add_column(column)
    for row in rows:
        start, end = when.parse_iso(row["start"]), when.parse_iso(row["end"])
        shape = (f"{row['ultraserver_count']} × {row['ultraserver_type']}" if row.get("ultraserver_type")
                 else f"{row['instance_count']} × {row['instance_type']}")
        label = "$/chip-h" if row.get("accelerator_kind") == "trainium" else "$/GPU-h"
        ratio = row.get("ratio_to_on_demand")
        table.add_row(
            f"{row['offering_id']}\n[dim]{ui.escape(shape)}" + (f" · queue {ui.escape(row['queue'])}"
                                                                 if row.get("queue") else "") + "[/]",
            f"{row['region']}\n{row['availability_zone']}"
            + ("\n[red]not usable by the spec[/]" if row.get("unusable") else ""),
            f"{when.utc(start)}\n{when.local(start)} · {row['starts_in']}",
            when.utc(end),
            f"{row['duration_hours']} h" + (f" {row['duration_minutes']} min" if row["duration_minutes"] else ""),
            money(row.get("upfront_fee"), row.get("currency")),
            rate(row.get("usd_per_instance_hour")),
            rate(row.get("usd_per_accelerator_hour")) + ("" if label == "$/GPU-h" else " /chip"),
            f"{ratio:.2f}×" if ratio is not None else "n/a",
        )
    ui.out_console().print(table)
    ui.note("prices per hour are the upfront fee over the block's hours; On-Demand rates are fmcluster's bundled "
            "prices. Buy one with: fmcluster capacity buy OFFERING_ID")


def charge_lines(offer: dict[str, Any], now: dt.datetime) -> list[str]:
    """Exactly what a purchase charges, said before anyone confirms."""
    start, end = when.parse_iso(offer["start"]), when.parse_iso(offer["end"])
    shape = (f"{offer['ultraserver_count']} × {offer['ultraserver_type']} ({offer['instance_count']} × "
             f"{offer['instance_type']})" if offer.get("ultraserver_type")
             else f"{offer['instance_count']} × {offer['instance_type']}")
    fee = offer.get("upfront_fee")
    return [
        f"Capacity Block {offer['offering_id']}: {shape} in {offer['availability_zone']} ({offer['region']})",
        f"  from {when.utc(start)} ({when.local(start)}, {when.starts_in(start, now)})",
        f"  to   {when.utc(end)} ({when.local(end)}); EC2 begins terminating its instances 30 minutes before the end "
        "(60 for UltraServers)",
        f"  charged now: {money(fee, offer.get('currency'))} upfront"
        + (f" ({rate(offer.get('usd_per_accelerator_hour'))} per accelerator-hour)"
           if offer.get("usd_per_accelerator_hour") is not None else "")
        + "; the fee is paid in full at purchase and is not refundable (a Capacity Block cannot be cancelled)",
    ]
