"""How long the read commands take to answer when AWS cannot be reached, through the installed command.

    .venv/bin/python bench/unreachable.py [--runs 3] [--target 5] [--json]

Each case runs ``fmcluster --endpoint-url URL ...`` in a fresh FMCLUSTER_HOME holding one PCS and one
ParallelCluster record (as ``create`` leaves them), with nothing listening at URL:

- ``status NAME`` (both backends), ``status NAME --json``: exit 1 and one line naming the endpoint;
- ``status`` (every cluster): exit 0, the recorded clusters listed and one line saying AWS's were not.

Target: each answers within ``--target`` seconds (default 5). The endpoint is a closed port on 127.0.0.1, refused
at once (a stopped sandbox, a wrong port). An endpoint that drops packets instead (a dead VPN) waits out the
READING patience's connect timeouts (fmcluster/connection/aws.py); this machine has no route that drops silently, so
that case is not measured here.

Prints the median wall time per case; exits 1 when a targeted case misses the target, exits with the wrong
code, prints a traceback or more than one line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fmcluster.spec.stored import record_cluster  # noqa: E402
from fmcluster.state.store import StateStore  # noqa: E402

CLOSED = "http://127.0.0.1:9"
SPECS = {"demo-pcs": "quickstart-pcs.yaml", "demo-pc": "quickstart-parallelcluster.yaml"}


def _home(directory: Path) -> Path:
    home = directory / "home"
    home.mkdir()
    store = StateStore(home / "state.db")
    for name, example in SPECS.items():
        data = yaml.safe_load((ROOT / "configs" / example).read_text())
        data["name"] = name
        record_cluster(store, name, "us-east-1", data["backend"], yaml.safe_dump(data), None, "ACTIVE")
    store.close()
    return home


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true", "NO_COLOR": "1", "FMCLUSTER_HOME": str(home)})
    return env


def _run(fmcluster: str, home: Path, endpoint: str, args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    result = subprocess.run([fmcluster, "--endpoint-url", endpoint, *args], capture_output=True, text=True,
                            env=_env(home), cwd=home.parent, timeout=300, stdin=subprocess.DEVNULL)
    return time.monotonic() - started, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--target", type=float, default=5.0, help="seconds each closed-port case may take")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fmcluster", default=str(Path(sys.executable).parent / "fmcluster"))
    options = parser.parse_args()

    # (label, arguments, the exit the command contract gives)
    cases = [("status NAME (pcs)", ["status", "demo-pcs"], 1),
             ("status NAME (parallelcluster)", ["status", "demo-pc"], 1),
             ("status NAME --json", ["status", "demo-pcs", "--json"], 1),
             ("status (every cluster)", ["status"], 0)]
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as directory:
        home = _home(Path(directory))
        for label, args, code in cases:
            times = []
            for _ in range(options.runs):
                seconds, result = _run(options.fmcluster, home, CLOSED, args)
                times.append(seconds)
                lines = result.stderr.strip().splitlines()
                if "Traceback" in result.stderr or result.returncode != code or len(lines) != 1:
                    failures.append(f"{label}: exit {result.returncode} (wanted {code}), stderr "
                                    f"{result.stderr.strip()!r}")
            median = statistics.median(times)
            if median > options.target:
                failures.append(f"{label}: {median:.2f} s, target {options.target:g} s")
            rows.append({"case": label, "exit": code, "median_s": round(median, 2), "max_s": round(max(times), 2),
                         "message": lines[0] if lines else ""})
    if options.json:
        print(json.dumps({"runs": options.runs, "target_s": options.target, "cases": rows, "failures": failures},
                         indent=2))
    else:
        print(f"{options.runs} runs each against {CLOSED}, target {options.target:g} s")
        for row in rows:
            print(f"{row['case']:<32} exit {row['exit']}  {row['median_s']:6.2f} s median, {row['max_s']:.2f} s max"
                  f"  {row['message']}")
        for failure in failures:
            print(f"MISSED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
