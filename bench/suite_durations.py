"""Where the suite's time goes, per test file, from a JUnit report of a full run; and the order
``tests/fixtures/tiers.py`` hands files to the xdist workers (LONGEST_FIRST) that this run's durations give.

    .venv/bin/python -m pytest --junitxml=/tmp/suite.xml        # the full suite, as CI runs it
    .venv/bin/python bench/suite_durations.py /tmp/suite.xml [--top 25] [--json]

Prints each file's summed test time (setup + call + teardown, as JUnit records it), its share of the worker time,
how many of its tests failed or errored (a failed test's time says little about a passing one's: such files are
flagged), then a LONGEST_FIRST list to paste into tests/fixtures/tiers.py: the files that take longest, longest first.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def per_file(report: Path) -> dict[str, dict[str, float]]:
    files: dict[str, dict[str, float]] = defaultdict(lambda: {"seconds": 0.0, "tests": 0, "bad": 0})
    for case in ET.parse(report).iter("testcase"):
        classname = case.get("classname", "")
        name = classname.rsplit(".", 1)[-1] + ".py" if "." in classname else classname
        row = files[name]
        row["seconds"] += float(case.get("time", 0) or 0)
        row["tests"] += 1
        row["bad"] += any(child.tag in ("failure", "error") for child in case)
    return dict(files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="JUnit XML of a full pytest run")
    parser.add_argument("--top", type=int, default=25, help="how many files LONGEST_FIRST lists (default 25)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    files = per_file(args.report)
    total = sum(row["seconds"] for row in files.values()) or 1.0
    ranked = sorted(files.items(), key=lambda item: -item[1]["seconds"])
    if args.json:
        print(json.dumps({"total_seconds": round(total, 1), "files": {
            name: {**row, "seconds": round(row["seconds"], 1)} for name, row in ranked}}, indent=2))
        return 0
    print(f"{'seconds':>8} {'share':>6} {'tests':>5} {'failed':>6}  file   (worker time in all: {total:.0f} s)")
    for name, row in ranked[:args.top]:
        flag = "  <- failures: its time is not a passing run's" if row["bad"] else ""
        print(f"{row['seconds']:8.1f} {row['seconds'] / total:6.1%} {row['tests']:5d} {row['bad']:6d}  {name}{flag}")
    print("\nLONGEST_FIRST: list[str] = [")
    for name, _ in ranked[:args.top]:
        print(f'    "{name}",')
    print("]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
