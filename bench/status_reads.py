"""How many AWS calls ``status NAME --json`` makes, and whether it reads any resource twice.

    .venv/bin/python bench/status_reads.py [--json] [--only pcs,parallelcluster,eks]

In a private sandbox, for the quickstart PCS cluster (``configs/quickstart-pcs.yaml``), the quickstart
ParallelCluster cluster (``configs/quickstart-parallelcluster.yaml``) and an EKS cluster
(``configs/p5-kueue-eks.yaml`` on a Capacity Block bought in the sandbox as ``tests/backends/eks/test_lifecycle_eks.py``
buys one): ``fmcluster create SPEC --yes``, then ``status NAME --json`` and a second ``create SPEC --yes`` (the cluster
matches its spec, so it only reads: the plan it shows before it would ask) each through
``bench/counted_cli.py``, which records every AWS call with its parameters (ParallelCluster's own clients'
included), then ``destroy``.

Each call is a *list* (a ``List…``, or a ``Describe…``/``Get…`` that names no resource: a tag-filtered scan) or a
*read* (one that names the resource it reads). Per command, of fmcluster's own clients:

* ``calls``: its AWS calls; ``lists`` / ``reads``: the calls by that split;
* ``resources``: the resources ``status`` reports as managed (``"managed": true``);
* ``repeated``: calls identical to an earlier one of the same command (operation and parameters);
* ``pcluster_calls`` / ``pcluster_repeated``: the same for the calls ParallelCluster's Python API makes with
  its own clients (its ``describe_cluster``, ``describe_cluster_instances``, ``describe_compute_fleet``, and
  the dry-run ``update_cluster`` that is a ParallelCluster cluster's drift, with its validators); fmcluster
  calls each of those operations once per command, and what each reads inside is ParallelCluster's.

Targets (exit 1 when one is missed): for ``status``, ``reads <= resources`` (at most one read call per resource,
plus list calls) and ``repeated == 0``, on every example; and the quickstart PCS ``status`` makes at most 46
calls (half of the 92 it made before one read pass served describe, discovery and the drift).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, Sandbox, fmcluster_exe  # noqa: E402

PCS_STATUS_MAX_CALLS = 46  # half of the 92 calls `status` made on the quickstart PCS cluster at 1618a5f
# Parameters that page or filter a listing: a call with no other parameter names no resource.
_LISTING = {"Filters", "Filter", "MaxResults", "NextToken", "maxResults", "nextToken", "MaxItems", "Marker",
            "PaginationConfig"}


def is_list(operation: str, params: dict[str, Any]) -> bool:
    name = operation.split(".", 1)[1]
    return name.startswith("List") or not (set(params) - _LISTING)


def tally(record: dict[str, Any]) -> dict[str, Any]:
    """What one counted command asked of AWS: calls, lists, reads, repeats (see the module's docstring), of
    fmcluster's own clients; ParallelCluster's are counted apart (``pcluster_*``)."""
    figures: dict[str, Any] = {}
    for prefix, params in (("", record["params"]), ("pcluster_", record["pcluster_params"])):
        seen: Counter[str] = Counter(f"{op} {json.dumps(p, sort_keys=True, default=str)}" for op, p in params)
        lists = sum(1 for op, p in params if is_list(op, p or {}))
        figures.update({f"{prefix}calls": len(params), f"{prefix}lists": lists, f"{prefix}reads": len(params) - lists,
                        f"{prefix}repeated": sum(n - 1 for n in seen.values()),
                        f"{prefix}repeated_calls": sorted(k for k, n in seen.items() if n > 1),
                        f"{prefix}by_operation": dict(sorted(Counter(op for op, _ in params).items()))})
    return figures


def _buy_block(sandbox: Sandbox, instances: int) -> str:
    """A p5.48xlarge Capacity Block that starts now (as tests/backends/eks/test_lifecycle_eks.py buys one)."""
    ec2 = sandbox.client("ec2")
    offers = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=instances,
                                                   CapacityDurationHours=24)["CapacityBlockOfferings"]
    now = dt.datetime.now(dt.timezone.utc)
    offer = next(o for o in offers if o["StartDate"] <= now)
    return ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                       InstancePlatform="Linux/UNIX")["CapacityReservation"]["CapacityReservationId"]


EXAMPLES = {"pcs": "quickstart-pcs.yaml", "parallelcluster": "quickstart-parallelcluster.yaml",
            "eks": "p5-kueue-eks.yaml"}


def measure(sandbox: Sandbox, work: Path, backend: str) -> dict[str, Any]:
    data = yaml.safe_load((REPO / "configs" / EXAMPLES[backend]).read_text())
    data["name"] = name = f"reads-{backend[:3]}-{uuid.uuid4().hex[:6]}"
    if backend == "eks":
        data["queues"][0]["capacity"]["reservation_id"] = _buy_block(sandbox, data["queues"][0]["nodes"])
    spec = work / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    env = sandbox.cli_env(work / "home")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*fmcluster_exe(), *args], env=env, capture_output=True, text=True, timeout=900)

    def counted(label: str, *args: str) -> tuple[dict[str, Any], str, float]:
        out = work / f"{name}-{label}.json"
        started = time.monotonic()
        result = subprocess.run([sys.executable, str(REPO / "bench" / "counted_cli.py"), str(out), *args],
                                env=env, capture_output=True, text=True, timeout=900)
        wall = time.monotonic() - started
        if result.returncode != 0:
            raise SystemExit(f"{label} of {name} failed ({result.returncode}):\n{result.stderr[-3000:]}")
        return json.loads(out.read_text()), result.stdout, wall

    created = run("create", str(spec), "--yes")
    if created.returncode != 0:
        raise SystemExit(f"create of {name} failed:\n{created.stderr[-3000:]}")
    try:
        status_record, stdout, status_wall = counted("status", "status", name, "--json")
        report = json.loads(stdout)
        recreate_record, _, recreate_wall = counted("create", "create", str(spec), "--yes")
    finally:
        run("destroy", name, "--yes")
    status = tally(status_record)
    status.update(resources=sum(1 for r in report["resources"] if r.get("managed")), wall_s=round(status_wall, 2),
                  drift=report["drift"])
    recreate = tally(recreate_record) | {"wall_s": round(recreate_wall, 2)}
    return {"example": f"configs/{EXAMPLES[backend]}", "status": status, "create_in_sync": recreate}


def misses(backend: str, figures: dict[str, Any]) -> list[str]:
    status = figures["status"]
    found = []
    if status["reads"] > status["resources"]:
        found.append(f"{backend}: status made {status['reads']} read calls for {status['resources']} resources")
    if status["repeated"]:
        found.append(f"{backend}: status repeated {status['repeated']} calls: {status['repeated_calls']}")
    if backend == "pcs" and status["calls"] > PCS_STATUS_MAX_CALLS:
        found.append(f"pcs: status made {status['calls']} calls (target <= {PCS_STATUS_MAX_CALLS})")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default=",".join(EXAMPLES), help="comma-separated: pcs,parallelcluster,eks")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fmcluster-status-reads-"))
    sandbox = Sandbox(work / "sandbox").start()
    results: dict[str, Any] = {}
    try:
        for backend in args.only.split(","):
            results[backend] = measure(sandbox, work, backend)
    finally:
        sandbox.stop()
    missed = [m for backend, figures in results.items() for m in misses(backend, figures)]
    if args.json:
        print(json.dumps({"results": results, "missed": missed}, indent=1, default=str))
    else:
        print(f"{'example':42} {'command':14} {'calls':>5} {'lists':>5} {'reads':>5} {'resources':>9} "
              f"{'repeated':>8} {'pcluster calls':>14} {'pcluster repeated':>17} {'wall s':>6}")
        for figures in results.values():
            for command in ("status", "create_in_sync"):
                f = figures[command]
                print(f"{figures['example']:42} {command:14} {f['calls']:5} {f['lists']:5} {f['reads']:5} "
                      f"{f.get('resources', ''):>9} {f['repeated']:8} {f['pcluster_calls']:14} "
                      f"{f['pcluster_repeated']:17} {f['wall_s']:6}")
        for line in missed:
            print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
