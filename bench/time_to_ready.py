"""Time to ready of a PCS cluster in the sandbox, against the critical path of its resources.

    .venv/bin/python bench/time_to_ready.py [--json] [--keep]

Starts a private sandbox (its own FMCLUSTER_HOME in a temp dir, a free port), sets fixed latencies (PCS
cluster 6 s, node group 3 s, queue 1 s; 1 s for CreateSecurityGroup, CreateLaunchTemplate,
CreatePlacementGroup and CreateInstanceProfile), writes a spec with 4 queues of p5.4xlarge (nodes 0..1, in a
default-VPC subnet whose zone offers both instance types, so no network is created) and runs
``fmcluster create SPEC --yes`` in a subprocess through ``bench/counted_cli.py`` (which counts the API calls
of that process and writes them at exit).

* ``wall_s``: first engine event to the last resource ready, from the progress lines on stderr (one per
  event with the elapsed seconds, since stderr is not a TTY);
* ``critical_path_s``: the longest path through the dependency graph the engine walks (recorded by
  ``bench/counted_cli.py`` from ``Engine.apply``), each resource weighted with the latency set for it;
  ``serial_s``: the sum of all those latencies (every resource one after the other);
  ``ratio = wall_s / critical_path_s``;
* ``api_calls_create`` / ``api_calls_status``: botocore calls of ``create`` and of ``status NAME --json``;
* ``calls_per_minute_waiting``: HTTP requests per minute between the first engine event and ready.

Then it checks that polling backs off (intervals between reads of the PCS cluster grow) and that nothing
was throttled (the sandbox has no throttling configured), destroys the cluster and checks nothing is left.
Exits 1 when the ratio misses its target (``ratio <= 1.15``), something was throttled or left behind.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, Sandbox, run  # noqa: E402

TARGET_RATIO = 1.15  # wall time at most 15 % over the critical path
LATENCY = {
    "pcs.cluster": 6.0,
    "pcs.compute_node_group": 3.0,
    "pcs.queue": 1.0,
    "call.ec2.CreateSecurityGroup": 1.0,
    "call.ec2.CreateLaunchTemplate": 1.0,
    "call.ec2.CreatePlacementGroup": 1.0,
    "call.iam.CreateInstanceProfile": 1.0,
}
# Which latencies a resource of each kind pays while it is created (call delays and transition time).
KIND_COST = {
    "security_group": ["call.ec2.CreateSecurityGroup"],
    "placement_group": ["call.ec2.CreatePlacementGroup"],
    "launch_template": ["call.ec2.CreateLaunchTemplate"],
    "instance_profile": ["call.iam.CreateRole", "call.iam.CreateInstanceProfile"],
    "cluster": ["call.pcs.CreateCluster", "pcs.cluster"],
    "compute_node_group": ["call.pcs.CreateComputeNodeGroup", "pcs.compute_node_group"],
    "queue": ["call.pcs.CreateQueue", "pcs.queue"],
}
EVENT = re.compile(r"^\s*(\d+\.\d)s (\S) (\S+)\s*(.*)$")
PLAN_ROW = re.compile(r"^\s*\+ (create|resume)\s+(\S+)\s+(.+?)\s*$")
READS = ("Get", "Describe", "List")


def default_subnet(sandbox: Sandbox, instance_types: tuple[str, ...]) -> str:
    """A default-VPC subnet in a zone that offers every one of ``instance_types``."""
    ec2 = sandbox.client("ec2")
    offered = [{o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [t]}])["InstanceTypeOfferings"]}
        for t in instance_types]
    zones = set.intersection(*offered)
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    return sorted(s["SubnetId"] for s in subnets if s["AvailabilityZone"] in zones)[0]


def write_spec(directory: Path, name: str, subnet_id: str) -> Path:
    spec = {
        "name": name, "region": "us-east-1", "backend": "pcs", "head_node": {"instance_type": "m7i.xlarge"},
        "network": {"subnet_id": subnet_id},
        "queues": [{"name": f"queue{i}", "instance_type": "p5.4xlarge", "nodes": {"min": 0, "max": 1}}
                   for i in range(4)],
        "tags": {"team": "bench"},
    }
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def parse_plan(stderr: str) -> dict[str, list[str]]:
    graph = {}
    for line in stderr.splitlines():
        match = PLAN_ROW.match(line)
        if match:
            _, resource, after = match.groups()
            graph[resource] = [] if after.strip() in ("—", "-") else [d.strip() for d in after.split(",")]
    return graph


def parse_events(stderr: str) -> list[tuple[float, str, str, str]]:
    events = []
    for line in stderr.splitlines():
        match = EVENT.match(line)
        if match:
            at, mark, resource, text = match.groups()
            events.append((float(at), mark, resource, text))
    return events


def cost(resource: str, latency: dict[str, float]) -> float:
    kind = resource.split(":", 1)[0]
    return sum(latency.get(key, 0.0) for key in KIND_COST.get(kind, []))


def critical_path(graph: dict[str, list[str]], latency: dict[str, float]) -> tuple[float, list[str]]:
    finish: dict[str, tuple[float, list[str]]] = {}

    def visit(node: str) -> tuple[float, list[str]]:
        if node not in finish:
            before = max((visit(d) for d in graph.get(node, []) if d in graph), default=(0.0, []))
            finish[node] = (before[0] + cost(node, latency), [*before[1], node])
        return finish[node]

    return max((visit(n) for n in graph), default=(0.0, []))


def counted(sandbox: Sandbox, cli_home: Path, out: Path, *args: str) -> tuple[float, object, dict]:
    started = time.monotonic()
    result = run([sys.executable, str(REPO / "bench" / "counted_cli.py"), str(out), *args],
                 sandbox.cli_env(cli_home))
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"fmcluster {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return elapsed, result, json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print

    with tempfile.TemporaryDirectory(prefix="fmcluster-bench-ttr-") as tmp:
        tmp_path = Path(tmp)
        sandbox = Sandbox(tmp_path / "sandbox-home").start()
        try:
            say(f"sandbox on {sandbox.info['endpoint_url']} (pid {sandbox.info['pid']})")
            sandbox.faults({"reset": True})
            sandbox.faults({"latency": LATENCY})
            name = f"ttr-{uuid.uuid4().hex[:8]}"
            spec = write_spec(tmp_path, name, default_subnet(sandbox, ("m7i.xlarge", "p5.4xlarge")))
            cli_home = tmp_path / "cli-home"

            total_s, create, create_calls = counted(sandbox, cli_home, tmp_path / "create.json", "create",
                                                    str(spec), "--yes")
            events = parse_events(create.stderr)
            graph = create_calls.get("graph") or parse_plan(create.stderr)
            if not graph:
                raise SystemExit("no dependency graph recorded for create, so the critical path cannot be computed")
            first = events[0][0]
            done = {resource: at for at, mark, resource, _ in events if mark == "✓"}
            started = {}
            for at, _, resource, _ in events:
                started.setdefault(resource, at)
            missing = set(graph) - set(done)
            if missing:
                raise SystemExit(f"never ready: {sorted(missing)}\n{create.stderr}")
            wall = max(done.values()) - first
            critical, path = critical_path(graph, LATENCY)
            serial = sum(cost(r, LATENCY) for r in graph)

            # calls while the engine works and waits: first engine event to the last resource ready, on the
            # wrapper's clock (the same monotonic clock as the events)
            attempts = create_calls["attempts"]
            engine_events = create_calls["events"]
            window_start = engine_events[0][0]
            window_end = max(e[0] for e in engine_events if e[2] == "done")
            engine_calls = [a for a in attempts if window_start <= a[0] <= window_end]
            window = window_end - window_start
            per_minute = len(engine_calls) / window * 60 if window else 0.0
            reads = [a for a in engine_calls if a[1].split(".")[-1].startswith(READS)]
            polls = [a[0] for a in attempts if a[1].endswith("GetCluster")]
            gaps = [b - a for a, b in zip(polls, polls[1:], strict=False)]

            status_s, _, status_calls = counted(sandbox, cli_home, tmp_path / "status.json", "status", name,
                                                "--json")
            destroy_s, destroy, destroy_calls = counted(sandbox, cli_home, tmp_path / "destroy.json", "destroy",
                                                        name, "--yes")
            leftovers = {k: v for k, v in sandbox.inventory(name).items() if v}
        finally:
            sandbox.stop()

    throttled = create_calls["throttled"] + status_calls["throttled"] + destroy_calls["throttled"]
    result = {
        "wall_s": round(wall, 2),
        "critical_path_s": round(critical, 2),
        "serial_s": round(serial, 2),
        "ratio": round(wall / critical, 3),
        "target": TARGET_RATIO,
        "meets_target": wall / critical <= TARGET_RATIO,
        "api_calls_create": sum(create_calls["api_calls"].values()),
        "api_calls_status": sum(status_calls["api_calls"].values()),
        "calls_per_minute_waiting": round(per_minute, 1),
        "detail": {
            "create_command_s": round(total_s, 2),
            "status_command_s": round(status_s, 2),
            "destroy_command_s": round(destroy_s, 2),
            "api_calls_destroy": sum(destroy_calls["api_calls"].values()),
            "http_requests_create": len(attempts),
            "reads_per_minute_waiting": round(len(reads) / window * 60, 1) if window else 0.0,
            "throttled": throttled,
            "critical_path": path,
            "resources": len(graph),
            "latency_set": LATENCY,
            "per_resource_s": {r: [round(started[r] - first, 1), round(done[r] - first, 1)] for r in graph},
            "get_cluster_poll_gaps_s": [round(g, 2) for g in gaps],
            "polling_backs_off": bool(gaps) and statistics.mean(gaps[-3:]) > 1.5 * statistics.mean(gaps[:3]),
            "api_calls_create_by_op": dict(sorted(create_calls["api_calls"].items())),
            "api_calls_status_by_op": dict(sorted(status_calls["api_calls"].items())),
            "leftovers_after_destroy": leftovers,
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(json.dumps({k: v for k, v in result.items() if k != "detail"}, indent=2))
        d = result["detail"]
        print(f"create command {d['create_command_s']} s, status {d['status_command_s']} s, "
              f"destroy {d['destroy_command_s']} s; {d['resources']} resources")
        print("critical path: " + " → ".join(d["critical_path"]))
        print("each resource: first event → ready (s after the engine's first event):")
        for resource, (begin, end) in d["per_resource_s"].items():
            print(f"  {resource:<36} {begin:5.1f} → {end:5.1f}   (latency {cost(resource, LATENCY):.0f} s)")
        print(f"GetCluster poll gaps (s): {d['get_cluster_poll_gaps_s']}")
        print(f"polling backs off: {d['polling_backs_off']}; throttled answers: {d['throttled']}; "
              f"leftovers after destroy: {d['leftovers_after_destroy'] or 'none'}")
        print(f"create calls by operation: {d['api_calls_create_by_op']}")
        print(f"status calls by operation: {d['api_calls_status_by_op']}")
    ok = not leftovers and throttled == 0 and wall / critical <= TARGET_RATIO
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
