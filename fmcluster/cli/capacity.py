"""``fmcluster capacity``: find, buy, extend and list EC2 Capacity Blocks. Thin: parse, call
:mod:`fmcluster.verbs.capacity`, render; heavy imports happen inside commands."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

capacity_app = typer.Typer(
    name="capacity", no_args_is_help=True, rich_markup_mode="rich",
    help="Find, buy, list and extend EC2 Capacity Blocks for ML: reserved GPU/Trainium capacity for fixed dates, "
         "paid up front. Examples, in order:\n\n"
         "1. [bold]fmcluster capacity find --instance-type p5.48xlarge --count 2 --days 1 --regions "
         "us-east-1,us-east-2[/] (or [bold]find SPEC[/] for the spec's capacity-block queues)\n\n"
         "2. [bold]fmcluster capacity buy OFFERING_ID --spec SPEC --queue train[/] (after a dry run and a "
         "confirmation; the fee is not refundable)\n\n"
         "3. [bold]fmcluster create SPEC[/]; [bold]fmcluster capacity list[/] shows each block's time left and who "
         "uses it; [bold]fmcluster capacity extend RESERVATION_ID --days 1[/] adds time",
)
CapacityDryRun = typer.Option(False, "--dry-run", help="Ask EC2 with DryRun and show the charge; buy nothing.")
CapacityYes = typer.Option(False, "--yes", "-y", help="Do not ask before buying (the fee is not refundable).")


@capacity_app.command("find")
def capacity_find(
    spec: Optional[Path] = typer.Argument(None, metavar="SPEC", show_default=False,
                                          help="Search for each capacity-block queue of this spec (its type and "
                                               "node count), in its Region unless --regions."),
    instance_type: Optional[str] = typer.Option(None, "--instance-type", metavar="TYPE",
                                                help="Instance type, e.g. p5.48xlarge."),
    count: Optional[int] = typer.Option(None, "--count", metavar="N", help="Instances in the block (1-64)."),
    ultraserver_type: Optional[str] = typer.Option(None, "--ultraserver-type", metavar="TYPE",
                                                   help="EC2 UltraServer type, e.g. u-p6e-gb200x72."),
    ultraservers: Optional[int] = typer.Option(None, "--ultraservers", metavar="K", help="UltraServers in the block."),
    hours: Optional[int] = typer.Option(None, "--hours", metavar="H",
                                        help="Block length: 24-336 in steps of 24, then weekly up to 4368."),
    days: Optional[int] = typer.Option(None, "--days", metavar="D",
                                       help="Block length in days: 1-14, then 21, 28, … 182 (default 1)."),
    start_after: Optional[str] = typer.Option(None, "--start-after", metavar="WHEN",
                                              help="Earliest start: 2026-12-24, 2026-12-24T11:30 (UTC unless an "
                                                   "offset), or +3d / +12h."),
    end_before: Optional[str] = typer.Option(None, "--end-before", metavar="WHEN", help="Latest end (as WHEN)."),
    regions: Optional[str] = typer.Option(None, "--regions", metavar="R1,R2",
                                          help="Regions to search at once (default: the spec's, or --region)."),
    as_json: bool = typer.Option(False, "--json", help="Print {searched, offerings, errors} as JSON."),
) -> None:
    """List the Capacity Blocks EC2 offers now, in every Availability Zone of each Region: id, Region and zone,
    start and end (UTC and local, "starts in …"), length, the upfront fee, $ per instance-hour and per GPU-hour
    (per Trainium chip-hour), and the ratio to On-Demand for the same hours. Sorted by start, then price.

    Examples: fmcluster capacity find --instance-type p5.48xlarge --count 2 --days 2 --regions us-east-1,us-east-2
    ·  fmcluster capacity find configs/p5en-capacity-block-parallelcluster.yaml --start-after +7d
    """
    from fmcluster.verbs.capacity import find

    raise typer.Exit(find.run(spec, instance_type, count, ultraserver_type, ultraservers, hours, days, start_after,
                              end_before, regions, as_json))


@capacity_app.command("buy")
def capacity_buy(
    offering_id: str = typer.Argument(..., metavar="OFFERING_ID", show_default=False,
                                      help="An offering id that `capacity find` listed (cb-…)."),
    dry_run: bool = CapacityDryRun,
    yes: bool = CapacityYes,
    spec: Optional[Path] = typer.Option(None, "--spec", metavar="SPEC",
                                        help="Write the bought reservation id into this spec (comments kept)."),
    queue: Optional[str] = typer.Option(None, "--queue", metavar="QUEUE",
                                        help="The spec's capacity-block queue that gets the id."),
    as_json: bool = typer.Option(False, "--json", help="Print the reservation (or the dry run) as JSON."),
) -> None:
    """Buy a Capacity Block: EC2 is asked first with DryRun, then you see exactly what is charged (the whole fee,
    now, not refundable) and confirm. Prints the reservation id, zone, start and end. With --spec/--queue the id is
    written into that queue's capacity.reservation_id, and a zone that differs from the spec's subnet is said
    before buying.

    Example: fmcluster capacity buy cb-0123456789abcdef0 --spec configs/p5en-capacity-block-parallelcluster.yaml
    --queue train
    """
    from fmcluster.verbs.capacity import purchase

    raise typer.Exit(purchase.buy(offering_id, dry_run, yes, spec, queue, as_json))


@capacity_app.command("extend")
def capacity_extend(
    reservation_id: str = typer.Argument(..., metavar="RESERVATION_ID", show_default=False,
                                         help="The Capacity Block's reservation id (cr-…)."),
    hours: Optional[int] = typer.Option(None, "--hours", metavar="H",
                                        help="Hours to add: 24-336 in steps of 24, then weekly."),
    days: Optional[int] = typer.Option(None, "--days", metavar="D", help="Days to add: 1-14, then 21, 28, …"),
    offering: Optional[str] = typer.Option(None, "--offering", metavar="ID",
                                           help="Which extension offering to buy (default: the cheapest)."),
    dry_run: bool = CapacityDryRun,
    yes: bool = CapacityYes,
    as_json: bool = typer.Option(False, "--json", help="Print the offerings and the purchase as JSON."),
) -> None:
    """Extend an active or scheduled Capacity Block: lists EC2's extension offerings with their price, asks EC2
    with DryRun, then buys one after a confirmation. The reservation id stays the same; its end moves.

    Example: fmcluster capacity extend cr-0123456789abcdef0 --days 1 --dry-run
    """
    from fmcluster.verbs.capacity import purchase

    raise typer.Exit(purchase.extend(reservation_id, hours, days, offering, dry_run, yes, as_json))



@capacity_app.command("list")
def capacity_list(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list, one object per block."),
) -> None:
    """The account's Capacity Blocks in the Region (--region, else the environment's): state, instance type and
    count, AZ, start and end, time left or until the start, instances in use and free, the accelerator
    interconnect's status, and the fmcluster clusters that use each block (by their tags and launch templates).

    EC2 stops a block's instances 30 minutes before its end; `fmcluster status NAME` counts down and warns.

    Example: fmcluster --sandbox capacity list --json
    """
    from fmcluster.output import ui
    from fmcluster.verbs.capacity.command import blocks_table, run_list

    rows = run_list()
    if as_json:
        ui.print_json(rows)
    else:
        ui.out_console().print(blocks_table(rows))


def register(app: typer.Typer) -> None:
    """Add ``fmcluster capacity`` and its commands to ``app``."""
    app.add_typer(capacity_app, name="capacity")
