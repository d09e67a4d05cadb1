"""Bad input and state-file faults through the installed command: every case must end with a clear exit.

    python bench/robustness.py [--json] [--workers 2] [--only GROUP] [--fmcluster PATH]

The corpus is the project's own, taken from the tests so there is one list to keep: bad specs
(tests/spec/test_spec_errors.py CASES, UNREADABLE), hostile files (tests/cli/test_hostile_files.py HOSTILE),
state-file faults (tests/state/test_state_file.py FAULTS x COMMANDS, degraded records, scale refusals), plus the
bad flags, unknown names, bad output paths and permission faults listed here. Each case runs the installed
``fmcluster`` in a fresh temp dir, with no AWS (an unreachable endpoint where a command could reach for one),
as an ordinary user where file modes matter (root runs it without CAP_DAC_OVERRIDE, see tests/fixtures/unprivileged.py).

A case is a **clear exit** when the command exits with the code the contract gives (2 bad input, 1 state or
not-found, 0 for the reads that must keep working), prints its message on stderr and no traceback. A
**hang** is a case still running after ``--hang-after`` seconds (then killed). Prints
``{"cases", "clear_exit", "tracebacks", "hangs"}`` (and, with --json, every case that was not clear, and the
slowest cases' wall times); exit 1 unless every case is a clear exit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import test_hostile_files as hostile  # noqa: E402
import test_spec_errors as spec_errors  # noqa: E402
import test_state_file as state_file  # noqa: E402
from unprivileged import demote  # noqa: E402

FMCLUSTER = str(Path(sys.executable).with_name("fmcluster"))
NOWHERE = "http://127.0.0.1:9"
QUICKSTART = REPO / "configs" / "quickstart-pcs.yaml"
LUSTRE_SPEC = REPO / "configs" / "p5-odcr-parallelcluster.yaml"


@dataclass
class Invocation:
    args: list[str]
    expect: int
    as_user: bool = False
    cleanup: Callable[[], None] | None = None
    env: dict[str, str] = field(default_factory=dict)  # on top of env_for(tmp)


@dataclass
class Case:
    group: str
    name: str
    build: Callable[[Path], Invocation]


@dataclass
class Outcome:
    case: Case
    code: int | None
    seconds: float
    stderr: str = ""
    expect: int = 0
    verdict: str = "clear_exit"
    notes: list[str] = field(default_factory=list)


def env_for(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_EC2_METADATA_DISABLED": "true", "NO_COLOR": "1", "COLUMNS": "200",
                "FMCLUSTER_HOME": str(tmp / "state"), "HOME": str(tmp)})
    return env


def write(tmp: Path, name: str, content: str | bytes) -> Path:
    path = tmp / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


# --- the corpus ------------------------------------------------------------------------------------------

def spec_cases() -> list[Case]:
    cases = []
    for case_id, text, *_ in spec_errors.CASES:
        for command in ("render", "validate", "plan"):
            cases.append(Case("bad-spec", f"{case_id} {command}",
                              lambda tmp, text=text, command=command:
                              Invocation([command, str(write(tmp, "spec.yaml", text))], 2)))
    for case_id, content, *_ in spec_errors.UNREADABLE:
        def build(tmp: Path, content: bytes | None = content) -> Invocation:
            path = tmp / "spec.yaml"
            if content is not None:
                path.write_bytes(content)
            return Invocation(["render", str(path)], 2)
        cases.append(Case("bad-spec", f"{case_id} render", build))
    return cases


def hostile_cases() -> list[Case]:
    cases = []
    for case_id, (make, *_rest) in sorted(hostile.HOSTILE.items()):
        for command in ("render", "plan", "validate", "create"):
            extra = ["--yes"] if command == "create" else []
            prefix = ["--endpoint-url", NOWHERE] if command == "create" else []
            cases.append(Case("hostile-file", f"{case_id} {command}",
                              lambda tmp, make=make, command=command, extra=extra, prefix=prefix:
                              Invocation([*prefix, command, str(make(tmp)), *extra], 2)))
    return cases


def _seeded(tmp: Path) -> Path:
    return state_file.seeded_home(tmp)


FLAGS: list[tuple[str, list[str], int]] = [
    ("unknown-flag", ["render", "--bogus", str(QUICKSTART)], 2),
    ("missing-argument", ["render"], 2),
    ("extra-argument", ["validate", "a.yaml", "b.yaml"], 2),
    ("unknown-command", ["no-such-command"], 2),
    ("bad-bool", ["plan", "--json=maybe", str(QUICKSTART)], 2),
    ("timeout-zero", ["create", str(QUICKSTART), "--timeout", "0", "--yes"], 2),
    ("timeout-word", ["create", str(QUICKSTART), "--timeout", "soon", "--yes"], 2),
    ("retry-capacity-negative", ["create", str(QUICKSTART), "--retry-capacity", "-1", "--yes"], 2),
    ("endpoint-not-http", ["--endpoint-url", "ftp://example.com", "status"], 2),
    ("region-unknown", ["--region", "moon-1", "plan", str(QUICKSTART)], 2),
    ("region-typo", ["--region", "us-esat-1", "status"], 2),
    ("region-uppercase", ["--region", "US-EAST-1", "render", str(QUICKSTART)], 2),
]


def flag_cases() -> list[Case]:
    cases = [Case("bad-flag", name, lambda tmp, args=args, code=code: Invocation(args, code))
             for name, args, code in FLAGS]
    for command in (["status"], ["preflight", str(QUICKSTART)], ["create", str(QUICKSTART), "--yes"]):
        cases.append(Case("bad-flag", f"ca-bundle-missing {command[0]}",
                          lambda tmp, command=command: Invocation(
                              ["--endpoint-url", NOWHERE, *command], 2,
                              env={"AWS_CA_BUNDLE": str(tmp / "gone" / "ca.pem")})))
    # Issue 20: an ASCII locale (PYTHONIOENCODING empty counts as unset) must not crash rich's marks
    for name, args, code in (("ascii-locale plan", ["plan", str(QUICKSTART)], 0),
                             ("ascii-locale unknown cluster", ["status", "no-such-cluster"], 1)):
        cases.append(Case("bad-flag", name, lambda tmp, args=args, code=code: Invocation(
            args, code, env={"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""})))
    return cases


NAMES: list[tuple[str, list[str], int]] = [
    ("status-unknown", ["status", "nope"], 1),
    ("destroy-unknown", ["destroy", "nope", "--yes"], 1),
    ("scale-unknown-cluster", ["scale", "nope", "gpu=1", "--yes"], 1),
    ("scale-unknown-queue", ["scale", "demo-pcs", "nosuch=1", "--yes"], 2),
    ("scale-no-count", ["scale", "demo-pcs", "gpu=", "--yes"], 2),
    ("scale-word-count", ["scale", "demo-pcs", "gpu=lots", "--yes"], 2),
    ("scale-no-queue-name", ["scale", "demo-pcs", "=3", "--yes"], 2),
    ("scale-nothing", ["scale", "demo-pcs"], 2),
    ("scale-min-above-max", ["scale", "demo-pcs", "burst=3:1", "--yes"], 2),
]


def name_cases() -> list[Case]:
    def build(tmp: Path, args: list[str], code: int) -> Invocation:
        _seeded(tmp)
        return Invocation(args, code)

    cases = [Case("unknown-name", name, lambda tmp, args=args, code=code: build(tmp, args, code))
             for name, args, code in NAMES]
    for case_id, counts, _fragment in state_file.SCALE_REFUSALS:
        cases.append(Case("scale-refused", case_id,
                          lambda tmp, counts=counts: build(tmp, ["scale", *counts, "--yes"], 2)))
    return cases


def output_cases() -> list[Case]:
    def existing_file(tmp: Path) -> Invocation:
        return Invocation(["render", str(QUICKSTART), "-o", str(write(tmp, "rendered", "keep\n"))], 2)

    def under_a_file(tmp: Path) -> Invocation:
        write(tmp, "file", "x")
        return Invocation(["render", str(QUICKSTART), "-o", str(tmp / "file" / "out")], 2)

    def document_is_a_directory(tmp: Path) -> Invocation:
        (tmp / "out" / "security-group.yaml").mkdir(parents=True)
        return Invocation(["render", str(QUICKSTART), "-o", str(tmp / "out")], 2)

    def unwritable(tmp: Path) -> Invocation:
        (tmp / "locked").mkdir(mode=0o500)
        return Invocation(["render", str(QUICKSTART), "-o", str(tmp / "locked")], 2, as_user=True)

    def svg_missing_dir(tmp: Path) -> Invocation:
        return Invocation(["plan", str(LUSTRE_SPEC), "--svg", str(tmp / "no" / "such" / "chart.svg")], 1)

    def svg_onto_dir(tmp: Path) -> Invocation:
        return Invocation(["plan", str(LUSTRE_SPEC), "--svg", str(tmp)], 1)

    def svg_onto_symlink(tmp: Path) -> Invocation:
        (tmp / "chart.svg").symlink_to(write(tmp, "precious", "keep\n"))
        return Invocation(["plan", str(LUSTRE_SPEC), "--svg", str(tmp / "chart.svg")], 2)

    return [Case("bad-output", f.__name__.replace("_", "-"), f) for f in (
        existing_file, under_a_file, document_is_a_directory, unwritable, svg_missing_dir, svg_onto_dir,
        svg_onto_symlink)] + [
        Case("bad-output", "render-onto-dev-null",
             lambda tmp: Invocation(["render", str(QUICKSTART), "-o", "/dev/null"], 2))]


def state_cases() -> list[Case]:
    cases = []
    for fault, (damage, _fragment) in sorted(state_file.FAULTS.items()):
        for command, args in sorted(state_file.COMMANDS.items()):
            def build(tmp: Path, damage=damage, args=args) -> Invocation:
                db = _seeded(tmp) / "state.db"
                damage(db)
                for sidecar in tmp.glob("state/state.db-*"):
                    sidecar.unlink()
                return Invocation(["--endpoint-url", NOWHERE, *args], 1)
            cases.append(Case("state-fault", f"{fault} {command}", build))

    def chmod_db(mode: int, args: list[str], code: int) -> Callable[[Path], Invocation]:
        def build(tmp: Path) -> Invocation:
            os.chmod(_seeded(tmp) / "state.db", mode)
            return Invocation(["--endpoint-url", NOWHERE, *args], code, as_user=True)
        return build

    def chmod_dir(args: list[str], code: int) -> Callable[[Path], Invocation]:
        def build(tmp: Path) -> Invocation:
            home = _seeded(tmp)
            for sidecar in home.glob("state.db-*"):
                sidecar.unlink()
            os.chmod(home, 0o500)
            return Invocation(["--endpoint-url", NOWHERE, *args], code, as_user=True,
                              cleanup=lambda: os.chmod(home, 0o700))
        return build

    def home_is_a_file(args: list[str]) -> Callable[[Path], Invocation]:
        def build(tmp: Path) -> Invocation:
            write(tmp, "state", "not a directory\n")
            return Invocation(["--endpoint-url", NOWHERE, *args], 1)
        return build

    for command in ("status", "status-json", "status-name", "scale", "destroy", "create"):
        args = list(state_file.COMMANDS[command])
        reads = command in ("status", "status-json")
        cases.append(Case("state-permission", f"unreadable-file {command}", chmod_db(0o000, args, 1)))
        cases.append(Case("state-permission", f"home-is-a-file {command}", home_is_a_file(args)))
        if command == "status-name":
            # it reads the state, then asks AWS: tests/verbs/lifecycle/test_state_lifecycle.py runs it with a sandbox
            continue
        cases.append(Case("state-permission", f"read-only-file {command}", chmod_db(0o400, args, 0 if reads else 1)))
        cases.append(Case("state-permission", f"read-only-dir {command}", chmod_dir(args, 0 if reads else 1)))

    for case_id, (text, _reason) in sorted(state_file.DEGRADED.items()):
        for args in (["status"], ["status", "--json"], ["status", "broken", "--json"]):
            def build(tmp: Path, text=text, args=args) -> Invocation:
                home = _seeded(tmp)
                state_file._write_raw_record(home, "broken", text)
                return Invocation(["--endpoint-url", NOWHERE, *args], 0)
            cases.append(Case("degraded-record", f"{case_id} {' '.join(args)}", build))
    return cases


GROUPS = {"bad-spec": spec_cases, "hostile-file": hostile_cases, "bad-flag": flag_cases, "names": name_cases,
          "bad-output": output_cases, "state": state_cases}


# --- running ------------------------------------------------------------------------------------------------

def run_case(case: Case, hang_after: float, executable: str) -> Outcome:
    tmp = Path(tempfile.mkdtemp(prefix="fmcluster-robust-"))
    invocation = None
    try:
        invocation = case.build(tmp)
        started = time.monotonic()
        try:
            result = subprocess.run([executable, *invocation.args], capture_output=True, text=True,
                                    env={**env_for(tmp), **invocation.env},
                                    cwd=tmp, timeout=hang_after, stdin=subprocess.DEVNULL,
                                    preexec_fn=demote() if invocation.as_user else None)
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return Outcome(case, None, time.monotonic() - started, stderr, invocation.expect, "hang")
        outcome = Outcome(case, result.returncode, time.monotonic() - started, result.stderr, invocation.expect)
    finally:
        if invocation is not None and invocation.cleanup:
            invocation.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    if "Traceback (most recent call last)" in outcome.stderr:
        outcome.verdict = "traceback"
    elif outcome.code != outcome.expect:
        outcome.verdict = "wrong_exit"
        outcome.notes.append(f"exit {outcome.code}, expected {outcome.expect}")
    elif outcome.expect != 0 and not outcome.stderr.strip():
        outcome.verdict = "silent"
        outcome.notes.append("non-zero exit without a message")
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the tally and the details as JSON")
    parser.add_argument("--workers", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument("--hang-after", type=float, default=30.0, metavar="S",
                        help="a case still running after S seconds is a hang (default 30)")
    parser.add_argument("--only", choices=sorted(GROUPS), action="append", help="run only these groups")
    parser.add_argument("--fmcluster", default=FMCLUSTER, metavar="PATH",
                        help="the command to test (default: the one installed next to this Python), e.g. another "
                             "version's, to compare")
    options = parser.parse_args()

    cases = [case for group in (options.only or GROUPS) for case in GROUPS[group]()]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=options.workers) as pool:
        outcomes = list(pool.map(lambda case: run_case(case, options.hang_after, options.fmcluster), cases))
    verdicts = Counter(o.verdict for o in outcomes)
    tally = {"cases": len(outcomes), "clear_exit": verdicts["clear_exit"], "tracebacks": verdicts["traceback"],
             "hangs": verdicts["hang"]}
    unclear = [{"group": o.case.group, "case": o.case.name, "verdict": o.verdict, "exit": o.code,
                "expected": o.expect, "notes": o.notes, "stderr_tail": o.stderr.strip().splitlines()[-3:]}
               for o in outcomes if o.verdict != "clear_exit"]
    by_group = {group: dict(Counter(o.verdict for o in outcomes if o.case.group == group))
                for group in sorted({o.case.group for o in outcomes})}
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:5]
    details = {"by_group": by_group, "unclear": unclear, "wall_s": round(time.monotonic() - started, 1),
               "slowest_s": [{"case": f"{o.case.group}: {o.case.name}", "seconds": round(o.seconds, 2)}
                             for o in slowest],
               "issue16_cases_s": {o.case.name: round(o.seconds, 2) for o in outcomes
                                   if o.case.name in ISSUE16_CASES}}
    if options.json:
        print(json.dumps({**tally, **details}, indent=2))
    else:
        print(json.dumps(tally))
        for group, counts in by_group.items():
            print(f"  {group:<18} " + ", ".join(f"{verdict} {n}" for verdict, n in sorted(counts.items())))
        for item in unclear:
            print(f"  NOT CLEAR {item['group']}: {item['case']}: {item['verdict']} {' '.join(item['notes'])}")
        print("  slowest: " + ", ".join(f"{s['case']} {s['seconds']} s" for s in details["slowest_s"]))
        print("  issue 16's five: " + ", ".join(f"{name} {seconds} s"
                                                for name, seconds in sorted(details["issue16_cases_s"].items())))
        print(f"  {len(outcomes)} cases in {details['wall_s']} s with {options.workers} workers")
    return 0 if tally["clear_exit"] == tally["cases"] else 1


# The five cases issue 16 asks to exit 2 within 5 s (their wall time is reported, not asserted).
ISSUE16_CASES = {"alias-bomb render", "recursive-alias render", "fifo render", "dev-zero render", "existing-file"}

if __name__ == "__main__":
    sys.exit(main())
