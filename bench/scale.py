"""Plan and render time, and peak memory, for generated large specs.

    python bench/scale.py [--repeat 7] [--json]

Each size runs in its own fresh interpreter (so memory figures do not mix): it imports fmcluster first
(import time is not counted), then times ``load_spec`` (YAML + validation), ``plan_report`` (the offline
figures) and ``render`` (the backend documents), ``--repeat`` times (default 7), keeping the median. Peak memory is
tracemalloc's peak during one load+plan+render, and the child's max RSS.

Sizes: ParallelCluster 1, 2, 5, 10 queues x 16, 256, 2048 nodes per queue; PCS 1 queue x 2048 nodes and
9 queues (+ the login group = 10 node groups, PCS's cap) x 1, 32, 227 nodes (2,043 in all: PCS manages at
most 2,048 nodes per cluster). Growth is reported as a ratio to the smallest size of each backend, all
measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

CHILD = r"""
import json, resource, statistics, sys, time, tracemalloc
from fmcluster.spec import load_spec
from fmcluster.cost_report.figures import plan_report
from fmcluster.pricing.rates import PriceBook
from fmcluster.backends.registry import render

path, repeat = sys.argv[1], int(sys.argv[2])

def once():
    t0 = time.perf_counter()
    spec = load_spec(path).spec
    t1 = time.perf_counter()
    report = plan_report(spec, PriceBook(spec.region))
    report.to_json()
    t2 = time.perf_counter()
    rendered = render(spec, path)
    size = sum(len(d.text) for d in rendered.documents)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, size, len(rendered.documents)

once()  # first call pays lazy imports (templates, catalog): not counted
runs = [once() for _ in range(repeat)]
tracemalloc.start()
once()
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
print(json.dumps({
    "load_s": statistics.median(r[0] for r in runs),
    "plan_s": statistics.median(r[1] for r in runs),
    "render_s": statistics.median(r[2] for r in runs),
    "rendered_bytes": runs[0][3],
    "documents": runs[0][4],
    "tracemalloc_peak_mib": peak / 2**20,
    "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def spec_for(backend: str, queues: int, nodes: int) -> dict:
    spec: dict = {
        "name": f"scale-{backend[:3]}-{queues}q-{nodes}n",
        "region": "us-east-1",
        "backend": backend,
        "head_node": {"instance_type": "m7i.8xlarge"},
        "queues": [{"name": f"queue{i}", "instance_type": "p5.48xlarge", "nodes": {"min": 0, "max": nodes}}
                   for i in range(queues)],
        "storage": {"lustre": {"mount": "/fsx", "capacity_gib": 4800, "throughput_per_tib": 250}},
        "workload": {"model_params_b": 70, "checkpoint_every_min": 30},
        "tags": {"team": "bench"},
    }
    if backend == "pcs":
        for queue in spec["queues"]:
            queue["efa"] = False  # EFA layout on PCS is not what is measured here
    return spec


def sizes() -> list[tuple[str, int, int]]:
    out = [("parallelcluster", q, n) for q in (1, 2, 5, 10) for n in (16, 256, 2048)]
    out += [("pcs", 1, 2048)] + [("pcs", 9, n) for n in (1, 32, 227)]
    return out


def measure(directory: Path, backend: str, queues: int, nodes: int, repeat: int) -> dict:
    path = directory / f"{backend}-{queues}q-{nodes}n.yaml"
    path.write_text(yaml.safe_dump(spec_for(backend, queues, nodes), sort_keys=False))
    env = {**os.environ, "NO_COLOR": "1"}
    result = subprocess.run([sys.executable, "-c", CHILD, str(path), str(repeat)], capture_output=True, text=True,
                            env=env)
    row = {"backend": backend, "queues": queues, "nodes_per_queue": nodes, "nodes_total": queues * nodes}
    if result.returncode != 0:
        row["error"] = (result.stderr.strip().splitlines() or ["?"])[-1]
        return row
    row.update(json.loads(result.stdout.strip().splitlines()[-1]))
    row["total_s"] = row["load_s"] + row["plan_s"] + row["render_s"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fmcluster-bench-scale-") as tmp:
        rows = [measure(Path(tmp), *size, args.repeat) for size in sizes()]
    base: dict[str, float] = {}
    for row in rows:
        if "error" in row:
            continue
        base.setdefault(row["backend"], row["total_s"])
        row["x_smallest"] = row["total_s"] / base[row["backend"]]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'backend':<16}{'queues':>7}{'nodes/q':>8}{'total':>7}{'load ms':>9}{'plan ms':>9}{'render ms':>10}"
              f"{'sum ms':>8}{'x first':>8}{'peak MiB':>9}{'RSS MiB':>8}{'bytes':>8}")
        for row in rows:
            head = f"{row['backend']:<16}{row['queues']:>7}{row['nodes_per_queue']:>8}{row['nodes_total']:>7}"
            if "error" in row:
                print(f"{head}  error: {row['error']}")
                continue
            print(f"{head}{row['load_s'] * 1000:>9.1f}{row['plan_s'] * 1000:>9.1f}{row['render_s'] * 1000:>10.1f}"
                  f"{row['total_s'] * 1000:>8.1f}{row['x_smallest']:>8.2f}{row['tracemalloc_peak_mib']:>9.2f}"
                  f"{row['max_rss_mib']:>8.0f}{row['rendered_bytes']:>8}")
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
