"""`capacity buy` and `capacity extend`: EC2 PurchaseCapacityBlock and PurchaseCapacityBlockExtension, each asked
first with ``DryRun`` (EC2 answers ``DryRunOperation`` when the purchase would succeed), then shown with exactly
what it charges, then confirmed, then bought.

Nothing is bought on bad input: the offering id's form, an offering ``capacity find`` did not list (EC2 has no call
that describes an offering by id, so fmcluster could not say its price), one whose start has passed, and a spec
the block does not fit or that cannot take its id (:mod:`fmcluster.verbs.capacity.spec_fit`) are refused before any AWS
call. EC2's own refusals (an offering
that lapsed or sold out, a limit) are named as EC2's answer, with what to do next.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from fmcluster.connection import aws
from fmcluster.errors import FmclusterError, UsageError
from fmcluster.output import ui
from fmcluster.verbs.capacity import asks, offerings, spec_edit, spec_fit, view, when

PLATFORM = "Linux/UNIX"  # fmcluster's nodes run Linux (Ubuntu or Amazon Linux)
# An offering found more than this after its start is not offered any more (EC2 offers future starts and "now").
STALE_AFTER_START = dt.timedelta(minutes=5)
# EC2's answers that mean the request itself is wrong (the id, the reservation): bad input, exit 2.
_BAD_INPUT_CODES = ("InvalidParameterValue", "InvalidCapacityReservationId.NotFound",
                    "InvalidCapacityReservationId.Malformed")


def buy(offering_id: str, dry_run: bool, yes: bool, spec: Path | None, queue: str | None,
        as_json: bool) -> int:
    now = dt.datetime.now(dt.timezone.utc)
    offering_id = asks.offering_id(offering_id)
    if (spec is None) != (queue is None):
        raise UsageError("--spec and --queue go together: --spec SPEC --queue QUEUE writes the block into that "
                         "queue's capacity.reservation_id")
    offer = offerings.recall(offering_id)
    if offer is None:
        raise UsageError(f"offering {offering_id} is not one `fmcluster capacity find` listed (in the last "
                         f"{offerings.CACHE_HOURS} h), so its price cannot be shown; run `fmcluster capacity find …` "
                         "and buy an id it lists")
    start = when.parse_iso(offer["start"])
    if now > start + STALE_AFTER_START:
        raise UsageError(f"offering {offering_id} has expired: it was to start {when.utc(start)}; run "
                         "`fmcluster capacity find` again for current offerings")
    if spec is not None and queue is not None:
        _check_spec(spec, queue, offer)
    region = offer["region"]
    ec2 = aws.client("ec2", region, aws.WRITING)
    request = {"CapacityBlockOfferingId": offering_id, "InstancePlatform": PLATFORM}
    _dry_run(lambda: ec2.purchase_capacity_block(DryRun=True, **request), "PurchaseCapacityBlock", offering_id)
    for line in view.charge_lines(offer, now):
        ui.err_console().print(ui.escape(line), soft_wrap=True)
    if dry_run:
        ui.note("dry run: EC2 would accept this purchase (DryRun answered DryRunOperation); nothing was bought")
        if as_json:
            ui.print_json({"dry_run": True, "would_succeed": True, "offering": offer})
        return 0
    ui.confirm(f"Buy this Capacity Block for {view.money(offer.get('upfront_fee'), offer.get('currency'))}, "
            "non-refundable?", yes)
    try:
        bought = ec2.purchase_capacity_block(**request)["CapacityReservation"]
    except Exception as exc:  # EC2's refusal, named with what to do next
        raise _refusal("PurchaseCapacityBlock", offering_id, exc) from None
    result = {"reservation_id": bought["CapacityReservationId"], "region": region,
              "availability_zone": bought.get("AvailabilityZone"), "instance_type": bought.get("InstanceType"),
              "instance_count": bought.get("TotalInstanceCount"), "start": _iso(bought.get("StartDate")),
              "end": _iso(bought.get("EndDate")), "state": bought.get("State"),
              "upfront_fee": offer.get("upfront_fee"), "currency": offer.get("currency"),
              "spec": str(spec) if spec else None, "queue": queue}
    if as_json:
        ui.print_json(result)
    else:
        ui.out_console().print(f"bought {result['reservation_id']}: {result['instance_count']} × "
                               f"{result['instance_type']} in {result['availability_zone']}, {result['start']} → "
                               f"{result['end']} ({result['state']})", soft_wrap=True)
    if spec is not None and queue is not None:
        try:
            spec_edit.write_reservation_id(spec, queue, result["reservation_id"])
        except (OSError, FmclusterError) as exc:
            raise FmclusterError(f"the Capacity Block {result['reservation_id']} IS bought, but {spec} was not "
                                 f"updated: {exc}; write it into queue {queue!r}'s capacity.reservation_id") from None
        ui.note(f"wrote reservation_id: {result['reservation_id']} into {spec} (queue {queue})")
    return 0


def _check_spec(spec: Path, queue: str, offer: dict[str, Any]) -> None:
    """Before buying: the queue can take the block, and the block is where the spec's nodes will be."""
    parsed, _queue = spec_fit.check(spec, queue, offer)
    region = aws.region_for(parsed.region)
    if region != offer["region"]:
        raise UsageError(f"{spec}: the cluster is in {region}, but offering {offer['offering_id']} is in "
                         f"{offer['region']}; a Capacity Block serves only its own Availability Zone")
    _refuse_unusable_zone(parsed, queue, offer, region)


def _refuse_unusable_zone(parsed: Any, queue: str, offer: dict[str, Any], region: str) -> None:
    """Before paying: refuse a block in an AZ where the spec's network could not put the queue's nodes (a named
    subnet in another AZ, or no layout of a created network: fmcluster.aws.placement.zone_problem)."""
    from fmcluster.aws.placement import zone_problem

    problem = zone_problem(parsed, aws.client("ec2", region, aws.READING), offer["availability_zone"], queue)
    if problem:
        raise UsageError(f"offering {offer['offering_id']} is in {offer['availability_zone']}, where the spec "
                         f"could not use it ({problem}); nothing was bought")


def extend(reservation_id: str, hours: int | None, days: int | None, offering_id: str | None, dry_run: bool,
           yes: bool, as_json: bool) -> int:
    reservation_id = asks.reservation_id(reservation_id)
    length = asks.duration_hours(hours, days)
    region = aws.region_for(None)
    ec2 = aws.client("ec2", region, aws.WRITING)
    block = _block(ec2, reservation_id, region)
    try:
        answer = ec2.describe_capacity_block_extension_offerings(CapacityBlockExtensionDurationHours=length,
                                                                 CapacityReservationId=reservation_id)
    except Exception as exc:
        raise _refusal("DescribeCapacityBlockExtensionOfferings", reservation_id, exc) from None
    offers = sorted(answer.get("CapacityBlockExtensionOfferings", []),
                    key=lambda o: (float(o["UpfrontFee"]) if o.get("UpfrontFee") else float("inf")))
    rows = [_extension_row(o) for o in offers]
    if not as_json:
        _print_extensions(block, rows)
    if not rows:
        if as_json:
            ui.print_json({"reservation_id": reservation_id, "offerings": [], "bought": None})
        raise FmclusterError(f"EC2 offers no {length} h extension for {reservation_id} now (extensions depend on "
                             "free capacity); try another length (--days), or again later")
    chosen = next((r for r in rows if r["offering_id"] == offering_id), None) if offering_id else rows[0]
    if chosen is None:
        raise UsageError(f"--offering {offering_id}: not one of the extension offerings listed above")
    request = {"CapacityBlockExtensionOfferingId": chosen["offering_id"], "CapacityReservationId": reservation_id}
    _dry_run(lambda: ec2.purchase_capacity_block_extension(DryRun=True, **request), "PurchaseCapacityBlockExtension",
             chosen["offering_id"])
    ui.err_console().print(ui.escape(
        f"extend {reservation_id} by {chosen['hours']} h to {chosen['new_end']}: charged now "
        f"{view.money(chosen['upfront_fee'], chosen['currency'])} upfront; the fee is not refundable"), soft_wrap=True)
    if dry_run:
        ui.note("dry run: EC2 would accept this extension (DryRun answered DryRunOperation); nothing was bought")
        if as_json:
            ui.print_json({"reservation_id": reservation_id, "dry_run": True, "would_succeed": True,
                           "offerings": rows, "chosen": chosen})
        return 0
    ui.confirm(f"Extend {reservation_id} for {view.money(chosen['upfront_fee'], chosen['currency'])}, non-refundable?",
            yes)
    try:
        bought = ec2.purchase_capacity_block_extension(**request)["CapacityBlockExtensions"]
    except Exception as exc:
        raise _refusal("PurchaseCapacityBlockExtension", chosen["offering_id"], exc) from None
    extension = bought[0] if bought else {}
    result = {"reservation_id": reservation_id, "offerings": rows, "chosen": chosen,
              "status": extension.get("CapacityBlockExtensionStatus"),
              "end": _iso(extension.get("CapacityBlockExtensionEndDate"))}
    if as_json:
        ui.print_json(result)
    else:
        ui.out_console().print(f"extended {reservation_id} to {result['end']} ({result['status']})", soft_wrap=True)
    return 0


def _block(ec2: Any, reservation_id: str, region: str) -> dict[str, Any]:
    try:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])["CapacityReservations"]
    except Exception as exc:
        raise _refusal("DescribeCapacityReservations", reservation_id, exc,
                       f"is it in {region}? pass --region") from None
    block = found[0] if found else None
    if block is None or block.get("ReservationType") != "capacity-block":
        raise UsageError(f"{reservation_id} is an On-Demand Capacity Reservation, not a Capacity Block; only "
                         "Capacity Blocks are extended")
    if block.get("State") not in ("active", "scheduled"):
        raise UsageError(f"Capacity Block {reservation_id} is {block.get('State')}; only an active or scheduled "
                         "block can be extended")
    return block


def _extension_row(offer: dict[str, Any]) -> dict[str, Any]:
    fee = float(offer["UpfrontFee"]) if offer.get("UpfrontFee") else None
    return {"offering_id": offer.get("CapacityBlockExtensionOfferingId"),
            "hours": offer.get("CapacityBlockExtensionDurationHours"),
            "start": _iso(offer.get("CapacityBlockExtensionStartDate")),
            "new_end": _iso(offer.get("CapacityBlockExtensionEndDate")),
            "instance_type": offer.get("InstanceType"), "instance_count": offer.get("InstanceCount"),
            "availability_zone": offer.get("AvailabilityZone"), "upfront_fee": fee,
            "currency": offer.get("CurrencyCode")}


def _print_extensions(block: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("extension offering", "adds", "from (block's end)", "new end", "upfront fee"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["offering_id"], f"{row['hours']} h", row["start"], row["new_end"],
                      view.money(row["upfront_fee"], row["currency"]))
    ui.note(f"{block['CapacityReservationId']}: {block.get('TotalInstanceCount')} × {block.get('InstanceType')} in "
            f"{block.get('AvailabilityZone')}, {block.get('State')}, ends {_iso(block.get('EndDate'))}")
    if rows:
        ui.out_console().print(table)


def _dry_run(call: Any, operation: str, subject: str) -> None:
    """EC2's DryRun: ``DryRunOperation`` means the real call would succeed; anything else is EC2's refusal."""
    from botocore.exceptions import ClientError

    try:
        call()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "DryRunOperation":
            return
        raise _refusal(operation, subject, exc) from None
    except Exception as exc:
        raise _refusal(operation, subject, exc) from None
    raise FmclusterError(f"EC2 {operation} with DryRun did not answer DryRunOperation; nothing was bought")


def _refusal(operation: str, subject: str, exc: BaseException, hint: str = "") -> FmclusterError:
    """EC2's answer, named as EC2's, with what to do next; an id EC2 does not accept is bad input (exit 2)."""
    error = aws.describe_error(f"EC2 {operation} ({subject})", exc, hint)
    if isinstance(error, aws.Unreachable) or not error.code:  # nothing answered: not a refusal
        return error
    code = error.code
    next_step = {
        "InvalidParameterValue": "EC2 does not accept it as it stands (an offering lapses once its start passes, or "
                                 "when sold); run `fmcluster capacity find` again and buy a current offering",
        "InsufficientCapacity": "sold out: run `fmcluster capacity find` again for other zones, dates or Regions",
        "InsufficientInstanceCapacity": "sold out: run `fmcluster capacity find` again for other zones, dates or "
                                        "Regions",
        "CapacityBlockLimitExceeded": "the account's Capacity Block limit (256 instances across blocks) is reached; "
                                      "wait for a block to end, or ask AWS Support",
        "ReservationCapacityExceeded": "the account's Capacity Block limit (256 instances across blocks) is "
                                       "reached; wait for a block to end, or ask AWS Support",
    }.get(code)
    message = f"EC2 refused {operation} for {subject}: {code}: {error.aws_message}"
    if next_step or error.hint:
        message += f"\n  → {next_step or error.hint}"
    refusal = FmclusterError(message)
    if code in _BAD_INPUT_CODES:
        refusal = UsageError(message)
    return refusal


def _iso(value: Any) -> str | None:
    return when.iso(value) if isinstance(value, dt.datetime) else (str(value) if value is not None else None)
