"""The spec's ``budget`` section: what loads, what is refused with its position (exit 2), and what ``plan`` shows
of it (text and JSON), with the guard's moment worked by hand."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from fmcluster.cost_report.command import run_plan
from fmcluster.cost_report.figures import plan_report
from fmcluster.errors import SpecError
from fmcluster.pricing.rates import PriceBook
from fmcluster.spec import load_spec

UTC = dt.timezone.utc


def write(tmp_path: Path, budget: object, backend: str = "pcs", raw: str | None = None) -> Path:
    doc = {"name": "guard-test", "region": "us-east-1", "backend": backend,
           "network": {"subnet_id": "subnet-0123456789abcdef0"},
           "queues": [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2}]}
    text = yaml.safe_dump(doc, sort_keys=False)
    text += raw if raw is not None else yaml.safe_dump({"budget": budget}, sort_keys=False)
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    return [str(p) for p in raised.value.problems]


@pytest.mark.parametrize("expires", ["72h", "90m", "3d", "1.5h", "2026-12-09T18:00:00Z", "2026-12-09T18:00:00+01:00"])
def test_durations_and_times_with_a_zone_load(tmp_path: Path, expires: str) -> None:
    spec = load_spec(write(tmp_path, {"expires": expires})).spec
    assert spec.budget is not None and spec.budget.on_limit == "stop"


def test_an_unquoted_yaml_time_loads_as_written(tmp_path: Path) -> None:
    path = write(tmp_path, None, raw="budget:\n  expires: 2026-12-09T18:00:00Z\n")
    spec = load_spec(path).spec
    assert spec.budget is not None and spec.budget.expires == "2026-12-09T18:00:00+00:00"


@pytest.mark.parametrize("raw,position,words", [
    ("budget:\n  expires: 72x\n", ":11:12: budget.expires", "neither a duration"),
    ("budget:\n  expires: 0h\n", ":11:12: budget.expires", "longer than zero"),
    ("budget:\n  expires: 2026-12-09T18:00:00\n", ":11:12: budget.expires", "has no zone"),
    ("budget:\n  expires: 2026-12-09\n", ":11:12: budget.expires", "a date alone"),
    ("budget:\n  max_usd: 0\n", ":11:12: budget.max_usd", "greater than 0"),
    ("budget:\n  on_limit: stop\n", ":11:3: budget", "needs max_usd, expires or both"),
    ("budget:\n  max_usd: 10\n  notify: ops@example\n", ":12:11: budget.notify", "an email address"),
    ("budget:\n  max_usd: 10\n  on_limit: halt\n", ":12:13: budget.on_limit", "'stop' or 'destroy-compute'"),
])
def test_a_bad_budget_is_refused_at_its_position(tmp_path: Path, raw: str, position: str, words: str) -> None:
    found = problems(write(tmp_path, None, raw=raw))
    assert len(found) == 1 and position in found[0] and words in found[0], found


def test_destroy_compute_is_refused_on_parallelcluster_with_the_reason(tmp_path: Path) -> None:
    budget = {"max_usd": 10, "on_limit": "destroy-compute"}
    found = problems(write(tmp_path, budget, backend="parallelcluster"))
    assert len(found) == 1 and "budget.on_limit" in found[0] and "parallelcluster" in found[0]
    assert "ParallelCluster's stack" in found[0]
    for backend in ("pcs", "eks"):
        assert load_spec(write(tmp_path, budget, backend=backend)).spec.budget is not None


def test_plan_json_shows_when_the_guard_fires(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, {"max_usd": 1000, "expires": "72h", "notify": "ops@example.com"})).spec
    now = dt.datetime(2026, 12, 7, 0, 0, 0, tzinfo=UTC)
    budget = plan_report(spec, PriceBook(spec.region), now).to_dict()["budget"]
    # PCS's login node (m7i.2xlarge) and controller have no bundled price: the maximum is 2 × $55.04 = $110.08/h
    # (the catalog's On-Demand p5.48xlarge); $1000 / $110.08/h = 32,703.49 s → 09:05:03, before 72 h.
    assert budget["usd_per_hour_max"] == pytest.approx(110.08)
    assert budget["fires_at"] == "2026-12-07T09:05:03Z" and budget["decided_by"] == "max_usd"
    assert budget["expires_at"] == "2026-12-10T00:00:00Z"
    assert budget["notify"] == ["ops@example.com"] and budget["on_limit"] == "stop"
    # 9 h 5 min 3 s is over four hours: the warning goes to notify an hour before
    assert budget["warns_at"] == "2026-12-07T08:05:03Z"


def plan(path: Path, as_json: bool = False) -> tuple[int, str, str]:
    out = Console(width=200, record=True, force_terminal=False, color_system=None)
    err = Console(width=200, record=True, stderr=True, force_terminal=False, color_system=None)
    code = run_plan(str(path), as_json, None, False, out, err)
    return code, out.export_text(), err.export_text()


def test_plan_text_says_when_and_why(tmp_path: Path) -> None:
    code, out, _ = plan(write(tmp_path, {"expires": "90m", "on_limit": "destroy-compute"}))
    assert code == 0
    assert "Budget guard: fires" in out and "on expires" in out and "expires 90m after creation" in out
    assert "node group deleted" in out
    assert "no warning will be sent before it fires: add budget.notify" in " ".join(out.split())
    code, out, _ = plan(write(tmp_path, {"expires": "90m", "notify": "ops@example.com"}))
    # a 90 min lease is warned a quarter of it, 22 min 30 s, before: said with the address
    text = " ".join(out.split())
    fires = dt.datetime.fromisoformat(text.split("Budget guard: fires ", 1)[1].split(" ", 1)[0][:-1])
    warns = dt.datetime.fromisoformat(text.split("warns ops@example.com at ", 1)[1].split(" ", 1)[0][:-1])
    assert fires - warns == dt.timedelta(minutes=22, seconds=30) and "no warning" not in text, text
    code, out, _ = plan(write(tmp_path, {"expires": "90m"}), as_json=True)
    assert json.loads(out)["budget"]["decided_by"] == "expires"


def test_plan_refuses_a_lease_already_over(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as raised:
        plan(write(tmp_path, {"expires": "2020-01-01T00:00:00Z"}))
    assert raised.value.exit_code == 2
    assert "budget.expires" in str(raised.value) and "not after now" in str(raised.value)
