"""What every backend's smoke test judges the same way: what the queue's nodes should show (:class:`Expectations`,
from the catalog and the spec), the facts its job prints (``FMCLUSTER <node> <fact> <value>`` lines and nccl-tests
``all_reduce_perf`` output between ``FMCLUSTER-NCCL-BEGIN`` and ``-END``) judged against them — accelerators
visible, the EFA provider and device count, all-reduce bus bandwidth against the catalog's EFA bandwidth — and the
report of docs/smoke-json.md. Missing tools are "absent": a failure. Names no backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fmcluster import catalog
from fmcluster.backends.smoke import nccl
from fmcluster.errors import UsageError
from fmcluster.spec import decisions
from fmcluster.spec.models import Queue, Spec, max_nodes, min_nodes

# All-reduce bus bandwidth below this share of the EFA line rate fails the check. Healthy EFA runs sit near
# or above it (2x p5.48xlarge: 487 GB/s of 400; 2x p4de.24xlarge: 78 of 50, see tests/data/nccl-tests/);
# NCCL falling back to TCP sockets lands far below it.
MIN_EFA_FRACTION = 0.7
FAILING = ("failed", "absent")


@dataclass
class Check:
    name: str
    status: str  # passed | failed | absent | skipped
    detail: str = ""
    found: Any = None
    expected: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "found": self.found, "expected": self.expected,
                "detail": self.detail, **self.extra}


@dataclass(frozen=True)
class Expectations:
    queue: Queue
    nodes: int
    accelerators: int | None
    kind: str  # gpu | trainium
    efa_devices: int | None  # None: EFA off (or the layout is unknown, see efa_on)
    efa_on: bool
    efa_gbps: float | None


def expectations(spec: Spec, queue_name: str | None, nodes: int | None) -> Expectations:
    queues = {q.name: q for q in spec.queues}
    if queue_name is not None and queue_name not in queues:
        raise UsageError(f"cluster {spec.name} has no queue '{queue_name}'; its queues: {', '.join(queues)}")
    queue = queues[queue_name] if queue_name else next(
        (q for q in spec.queues if (f := catalog.instance(q.instance_type)) and f.accelerators), spec.queues[0])
    facts = catalog.instance(queue.instance_type)
    # Static queues: every node. Queues that scale: two nodes, the fewest that put all-reduce on EFA.
    count = nodes or min_nodes(queue) or min(2, max_nodes(queue))
    if count > max_nodes(queue):
        raise UsageError(f"--nodes {count}: queue {queue.name} has at most {max_nodes(queue)} nodes")
    efa_on = decisions.efa_enabled(queue)
    try:
        efa_devices = sum(1 for nic in decisions.efa_network_interfaces(queue) if nic["efa"]) if efa_on else None
    except LookupError:
        efa_devices = None
    return Expectations(queue, count, facts.accelerators if facts else None,
                        facts.accelerator.kind if facts else "gpu", efa_devices, efa_on,
                        facts.efa_gbps if facts else None)


def judge(output: str, expect: Expectations) -> tuple[dict[str, list[Check]], list[Check]]:
    """The job's facts against the expectations: checks per node, then the cluster-wide ones."""
    facts: dict[str, dict[str, str]] = {}
    for line in output.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) >= 4 and parts[0] == "FMCLUSTER":
            facts.setdefault(parts[1], {})[parts[2]] = parts[3]
    cluster_facts = facts.pop("-", {})
    per_node = {node: _node_checks(values, expect) for node, values in sorted(facts.items())}
    overall = [_nodes_check(per_node, expect)]
    text = output.split("FMCLUSTER-NCCL-BEGIN", 1)[1].split("FMCLUSTER-NCCL-END", 1)[0] \
        if "FMCLUSTER-NCCL-BEGIN" in output else ""
    overall += _nccl_checks(cluster_facts.get("nccl"), nccl.parse(text), expect)
    return per_node, overall


def _node_checks(values: dict[str, str], expect: Expectations) -> list[Check]:
    name = "accelerators" if expect.kind == "trainium" else "gpus"
    checks = [_count_check(name, values.get(name), expect.accelerators)]
    if not expect.efa_on:
        checks.append(Check("efa", "skipped", f"EFA is off for queue {expect.queue.name}"))
        return checks
    provider = _count_check("efa_provider", values.get("efa_provider"), None)
    if provider.found is not None:  # the provider works; how many devices it sees is efa_devices' business
        provider = Check("efa_provider", "passed" if provider.found else "absent",
                         f"{provider.found} RDM endpoint(s) from fi_info -p efa", provider.found)
    checks.append(provider)
    devices = values.get("efa_devices")
    if devices == "0":
        devices = "absent no EFA device in /sys/class/infiniband"
    checks.append(_count_check("efa_devices", devices, expect.efa_devices))
    return checks


def _count_check(name: str, value: str | None, expected: int | None, what: str = "") -> Check:
    if value is None:
        return Check(name, "failed", "the node reported nothing", expected=expected)
    head, _, detail = value.partition(" ")
    if head in ("absent", "failed"):
        return Check(name, head, detail, expected=expected)
    if not head.isdigit():
        return Check(name, "failed", f"unreadable: {value}", expected=expected)
    found = int(head)
    if expected is None:
        return Check(name, "passed", f"{found} {what}".strip() + " (the catalog has no count to compare)", found)
    ok = found == expected
    return Check(name, "passed" if ok else "failed", f"{f'{found} {what}'.strip()}, expected {expected}",
                 found, expected)


def _nodes_check(per_node: dict[str, list[Check]], expect: Expectations) -> Check:
    seen = len(per_node)
    status = "passed" if seen == expect.nodes else "failed"
    return Check("nodes", status, f"{seen} of {expect.nodes} node(s) reported", seen, expect.nodes)


def _nccl_checks(fact: str | None, result: nccl.NcclResult, expect: Expectations) -> list[Check]:
    if fact is None or fact.startswith("absent"):
        detail = fact.partition(" ")[2] if fact else "the job ended before all_reduce_perf"
        status = "absent" if fact else "failed"
        return [Check("nccl_all_reduce", status, detail),
                _bandwidth_check(None, expect, (status, "no all_reduce_perf result to measure"))]
    code = fact.split()[1] if len(fact.split()) > 1 else "?"
    peak = result.peak_busbw_gb_s
    bandwidth = {"busbw_peak_gb_s": peak, "busbw_avg_gb_s": result.avg_busbw_gb_s}
    if code != "0" or not result.rows:
        return [Check("nccl_all_reduce", "failed", f"all_reduce_perf exited {code} with {len(result.rows)} result "
                      "rows", extra=bandwidth), _bandwidth_check(None, expect, ("failed", "no all_reduce_perf result"))]
    wrong = result.wrong_results or result.out_of_bounds or 0
    run = Check("nccl_all_reduce", "failed" if wrong else "passed",
                f"{len(result.rows)} sizes, peak bus bandwidth {peak:.1f} GB/s"
                + (f", {wrong} wrong result(s)" if wrong else ""), extra=bandwidth)
    return [run, _bandwidth_check(peak, expect)]


def _bandwidth_check(peak: float | None, expect: Expectations, missing: tuple[str, str] | None = None) -> Check:
    if not expect.efa_on:
        return Check("efa_bandwidth", "skipped", f"EFA is off for queue {expect.queue.name}")
    if expect.nodes < 2:
        return Check("efa_bandwidth", "skipped", "one node: all-reduce stays inside it; --nodes 2 or more "
                     "puts it on EFA")
    if missing:
        return Check("efa_bandwidth", *missing)
    if expect.efa_gbps is None or peak is None:
        return Check("efa_bandwidth", "skipped", "the catalog has no EFA bandwidth for "
                     f"{expect.queue.instance_type}", peak)
    line_rate = expect.efa_gbps / 8  # Gbit/s → GB/s, nccl-tests' unit
    fraction = peak / line_rate
    status = "passed" if fraction >= MIN_EFA_FRACTION else "failed"
    return Check("efa_bandwidth", status, f"peak bus bandwidth {peak:.1f} GB/s = {fraction:.0%} of EFA's "
                 f"{expect.efa_gbps:,.0f} Gbps ({line_rate:,.0f} GB/s); needs ≥ {MIN_EFA_FRACTION:.0%}",
                 round(peak, 2), round(line_rate, 2), {"fraction": round(fraction, 3)})


def report_of(spec: Spec, expect: Expectations, job_id: str, job_state: str, output_path: str | None,
              per_node: dict[str, list[Check]], checks: list[Check]) -> dict[str, Any]:
    """The report of docs/smoke-json.md, on any backend: ``checks`` begins with the ``job`` check."""
    ok = not any(c.status in FAILING for c in checks) and not any(
        c.status in FAILING for node in per_node.values() for c in node)
    return {"cluster": spec.name, "queue": expect.queue.name, "instance_type": expect.queue.instance_type,
            "nodes": expect.nodes, "job_id": job_id, "job_state": job_state, "output_file": output_path, "ok": ok,
            "node_checks": [{"node": node, "checks": [c.to_json() for c in items]}
                            for node, items in per_node.items()],
            "checks": [c.to_json() for c in checks]}
