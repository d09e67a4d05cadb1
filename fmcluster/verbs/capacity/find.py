"""`capacity find`: the searches a command line or a spec asks for, run, and shown."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from fmcluster.connection import aws
from fmcluster.errors import UsageError
from fmcluster.output import ui
from fmcluster.verbs.capacity import asks, offerings, view
from fmcluster.verbs.capacity.offerings import Search


def searches_from_options(instance_type: str | None, count: int | None, ultraserver_type: str | None,
                          ultraservers: int | None, hours: int, start: dt.datetime | None,
                          end: dt.datetime | None) -> list[Search]:
    if instance_type and ultraserver_type:
        raise UsageError("give --instance-type and --count, or --ultraserver-type and --ultraservers, not both")
    if ultraserver_type:
        asks.ultraserver(ultraserver_type, ultraservers if ultraservers is not None else 1)
        return [Search(hours, ultraserver_type=ultraserver_type, ultraservers=ultraservers or 1,
                       start_after=start, end_before=end)]
    if not instance_type:
        raise UsageError("say what to look for: a SPEC, --instance-type T --count N, or --ultraserver-type U "
                         "--ultraservers K (e.g. fmcluster capacity find --instance-type p5.48xlarge --count 2)")
    if ultraservers is not None:
        raise UsageError("--ultraservers goes with --ultraserver-type; with --instance-type give --count")
    asks.instance_type(instance_type)
    return [Search(hours, instance_type=instance_type, count=asks.instance_count(count if count is not None else 1),
                   start_after=start, end_before=end)]


def searches_from_spec(spec_path: Path, hours: int, start: dt.datetime | None,
                       end: dt.datetime | None) -> tuple[list[Search], str]:
    """One search per ``capacity-block`` queue (its type and node count, or its UltraServers), and the spec's
    Region. The spec's shape is checked, not its rules: a queue still waiting for its reservation_id is fine."""
    from fmcluster.spec.decisions import ultraserver_shape
    from fmcluster.spec.loader import parse_spec
    from fmcluster.spec.models import max_nodes

    spec, _ = parse_spec(spec_path)
    searches = []
    for queue in spec.queues:
        if queue.capacity.type != "capacity-block":
            continue
        shape = ultraserver_shape(queue.capacity.ultraserver) if queue.capacity.ultraserver else None
        if shape is not None:
            searches.append(Search(hours, ultraserver_type=shape.name,
                                   ultraservers=max(1, max_nodes(queue) // shape.instances),
                                   start_after=start, end_before=end, queue=queue.name))
        else:
            searches.append(Search(hours, instance_type=queue.instance_type, count=max_nodes(queue),
                                   start_after=start, end_before=end, queue=queue.name))
    if not searches:
        names = ", ".join(f"{q.name} ({q.capacity.type})" for q in spec.queues)
        raise UsageError(f"{spec_path}: no queue has capacity.type: capacity-block ({names}); set it on the queue "
                         "that needs a Capacity Block, or search with --instance-type T --count N")
    return searches, spec.region


def mark_usable(spec_path: Path, rows: list[dict]) -> None:
    """Give each offering ``unusable``: why the spec could not use a block there (None when it can). A Capacity
    Block serves only its AZ, and the spec's network must be able to put the queue's nodes in it."""
    from fmcluster.aws.placement import zone_problem
    from fmcluster.spec.loader import parse_spec

    spec, _ = parse_spec(spec_path)
    region = aws.region_for(spec.region)
    judged: dict[tuple[str, str], str | None] = {}
    for row in rows:
        if row["region"] != region:
            row["unusable"] = f"the cluster is in {region}"
            continue
        where = (str(row["availability_zone"]), str(row["queue"]))
        if where not in judged:
            judged[where] = zone_problem(spec, aws.client("ec2", region, aws.READING), *where)
        row["unusable"] = judged[where]
    for (zone, queue), problem in sorted(judged.items()):
        if problem:
            ui.warning(f"offerings in {zone} cannot serve queue {queue} of {spec_path}: {problem}")


def regions_from(option: str | None, default: str) -> list[str]:
    from fmcluster.connection.regions import region_problem

    if not option:
        return [default]
    regions = list(dict.fromkeys(r.strip() for r in option.split(",") if r.strip()))
    for region in regions:
        problem = region_problem(region)
        if problem:
            raise UsageError(f"--regions {region}: {problem}")
    if not regions:
        raise UsageError("--regions needs at least one Region, e.g. --regions us-east-1,us-east-2")
    return regions


def run(spec: Path | None, instance_type: str | None, count: int | None, ultraserver_type: str | None,
        ultraservers: int | None, hours: int | None, days: int | None, start_after: str | None,
        end_before: str | None, regions: str | None, as_json: bool) -> int:
    now = dt.datetime.now(dt.timezone.utc)
    length = asks.duration_hours(hours, days)
    start, end = asks.window(start_after, end_before, length, now)
    if spec is not None:
        if instance_type or ultraserver_type or count is not None or ultraservers is not None:
            raise UsageError("with a SPEC, the spec's capacity-block queues say what to look for; drop "
                             "--instance-type/--count/--ultraserver-type/--ultraservers, or drop the SPEC")
        searches, spec_region = searches_from_spec(spec, length, start, end)
        where = regions_from(regions, aws.region_for(spec_region))
    else:
        searches = searches_from_options(instance_type, count, ultraserver_type, ultraservers, length, start, end)
        where = regions_from(regions, aws.region_for(None))
    found = offerings.find(searches, where, now)
    if spec is not None:
        mark_usable(spec, found.rows)
    searched = searched_summary(searches, where, start, end)
    if as_json:
        ui.print_json({"searched": searched, "offerings": found.rows, "errors": found.errors})
    else:
        view.print_offerings(found.rows)
    for failure in found.errors:
        ui.error(failure["error"])
    if not found.rows:
        ui.note(empty_answer(searches, where, start, end))
    if found.errors and not found.rows:
        return 1
    return 0


def searched_summary(searches: list[Search], regions: list[str], start: dt.datetime | None,
                     end: dt.datetime | None) -> dict[str, Any]:
    from fmcluster.verbs.capacity import when

    return {"regions": regions, "start_after": when.iso(start) if start else None,
            "end_before": when.iso(end) if end else None,
            "searches": [{"queue": s.queue, "instance_type": s.instance_type, "count": s.count,
                          "ultraserver_type": s.ultraserver_type, "ultraservers": s.ultraservers,
                          "hours": s.hours} for s in searches]}


def empty_answer(searches: list[Search], regions: list[str], start: dt.datetime | None,
                 end: dt.datetime | None) -> str:
    """What was searched, and what to widen."""
    from fmcluster.verbs.capacity import when

    window = (f" starting after {when.utc(start)}" if start else "") + (f" ending by {when.utc(end)}" if end else "")
    asked = "; ".join(s.label() for s in searches)
    widen = []
    if end is not None:
        widen.append("a later --end-before (or none)")
    if start is not None:
        widen.append("an earlier --start-after (or none)")
    widen.append("more Regions with --regions R1,R2,…")
    if any((s.count or 0) > 1 or (s.ultraservers or 0) > 1 for s in searches):
        widen.append("fewer instances (several smaller blocks)")
    widen.append("another duration (--days)")
    sold = _regions_selling([s.instance_type for s in searches if s.instance_type])
    return (f"no Capacity Block offerings for {asked} in {', '.join(regions)} (all Availability Zones){window}. "
            f"Try {', '.join(widen)}" + (f"; {sold}" if sold else "") + ".")


def _regions_selling(instance_types: list[str]) -> str:
    """The EC2 user guide's list of Regions per type ("Capacity Blocks for ML", supported instance types and
    Regions), for the types it names."""
    known = {"p5.48xlarge": "us-east-1, us-east-2, us-west-2, ap-northeast-1", "p5e.48xlarge": "us-east-2",
             "p5en.48xlarge": "us-east-2", "p4d.24xlarge": "us-east-2, us-west-2",
             "trn1.32xlarge": "us-east-1, ap-southeast-4", "trn2.48xlarge": "us-east-2"}
    listed = [f"{t} in {known[t]}" for t in dict.fromkeys(instance_types) if t in known]
    return ("the EC2 user guide lists Capacity Blocks for " + "; ".join(listed)) if listed else ""
