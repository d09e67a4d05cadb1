"""CLI start-up: ``fmcluster --help`` and ``fmcluster plan`` against ``pcluster --help``, interleaved.

    python bench/startup.py [--rounds 10] [--json]

Every round runs the three commands once each, in turn, so machine load hits all of them alike; the
figures are medians and the ratio ``fmcluster --help / pcluster --help`` (target <= 0.25). It also checks,
in a fresh interpreter, that the ``--help`` path imports neither boto3/botocore nor pcluster, and lists
the costliest imports (``python -X importtime``) of that path. Exits 1 when the ratio misses the target or
the ``--help`` path loads boto3/botocore or pcluster.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGET = 0.25
HEAVY = ("boto3", "botocore", "pcluster", "moto", "pydantic", "yaml", "jinja2")

HELP_PROBE = """
import sys, json
sys.argv = ['fmcluster', '--help']
from fmcluster.cli.app import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write('\\n@@MODULES@@' + json.dumps(sorted(sys.modules)) + '\\n')
"""


def tool(name: str) -> str:
    path = BIN / name
    return str(path) if path.exists() else name


def commands() -> dict[str, list[str]]:
    return {
        "fmcluster --help": [tool("fmcluster"), "--help"],
        "fmcluster plan p5-odcr-parallelcluster": [tool("fmcluster"), "plan",
                                                   str(REPO / "configs" / "p5-odcr-parallelcluster.yaml")],
        "pcluster --help": [tool("pcluster"), "--help"],
    }


def env() -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "FMCLUSTER_HOME": os.environ.get(
        "FMCLUSTER_HOME", str(Path("/tmp") / "fmcluster-bench-startup"))}


def time_once(argv: list[str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {result.returncode}:\n{result.stderr}")
    return elapsed


def help_imports() -> dict:
    """Which heavy top-level packages the ``--help`` path imports, and its costliest imports."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", HELP_PROBE], env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    marker = result.stderr.rfind("@@MODULES@@")
    modules = json.loads(result.stderr[marker + len("@@MODULES@@"):].splitlines()[0]) if marker >= 0 else []
    tops = sorted({m.split(".")[0] for m in modules})
    heavy = [name for name in HEAVY if name in tops]
    # importtime lines: "import time: self [us] | cumulative | imported package"
    rows = []
    for line in result.stderr[:marker].splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            self_us, cumulative, indent, name = match.groups()
            rows.append((int(cumulative), int(self_us), len(indent) // 2, name))
    top_level = sorted((r for r in rows if r[2] == 0), reverse=True)[:8]
    return {
        "imports_boto3": "boto3" in tops or "botocore" in tops,
        "imports_pcluster": "pcluster" in tops,
        "heavy_packages_imported": heavy,
        "modules_loaded": len(modules),
        "costliest_top_level_imports_ms": {name: round(cum / 1000, 1) for cum, _, _, name in top_level},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    cmds = commands()
    for argv in cmds.values():  # warm the page cache and .pyc files; not measured
        time_once(argv)
    samples: dict[str, list[float]] = {label: [] for label in cmds}
    for _ in range(args.rounds):
        for label, argv in cmds.items():
            samples[label].append(time_once(argv))
    medians = {label: statistics.median(values) for label, values in samples.items()}
    ratio = medians["fmcluster --help"] / medians["pcluster --help"]
    plan_ratio = medians["fmcluster plan p5-odcr-parallelcluster"] / medians["pcluster --help"]
    imports = help_imports()
    report = {
        "rounds": args.rounds,
        "median_s": {label: round(value, 3) for label, value in medians.items()},
        "min_s": {label: round(min(values), 3) for label, values in samples.items()},
        "ratio_help_vs_pcluster_help": round(ratio, 3),
        "ratio_plan_vs_pcluster_help": round(plan_ratio, 3),
        "target": TARGET,
        "meets_target": ratio <= TARGET,
        **imports,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.rounds} interleaved rounds, medians:")
        for label, value in medians.items():
            print(f"  {label:<42} {value * 1000:7.0f} ms")
        print(f"ratio fmcluster --help / pcluster --help = {ratio:.3f} (target <= {TARGET}) "
              f"{'OK' if ratio <= TARGET else 'MISSED'}")
        print(f"ratio fmcluster plan / pcluster --help   = {plan_ratio:.3f}")
        print(f"--help imports boto3/botocore: {imports['imports_boto3']}, pcluster: {imports['imports_pcluster']}"
              f"; heavy packages loaded: {imports['heavy_packages_imported'] or 'none'}")
        print("costliest top-level imports on the --help path (cumulative ms):")
        for name, ms in imports["costliest_top_level_imports_ms"].items():
            print(f"  {name:<40} {ms:7.1f}")
    bad = imports["imports_boto3"] or imports["imports_pcluster"] or ratio > TARGET
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
