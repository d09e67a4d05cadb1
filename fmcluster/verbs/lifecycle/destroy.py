"""``fmcluster destroy``: find everything AWS holds for the cluster by its tags, delete it in reverse order,
then look again and report anything still tagged for it.

It needs neither the spec nor the local record: with the record gone, the cluster's id is read from the
tags of what AWS holds. It deletes only what carries this cluster's ownership tags.
"""

from __future__ import annotations

from typing import Any

from fmcluster.aws import unread
from fmcluster.aws.discovery import Discovered
from fmcluster.backends import registry
from fmcluster.backends.protocol import Capability
from fmcluster.connection import aws
from fmcluster.engine import Resource
from fmcluster.engine.graph import by_rank, wire
from fmcluster.errors import FmclusterError
from fmcluster.output import ui
from fmcluster.output.ui import confirm
from fmcluster.pricing.model import spec_cost
from fmcluster.state import claims
from fmcluster.state.host_keys import forget_host_keys
from fmcluster.state.store import StateStore
from fmcluster.verbs.lifecycle.common import ClusterNotFound, dump_json, known_clusters, run_engine, spec_of
from fmcluster.verbs.lifecycle.status import check_reachable
from fmcluster.verbs.session import Session

# A second look after the walk catches what the first teardown uncovers (nodes that outlive their stack).
TEARDOWN_PASSES = 2


def destroy(name: str, yes: bool, keep_storage: bool, json_output: bool = False, force_unlock: bool = False) -> int:
    store = StateStore()
    record = store.cluster(name, aws.target().region)
    region = record.region if record else aws.region_for(None)
    # Take the lock before looking: a create still recording the cluster must finish (or be refused) first.
    with store.locked(name, region, f"fmcluster destroy {name}", force=force_unlock, warn=ui.warning):
        return _destroy(store, name, yes, keep_storage, json_output)


def _destroy(store: StateStore, name: str, yes: bool, keep_storage: bool, json_output: bool) -> int:
    try:
        sessions = _sessions(store, name)
    except ClusterNotFound:
        _release_empty_claim(name)
        raise
    first = sessions[0]
    console = ui.err_console()
    ids = {s.ctx.cluster_id for s in sessions}
    holder = claims.holder(name, first.region)
    # The name is another state directory's, for a cluster other than the one(s) found here: what else is tagged
    # under the name is theirs, never listed for this command to delete.
    theirs = holder is not None and not holder.mine and holder.cluster_id not in ids
    if holder is not None and not holder.mine and not theirs:
        ui.note(f"cluster {name} is {holder.describe()}'s, not this state directory's: destroying it deletes it for "
                "its owner too")
    doomed: dict[str, list[Resource]] = {}
    kept: list[str] = []
    for session in sessions:
        found = session.backend.discover(session.context)
        keep = _kept_names(session, found) if keep_storage else set()
        doomed[session.ctx.cluster_id] = [d.handle for d in found if d.handle is not None and d.resource not in keep]
        kept += [f"{d.resource} ({d.description})" for d in found if d.handle is not None and d.resource in keep]
        for item in found:
            if item.handle is not None and item.resource not in keep:
                console.print(f"  [red]- delete[/] {ui.escape(ui.resource_label(item.resource))} "
                              f"[dim]({ui.escape(item.description)})[/]")
    for description in kept:
        console.print(f"  [cyan]= keep[/]   {ui.escape(description)} (--keep-storage)")
    for session in sessions:
        for part, why in unread.unread(session.ctx).items():
            # e.g. the caller's EKS access entry deleted: the objects in the cluster die with it; AWS must still go
            ui.warning(f"the cluster's {part.capitalize()} API was not read ({why.split('; ')[0]}): its objects go "
                       f"with the cluster, so destroy skips them and deletes what AWS holds regardless")
    if not any(doomed.values()):
        ui.note(f"nothing of {name} exists in AWS")
    else:
        _print_billing(sessions)
    confirm(f"Destroy cluster {name} ({first.backend_name}, {first.region})?", yes)
    if store.cluster(name, first.region) is not None:
        store.set_cluster_status(name, first.region, "DELETING")
    for session in sessions:
        _teardown(session, doomed[session.ctx.cluster_id], keep_storage)
    left = []
    for session in sessions:
        found = session.backend.discover(session.context)
        keep = _kept_names(session, found) if keep_storage else set()
        left += [d for d in found if d.resource not in keep]
    mine = still_mine(left, ids, holder)
    for item in (d for d in left if d not in mine):
        ui.note(f"not deleted, not this cluster's: {item.description}")
    if theirs and holder is not None and len(mine) < len(left):
        ui.note(f"the name {name} is now claimed by {holder.describe()}: what is tagged under it is theirs")
    if mine:
        if store.cluster(name, first.region) is not None:
            store.set_cluster_status(name, first.region, "DELETE_INCOMPLETE")
        console.print("[red]Still tagged for this cluster after teardown:[/]")
        for item in mine:
            console.print(f"  {ui.escape(item.description)}")
        console.print(f"Re-run `{first.hint(f'fmcluster destroy {name}')}` to retry, or delete them by hand.")
        if json_output:
            print(dump_json(_result(name, "DELETE_INCOMPLETE", kept, mine)))
        return 1
    if kept:
        store.set_cluster_status(name, first.region, "STORAGE_KEPT")
        ui.note("kept: " + "; ".join(kept))
    else:
        store.forget_cluster(name, first.region)
        forget_host_keys(name)
        try:
            claims.release(name, first.region, ids)  # nothing is left: the name is free for anyone again
        except FmclusterError as exc:
            ui.warning(f"cluster {name} is gone, but its name's claim could not be released ({exc}); re-run "
                       f"`{first.hint(f'fmcluster destroy {name}')}` to release it")
    if json_output:
        print(dump_json(_result(name, "STORAGE_KEPT" if kept else "NOT_FOUND", kept, [])))
    else:
        ui.out_console().print(f"[green]✓[/] cluster [bold]{ui.escape(name)}[/] destroyed; "
                               + ("nothing left behind" if not kept else "only the kept storage remains"))
    return 0


def still_mine(left: list[Discovered], ids: set[str], holder: claims.Claim | None) -> list[Discovered]:
    """What is left after a teardown that this command should tell its user to delete by hand. When the name is
    claimed by another state directory for a cluster other than the one(s) destroyed here, only what carries one of
    their ids is: the rest (the holder's, and what carries no id, such as nodes EKS tags itself) is the holder's."""
    theirs = holder is not None and not holder.mine and holder.cluster_id not in ids
    return [d for d in left if d.ours and not (theirs and d.cluster_id not in ids)]


def _release_empty_claim(name: str) -> None:
    """Nothing of ``name`` exists: a claim this state directory holds on it (a create that stopped before its first
    resource) is given back; another's stays, and is named."""
    region = aws.region_for(None)
    holder = claims.holder(name, region)
    if holder is None:
        return
    if holder.mine:
        claims.release(name, region, set())
        ui.note(f"released this state directory's claim on the name {name} in {region}")
    else:
        ui.note(f"the name {name} is claimed by {holder.describe()}, which has made nothing yet (or is making it "
                "now); only its owner's destroy releases it")


def _print_billing(sessions: list[Session]) -> None:
    """What destroying stops at most, from the one cost model (the figure ``plan`` and ``status`` show); only
    when every part's spec is known, since a partial figure would understate it."""
    specs = [s.spec for s in sessions]
    if any(spec is None for spec in specs):
        return
    priced = [spec_cost(spec) for spec in specs if spec is not None]
    costs = [cost.usd_per_hour for cost in priced]
    if any(cost is None for cost in costs):
        return
    unknown = sorted({part for cost in priced for part in cost.unknown})
    besides = f", plus {', '.join(unknown)} (no bundled price)" if unknown else ""
    ui.err_console().print(f"  destroying stops billing of up to ~${sum(c or 0.0 for c in costs):,.2f}/hour at the "
                           f"queues' maximum{ui.escape(besides)} (as `plan` computes it)")


def _result(name: str, status: str, kept: list[str], left: list[Discovered]) -> dict[str, Any]:
    return {"cluster": name, "status": status, "kept": kept, "left": [d.description for d in left]}


def _teardown(session: Session, doomed: list[Resource], keep_storage: bool) -> None:
    """Delete ``doomed`` in reverse order, then once more whatever the first pass uncovered."""
    for attempt in range(TEARDOWN_PASSES):
        if doomed:
            run_engine(session, f"Destroying {session.name}" + (" (what the first pass uncovered)" if attempt else ""),
                       "destroy", by_rank(doomed))
        found = session.backend.discover(session.context)
        keep = _kept_names(session, found) if keep_storage else set()
        doomed = [d.handle for d in found if d.handle is not None and d.resource not in keep]
        if not doomed:
            return


def _kept_names(session: Session, found: list[Discovered]) -> set[str]:
    """Storage and what it cannot live without (the security group its network interfaces use). With the
    spec, that comes from the references in its documents; without it, every security group stays."""
    storage = {d.resource for d in found if d.handle is not None and d.handle.is_storage}
    if not storage:
        return set()
    # the groups its interfaces use, and the subnets and VPC fmcluster made for it
    surroundings = {d.resource for d in found if d.resource.startswith(("security_group:", "subnet:", "vpc:"))}
    if session.spec is None:
        return storage | surroundings
    resources = {r.name: r for r in wire(session.resources())}
    if storage - set(resources):  # made by the backend's own stack: no document says what it sits in
        return storage | surroundings
    keep = set(storage)
    anchor = f"{registry.profile(session.backend_name).anchor_kind}:"
    frontier = [name for name in storage if name in resources]
    while frontier:
        for dependency in resources[frontier.pop()].depends_on:
            if dependency not in keep and not dependency.startswith(anchor):
                keep.add(dependency)
                frontier.append(dependency)
    return keep


def _backend_holding(store: StateStore, name: str, region: str) -> str:
    """The backend whose anchor (a PCS cluster, a ParallelCluster stack) AWS holds for the name; otherwise the
    one whose scans cover every resource fmcluster makes itself."""
    for backend in registry.names():
        probe = Session.bare(name, region, backend, store)
        try:
            if probe.backend.find_cluster_id(probe.context):
                return backend
        except FmclusterError:  # a backend this install or account lacks
            continue
    return next(b.name for b in registry.backends() if Capability.FINDS_EVERYTHING in b.capabilities)


def _sessions(store: StateStore, name: str) -> list[Session]:
    """The cluster's session from its record; without one, a session per cluster id AWS holds for the name."""
    record = store.cluster(name, aws.target().region)
    if record is not None:
        where, here = record.endpoint_url, aws.target_label()
        if where not in (here, "") and not (where.startswith("sandbox:") and here.startswith("sandbox:")):
            check_reachable(record)
        spec, _ = spec_of(record)
        return [Session.for_record(record, store, spec)]
    region = aws.region_for(None)
    backend = _backend_holding(store, name, region)
    probe = Session.bare(name, region, backend, store)
    sessions = []
    for cluster_id in sorted({d.cluster_id for d in probe.backend.discover(probe.context) if d.cluster_id}):
        session = Session.bare(name, region, backend, store)
        session.set_cluster_id(cluster_id)
        sessions.append(session)
    if sessions:
        return sessions
    raise ClusterNotFound(f"no cluster named '{name}' is known here, and nothing in {region} is tagged for it. "
                          f"Known clusters: {known_clusters(store)}")
