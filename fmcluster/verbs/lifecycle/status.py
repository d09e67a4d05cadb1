"""``fmcluster status``: every cluster (the local records, and those AWS holds by their tags), or one cluster
live from AWS: its state in one vocabulary on both backends, what differs from the spec, and its cost."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlparse

from fmcluster.aws.cluster_blocks import DEFAULT_WARNING_HOURS, cluster_blocks
from fmcluster.aws.discovery import Discovered
from fmcluster.backends import registry
from fmcluster.connection import aws
from fmcluster.engine import Unknown, reads
from fmcluster.errors import AwsError, FmclusterError
from fmcluster.output import ui
from fmcluster.pricing.model import live_cost, spec_cost
from fmcluster.spec.models import max_nodes
from fmcluster.spec.stored import stored_spec_problem
from fmcluster.state import locks
from fmcluster.state.store import ClusterRecord, StateStore
from fmcluster.verbs.lifecycle import guard
from fmcluster.verbs.lifecycle.common import PSEUDO_KINDS, ClusterNotFound, known_clusters, spec_of
from fmcluster.verbs.lifecycle.diff import make_plan
from fmcluster.verbs.lifecycle.status_topology import add_queue_topology
from fmcluster.verbs.session import Session


def check_reachable(record: ClusterRecord) -> None:
    """Refuse, saying where to look, when the cluster lives somewhere this command does not reach."""
    where, here = record.endpoint_url, aws.target_label()
    if where in (here, ""):  # "" : a record from before fmcluster kept where clusters live
        return
    name = record.name
    if where.startswith("sandbox:"):
        if not here.startswith("sandbox:"):
            raise ClusterNotFound(f"cluster {name} lives in the local sandbox: add --sandbox "
                                  f"(`fmcluster --sandbox status {name}`)")
        raise ClusterNotFound(f"cluster {name} was made in a sandbox started {where.split(':', 1)[1]}, which has "
                              "stopped since; a sandbox keeps nothing once stopped, so the cluster is gone. "
                              f"`fmcluster --sandbox destroy {name} --yes` forgets it")
    if where != "aws":
        gone = ""
        url = urlparse(where)
        if url.hostname in ("127.0.0.1", "localhost") and url.port:
            # a local sandbox reached through `fmcluster sandbox env`: when it stopped and one came back elsewhere
            gone = (f"; if that was a local sandbox that has stopped, `fmcluster sandbox start --port {url.port}` "
                    f"and `eval \"$(fmcluster sandbox env)\"` serve that URL again, and there (a new sandbox keeps "
                    f"nothing) `fmcluster destroy {name} --yes` forgets the cluster")
        raise ClusterNotFound(f"cluster {name} lives at {where}: add `--endpoint-url {where}`{gone}")
    raise ClusterNotFound(f"cluster {name} lives in AWS, and this command is pointed at {here}: drop "
                          "--sandbox / --endpoint-url / AWS_ENDPOINT_URL to reach it")


@aws.read_only()
def status(name: str | None, refresh: bool,
           block_warning_hours: float = DEFAULT_WARNING_HOURS) -> dict[str, Any] | list[dict[str, Any]]:
    """Reads the state read-only unless ``refresh`` writes AWS's answer back. A record whose stored spec no
    longer validates is shown with the reason (``problem``) instead of failing the command. A Capacity Block with
    fewer than ``block_warning_hours`` left gets a warning."""
    store = StateStore(readonly=not refresh)
    if name is None:
        return list_clusters(store)
    region = aws.region_for(None)
    record = store.cluster(name, aws.target().region)
    if record is None:
        session = _found_in_aws(store, name, region)
        if session is None:
            raise ClusterNotFound(f"no cluster named '{name}' is known here or tagged in {region}. Known clusters: "
                                  f"{known_clusters(store)}")
        spec_problem = "no local record: another state directory's cluster (see owner), or one whose record was lost"
    else:
        check_reachable(record)
        spec, spec_problem = spec_of(record)
        session = Session.for_record(record, store, spec)
    from botocore.exceptions import BotoCoreError

    try:
        report = describe(session, spec_problem, block_warning_hours)
        _owner(report, name, session.region, record)  # only once AWS has answered: a dead endpoint is said once
    except (AwsError, BotoCoreError) as exc:
        if record is None or session.spec is not None:
            raise
        why = str(exc).splitlines()[0] if isinstance(exc, AwsError) else aws.describe_error("AWS", exc).aws_message
        report = _recorded(store, record, spec_problem, why)
    report.setdefault("owner", None)
    report["problem"] = stored_spec_problem(record.spec) if record is not None else None
    if refresh and record is not None:
        store.set_cluster_status(name, session.region, report["status"])
    return report


def _owner(report: dict[str, Any], name: str, region: str, record: ClusterRecord | None) -> None:
    """Whose cluster this is (the name's claim): another state directory's is shown as theirs, never as this
    record's."""
    from fmcluster.state.claims import holder

    held = holder(name, region)
    report["owner"] = held.as_json() if held is not None else None
    if held is None or held.mine:
        return
    if record is not None and held.cluster_id != record.cluster_id:
        report.setdefault("problems", []).append(
            f"the name {name} is claimed by {held.describe()}: what AWS holds under it is theirs, not the cluster "
            "this state directory recorded")


def _recorded(store: StateStore, record: ClusterRecord, spec_problem: str, why: str) -> dict[str, Any]:
    """A degraded record (its spec unusable) while AWS cannot be asked: what the state recorded, said as such,
    so the cluster can still be seen (and `destroy` still works from AWS's tags once AWS answers)."""
    return {"name": record.name, "backend": record.backend, "region": record.region, "status": record.status,
            "backend_status": None, "queues": [], "slurm_endpoint": None, "instances": [],
            "problems": [f"not read from AWS ({why}): the status and resources are what the state recorded"],
            "resources": [{"type": r.kind, "key": r.key, "id": r.id, "status": r.status, "managed": True,
                           "description": f"{r.kind}:{r.key} (recorded)"} for r in store.resources(record.name,
                                                                                                  record.region)],
            "drift": None, "drift_unknown": spec_problem}


def describe(session: Session, spec_problem: str = "",
             block_warning_hours: float = DEFAULT_WARNING_HOURS) -> dict[str, Any]:
    """The live report of one cluster: status, queues (each with where its nodes sit in AWS's network), its
    Capacity Blocks, every resource made for it, drift, cost. AWS is read once: describe, the topology, the blocks,
    discovery and the drift's plan share one read-only pass (:mod:`fmcluster.engine.reads`)."""
    with reads.reading(session.ctx):
        report = session.backend.describe(session.context)
        add_queue_topology(report, lambda: session.ctx.client("ec2"))
        _add_blocks(session, report, block_warning_hours)
        found = session.backend.discover(session.context)
        report["resources"] = [d.as_json() | {"managed": d.handle is not None, "description": d.description}
                               for d in found]
        if session.record is not None:
            report["since"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(session.record.created_at))
        report["drift"], report["drift_unknown"] = _drift(session, spec_problem, report["status"], found)
    report.update(live_cost(report, session.spec))
    budget = guard.status_fields(session, report)
    if budget is not None:
        report["budget"] = budget
    _whole(session, report, found)
    return report


def _whole(session: Session, report: dict[str, Any], found: list[Discovered]) -> None:
    """The state of the whole cluster over the backend's word on its anchor (:mod:`overall_state`'s rule), what
    of the spec is missing, what still bills, queues short of nodes, and what could not be read."""
    from fmcluster.aws import unread
    from fmcluster.verbs.lifecycle import overall_state as whole

    record = session.record
    missing = whole.missing_parts(report.get("drift"), PSEUDO_KINDS)
    holder = locks.describe_holder(locks.lock_path(session.store.path.parent / "locks", session.name,
                                                   session.region)) or {}
    facts = whole.Facts(report["status"], sum(1 for d in found if d.ours), missing,
                        record.status if record is not None else None, holder.get("command"))
    report["status"], report["state_reason"] = whole.overall(facts)
    report["missing"] = missing
    problems = report.setdefault("problems", [])
    if report["status"] == "INCOMPLETE" and missing:
        create = session.hint(f"fmcluster create {session.spec_file}")
        problems.append(f"missing from the spec: {whole.name_missing(missing)}; `{create}` makes them")
    elif report["status"] == "INCOMPLETE":
        problems.append(f"incomplete: {report['state_reason']}")
    elif report["status"] == "DELETING" and not holder and facts.anchor != "DELETING":  # a destroy that stopped
        problems.append(f"a destroy started and did not finish: `{session.hint(f'fmcluster destroy {session.name}')}` "
                        "finishes it")
    if report["status"] in ("INCOMPLETE", "DELETING", "STORAGE_KEPT", "FAILED"):
        billing = whole.billing_line(report, session.backend.profile.billing_kinds)
        if billing:
            problems.append(billing)
    # Queues on a Capacity Block that has not begun (as _add_blocks read them) have no nodes yet by design.
    waiting = {queue for block in report.get("capacity_blocks") or [] if block.get("hours_until_start") is not None
               for queue in block.get("queues") or []}
    problems += whole.shortfalls(report.get("queues") or [], report.get("instances") or [], waiting)
    for part, why in unread.unread(session.ctx).items():
        if not any(part in p.lower() for p in problems):  # the backend may have said it already
            problems.append(f"the cluster's {part.capitalize()} API was not read: {why}")


def _add_blocks(session: Session, report: dict[str, Any], warning_hours: float) -> None:
    """``capacity_blocks`` (each with its countdown and warning) and their problem lines, when the spec names
    Capacity Blocks; a block that cannot be read is said as a problem, never a failed status."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        blocks, problems = cluster_blocks(session.ctx, session.spec, warning_hours)
    except (BotoCoreError, ClientError) as exc:  # status still reports the cluster; say what could not be read
        blocks, problems = [], [f"Capacity Blocks not read: {aws.describe_error('EC2', exc).aws_message}"]
    if blocks:
        report["capacity_blocks"] = blocks
    if problems:
        report["problems"] = [*(report.get("problems") or []), *problems]


def _drift(session: Session, spec_problem: str, status: str,
           found: list[Discovered]) -> tuple[list[dict[str, Any]] | None, str | None]:
    """What differs between AWS and the spec: missing, extra (tagged for the cluster, not in the spec) and
    changed resources. None (and why) when there is no spec to compare with."""
    if session.spec is None:
        return None, spec_problem or "no spec recorded"
    if status == "NOT_FOUND" and session.record is not None and session.record.status in ("PLANNED",):
        return [], None
    try:
        plan = make_plan(session, found=found)
    except FmclusterError as exc:
        return None, str(exc).splitlines()[0]
    drift: list[dict[str, Any]] = []
    for change in plan.pending():
        if change.action == "create":
            drift.append({"resource": change.resource, "expected": "exists", "actual": "missing"})
        elif change.action == "delete":
            drift.append({"resource": change.resource, "expected": "absent (not in the spec)", "actual": "exists"})
        elif not change.attributes:
            drift.append({"resource": change.resource, "expected": "usable", "actual": change.reason})
        for attribute in change.attributes:
            drift.append({"resource": f"{change.resource}.{attribute.path}",
                          "expected": _plain(attribute.new), "actual": _plain(attribute.old)})
    return drift, None


def _plain(value: Any) -> Any:
    return repr(value) if isinstance(value, Unknown) else value


def where(endpoint_label: str) -> str:
    """A record's endpoint as a column: aws, sandbox, or the endpoint URL ("unrecorded" for records older
    than state v2)."""
    return "sandbox" if endpoint_label.startswith("sandbox:") else (endpoint_label or "unrecorded")


def list_clusters(store: StateStore) -> list[dict[str, Any]]:
    """The local records, then clusters AWS holds by their ``fmcluster:cluster`` tag that no record names (a
    teammate's). A record this command reaches (its endpoint) shows AWS's status, not the one it recorded: a
    cluster AWS no longer holds is NOT_FOUND, with a note, never the ACTIVE its record kept."""
    records = store.clusters()
    here = aws.target_label()
    region = aws.region_for(None)
    reached = [r for r in records if r.endpoint_url in (here, "")]  # "": a record from before endpoints were kept
    held = {where_: _tagged_by_backend(where_) for where_ in sorted({region, *(r.region for r in reached)})}
    rows = []
    for record in records:
        spec, problem = spec_of(record)
        cost = spec_cost(spec) if spec else None
        status, note = record.status, None
        in_aws = (held[record.region] or {}).get(record.backend) if record in reached else None
        if in_aws is not None:  # AWS answered for this backend and Region
            status = in_aws.get(record.name, "NOT_FOUND")
            if status == "NOT_FOUND":
                display = registry.profile(record.backend).display
                note = (f"AWS holds no {display} cluster {record.name} in {record.region} (the local record says "
                        f"{record.status}): `fmcluster status {record.name}` shows anything left of it, "
                        f"`fmcluster destroy {record.name} --yes` removes that and forgets the record")
        rows.append({"name": record.name, "backend": record.backend, "region": record.region,
                     "status": status if spec else f"{status} (spec unreadable)",
                     "queues": [q.name for q in spec.queues] if spec else [],
                     "nodes_max": sum(max_nodes(q) for q in spec.queues) if spec else None,
                     "usd_per_hour": cost.usd_per_hour if cost else None,
                     # the parts that bill but have no bundled price, left out of usd_per_hour
                     "usd_unpriced": cost.unknown if cost else [],
                     "where": where(record.endpoint_url),
                     "source": "local", "problem": problem or None, **({"note": note} if note else {})})
    local = {(r["name"], r["region"]) for r in rows}
    for backend, found in (held[region] or {}).items():
        for name, status in (found or {}).items():
            if (name, region) not in local:
                rows.append(_row(name, backend, region, status))
    return rows


def _tagged_by_backend(region: str) -> dict[str, dict[str, str] | None] | None:
    """{backend: {name: common status}} of the clusters ``region`` holds by their fmcluster:cluster tag; a backend
    whose listing failed maps to None, and the whole is None when AWS cannot be reached (nothing can be said)."""
    if not aws.has_credentials(region):
        return None
    found: dict[str, dict[str, str] | None] = {}
    for backend in registry.names():
        try:
            found[backend] = dict(registry.get(backend).tagged_clusters(region))
        except Exception as exc:  # the local list still stands; say what could not be read
            found[backend] = None
            ui.note(f"{backend} clusters tagged in {region} not listed: {aws.describe_error('list', exc).aws_message}")
    return found


def _row(name: str, backend: str, region: str, status: str) -> dict[str, Any]:
    from fmcluster.state.claims import holder

    held = holder(name, region)  # whose it is: a teammate's cluster is listed as theirs
    return {"name": name, "backend": backend, "region": region, "status": status, "queues": [],
            "nodes_max": None, "usd_per_hour": None, "usd_unpriced": [], "where": where(aws.target_label()),
            "source": "aws",
            "owner": held.as_json() if held is not None else None,
            "problem": None, "note": "no local record: `fmcluster status NAME` shows it and its owner"}


def _found_in_aws(store: StateStore, name: str, region: str) -> Session | None:
    """A cluster with no local record that AWS holds by its tags (a teammate's): a session with no spec."""
    if not aws.has_credentials(region):
        return None
    for backend in registry.names():
        session = Session.bare(name, region, backend, store)
        try:
            cluster_id = session.backend.find_cluster_id(session.context)
        except FmclusterError:
            continue
        except Exception:  # a service this account or region lacks: the other backend may still answer
            continue
        if cluster_id:
            session.set_cluster_id(cluster_id)
            return session
    return None
