"""Throttling endurance, through the installed command: a PCS quickstart ``create`` then ``destroy`` while the
sandbox throttles a share of every service's calls. These ran in the suite (tests/backends/pcs/test_lifecycle_pcs.py's
``test_twenty_percent_throttling_still_completes``, about 86 s, and tests/verbs/lifecycle/test_throttle_visible.py's
``test_create_under_throttling_says_so``, about 120 s); the suite keeps one deterministic throttled create/destroy
(test_throttle_visible.py) and these long runs are measured here.

    .venv/bin/python bench/throttled_lifecycle.py [--cases 20,30] [--json]

Each case: ``throttle_rate {"*": RATE}`` with a fixed seed (20 %: seed 7, 30 %: seed 11, as the tests had), then
``fmcluster create quickstart-pcs --yes``, the exact set of PCS resources checked (one cluster, node groups
login/gpu/burst, one launch template each, one security group), ``destroy --yes`` under the same throttle, and
the leftover scan (``tests/fixtures/leftovers.py``) once the throttle is lifted.

Target: every case exits 0 on both commands, its create says it was throttled and retried ("throttled by AWS
(... retrying (attempt"), holds exactly one of each resource, and leaves nothing. Exits 1 otherwise. Reports each
command's wall time (a figure, no target: the back-off makes it long by design).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, Sandbox, fmcluster_exe, inventory_of, run  # noqa: E402

SEEDS = {20: 7, 30: 11}


def _exactly_one_of_each(sandbox: Sandbox, name: str) -> list[str]:
    inventory = inventory_of(sandbox.client, name)
    problems = []
    if len(inventory["pcs_clusters"]) != 1:
        problems.append(f"PCS clusters: {inventory['pcs_clusters']}")
    groups = Counter(inventory["pcs_node_groups"])
    if set(groups) != {"login", "gpu", "burst"} or any(n != 1 for n in groups.values()):
        problems.append(f"node groups: {dict(groups)}")
    templates = Counter(inventory["launch_templates"])
    if any(n != 1 for n in templates.values()) or not templates:
        problems.append(f"launch templates: {dict(templates)}")
    if len(inventory["security_groups"]) != 1:
        problems.append(f"security groups: {inventory['security_groups']}")
    return problems


def case(sandbox: Sandbox, workdir: Path, percent: int) -> dict:
    name = f"throttle-{percent}-{uuid.uuid4().hex[:6]}"
    spec = yaml.safe_load((REPO / "configs" / "quickstart-pcs.yaml").read_text())
    spec["name"] = name
    spec_file = workdir / f"{name}.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    env = sandbox.cli_env(workdir / f"{name}-home")
    sandbox.faults({"reset": True})
    sandbox.faults({"throttle_rate": {"*": percent / 100}, "seed": SEEDS.get(percent, percent)})
    result: dict = {"throttle_percent": percent, "problems": []}
    try:
        start = time.monotonic()
        created = run([*fmcluster_exe(), "create", str(spec_file), "--yes"], env)
        result["create_seconds"] = round(time.monotonic() - start, 1)
        if created.returncode != 0:
            result["problems"].append(f"create exited {created.returncode}: {created.stderr[-2000:]}")
        if "throttled by AWS (" not in created.stderr or "retrying (attempt" not in created.stderr:
            result["problems"].append("create never said it was throttled and retried")
        result["throttled_lines"] = created.stderr.count("throttled by AWS (")
        result["problems"] += _exactly_one_of_each(sandbox, name)
        start = time.monotonic()
        destroyed = run([*fmcluster_exe(), "destroy", name, "--yes"], env)
        result["destroy_seconds"] = round(time.monotonic() - start, 1)
        if destroyed.returncode != 0:
            result["problems"].append(f"destroy exited {destroyed.returncode}: {destroyed.stderr[-2000:]}")
    finally:
        sandbox.faults({"reset": True})
    left = {kind: items for kind, items in inventory_of(sandbox.client, name).items() if items}
    if left:
        result["problems"].append(f"left behind: {left}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="20,30", help="throttle percentages, comma-separated (default 20,30)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Sandbox(Path(tmp) / "sandbox").start()
        try:
            for percent in (int(p) for p in args.cases.split(",")):
                results.append(case(sandbox, Path(tmp), percent))
        finally:
            sandbox.stop()
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            print(f"{r['throttle_percent']:3d}% throttled: create {r.get('create_seconds')} s "
                  f"({r.get('throttled_lines', 0)} throttled retries shown), destroy {r.get('destroy_seconds')} s, "
                  + ("OK" if not r["problems"] else "FAILED: " + "; ".join(r["problems"])))
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
