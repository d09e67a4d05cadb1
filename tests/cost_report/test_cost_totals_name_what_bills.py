"""Every cost total names what bills (issue 35, part 3): a Capacity Block queue at the block's rate (or unpriced,
never On-Demand), the EKS control plane's fee, the PCS controller, FSx, EFS, NAT and the system nodes — in ``plan``
(table and --json), ``status`` (one cluster and the list) and the "still billing" line. A part with no bundled price
is said, never dropped.

Expected figures are typed from AWS's pricing pages, each named where it is used; none is read from fmcluster.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.pricing.model import live_cost, spec_cost
from fmcluster.spec.loader import load_spec_data
from fmcluster.verbs.lifecycle.overall_state import billing_line

FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")

# Amazon EC2 Capacity Blocks for ML pricing (aws.amazon.com/ec2/capacityblocks/pricing): p5.48xlarge, US East
# (N. Virginia), "Effective Instance Hourly Rate" $39.33 USD.
P5_48XL_BLOCK = 39.33
# The same type's On-Demand rate (AWS EC2 On-Demand pricing, US East (N. Virginia), Linux): what a block must not be
# priced at.
P5_48XL_ON_DEMAND = 55.04
# Amazon EKS pricing (aws.amazon.com/eks/pricing; AWS Containers blog "Amazon EKS extended support for Kubernetes
# versions pricing"): $0.10 per cluster per hour on standard support, $0.60 on extended support.
EKS_STANDARD, EKS_EXTENDED = 0.10, 0.60
# Amazon VPC pricing: NAT gateway $0.045 per hour; public IPv4 address $0.005 per hour.
NAT_AND_IPV4 = 0.045 + 0.005
# m7i.xlarge On-Demand, us-east-1 (the system node group's default type): $0.2016 per hour.
M7I_XLARGE = 0.2016

BLOCK = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
LUSTRE = {"capacity_gib": 2400, "throughput_per_tib": 125}


def _spec(backend: str = "eks", instance_type: str = "p5.48xlarge", **changes):
    data = {"name": "costs", "backend": backend, "region": "us-east-1",
            "queues": [{"name": "train", "instance_type": instance_type, "nodes": 2, "capacity": BLOCK}],
            "storage": {"lustre": LUSTRE}, **changes}
    return load_spec_data(data, "test spec").spec


def _part(cost, name: str):
    return next(part for part in cost.parts if part.name.startswith(name))


# --- plan: the one cost model ----------------------------------------------------------------------------------

def test_a_capacity_block_queue_is_priced_at_the_block_rate_and_every_part_is_named():
    cost = spec_cost(_spec())
    queue = cost.queues[0]
    assert (queue.price.basis, queue.usd_per_hour) == ("capacity-block", pytest.approx(2 * P5_48XL_BLOCK))
    assert queue.usd_per_hour != pytest.approx(2 * P5_48XL_ON_DEMAND)
    assert "aws.amazon.com/ec2/capacityblocks/pricing" in queue.price.note
    # EKS: two m7i.xlarge system nodes, the control plane on standard support, the created network's NAT gateway
    assert _part(cost, "system nodes").usd_per_hour == pytest.approx(2 * M7I_XLARGE)
    assert _part(cost, "EKS control plane").usd_per_hour == EKS_STANDARD
    assert _part(cost, "NAT gateway").usd_per_hour == pytest.approx(NAT_AND_IPV4)
    assert cost.usd_per_hour == pytest.approx(2 * P5_48XL_BLOCK + 2 * M7I_XLARGE + EKS_STANDARD + NAT_AND_IPV4)
    # FSx for Lustre has no bundled rate: named, with its size and the page to read, and out of the total
    lustre = _part(cost, "FSx for Lustre")
    assert lustre.usd_per_hour is None and "FSx for Lustre" in cost.unknown
    assert "2,400 GiB" in lustre.note and "aws.amazon.com/fsx/lustre/pricing" in lustre.note


def test_an_extended_support_version_pays_the_extended_control_plane_fee():
    cost = spec_cost(_spec(kubernetes={"version": "1.33"}))  # 1.33: extended support (EKS User Guide)
    assert _part(cost, "EKS control plane").usd_per_hour == EKS_EXTENDED


def test_a_block_type_without_a_bundled_block_rate_is_unpriced_not_on_demand():
    cost = spec_cost(_spec(instance_type="p5en.48xlarge"))
    assert cost.queues[0].usd_per_hour is None
    assert "queue train (p5en.48xlarge)" in cost.unknown


def test_pcs_names_its_controller_and_efs_with_their_pages():
    cost = spec_cost(_spec(backend="pcs", storage={"lustre": LUSTRE, "home": {"type": "efs"}}))
    controller = _part(cost, "PCS controller")
    assert controller.usd_per_hour is None and "aws.amazon.com/pcs/pricing" in controller.note
    efs = _part(cost, "EFS /home")
    # Amazon EFS pricing (aws.amazon.com/efs/pricing): Standard storage $0.30/GB-month, billed on data stored.
    assert efs.usd_per_hour is None and "$0.30 per GB-month" in efs.note
    assert {"PCS controller (SMALL)", "FSx for Lustre", "EFS /home"} <= set(cost.unknown)


def test_existing_file_systems_are_no_part_of_the_clusters_cost():
    cost = spec_cost(_spec(storage={"lustre": {"existing_id": "fs-0123456789abcdef0"}}))
    assert not any(part.name.startswith("FSx") for part in cost.parts) and "FSx for Lustre" not in cost.unknown


# --- plan: the command, table and --json -----------------------------------------------------------------------

def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "250",
                "FMCLUSTER_HOME": str(tmp_path / "state")})
    return env


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FMCLUSTER, *args], capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path,
                          timeout=180)


SPEC_TEXT = """name: costs
backend: eks
region: us-east-1
queues:
  - name: train
    instance_type: p5.48xlarge
    nodes: 2
    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}
storage:
  lustre: {capacity_gib: 2400, throughput_per_tib: 125}
"""


def test_plan_table_and_json_price_the_block_and_name_fsx(tmp_path: Path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_TEXT)
    text = _run(tmp_path, "plan", str(spec))
    assert text.returncode == 0, text.stderr
    cost_table = text.stdout[text.stdout.index("Cost"):]
    assert "$78.66" in cost_table  # compute: 2 × $39.33
    assert "FSx for Lustre" in cost_table and "not in the total (no bundled price): FSx for Lustre" in cost_table
    assert "EKS control plane" in cost_table and "system nodes (2 × m7i.xlarge)" in cost_table
    payload = json.loads(_run(tmp_path, "plan", str(spec), "--json").stdout)
    assert payload["queues"][0]["usd_per_hour"] == pytest.approx(2 * P5_48XL_BLOCK)
    assert payload["usd_per_hour"] == pytest.approx(2 * P5_48XL_BLOCK + 2 * M7I_XLARGE + EKS_STANDARD + NAT_AND_IPV4)
    parts = {part["name"]: part for part in payload["cost"]["parts"]}
    assert parts["FSx for Lustre"]["usd_per_hour"] is None and "FSx for Lustre" in payload["cost"]["unknown"]
    assert parts["EKS control plane"]["usd_per_hour"] == EKS_STANDARD


# --- status: one cluster, the still-billing line, the list --------------------------------------------------------

NOW = dt.datetime(2026, 12, 6, 12, tzinfo=dt.timezone.utc)


def test_status_names_the_unpriced_file_system_and_controller_that_bill_now():
    spec = _spec(backend="pcs")
    report = {"region": "us-east-1", "backend": "pcs", "instances": [], "resources": [
        {"type": "cluster", "id": "pcs_0123456789", "status": "ACTIVE"},
        {"type": "fsx_lustre", "id": "fs-0123456789abcdef0", "status": "AVAILABLE"},
        {"type": "nat_gateway", "id": "nat-1", "status": "available",
         "created": (NOW - dt.timedelta(hours=2)).isoformat()}]}
    live = live_cost(report, spec, NOW)
    assert live["cost_unpriced_now"] == ["FSx for Lustre fs-0123456789abcdef0", "PCS controller (SMALL)"]
    assert live["usd_per_hour_now"] == pytest.approx(NAT_AND_IPV4)
    assert "FSx for Lustre fs-0123456789abcdef0" in live["cost_basis"]
    line = billing_line(report | live)
    assert line is not None and line.startswith(
        "still billing: $0.0500/hour now, plus FSx for Lustre fs-0123456789abcdef0, PCS controller (SMALL) "
        "(no bundled price)")


def test_remains_that_are_only_an_unpriced_file_system_still_bill():
    """A destroy that stopped with only the file system left: $0 of priced things, but not "nothing bills"."""
    report = {"region": "us-east-1", "backend": "pcs", "instances": [],
              "resources": [{"type": "fsx_lustre", "id": "fs-0123456789abcdef0", "status": "AVAILABLE"}]}
    line = billing_line(report | live_cost(report, None, NOW))
    assert line is not None and "FSx for Lustre fs-0123456789abcdef0 (no bundled price)" in line


def test_the_cluster_list_names_what_its_figure_leaves_out(tmp_path: Path):
    from fmcluster.spec import load_spec
    from fmcluster.state.store import StateStore
    from fmcluster.verbs.lifecycle.common import spec_text

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(SPEC_TEXT)
    store = StateStore(tmp_path / "state" / "state.db")
    store.save_cluster("costs", "us-east-1", "eks", spec_text(load_spec(spec_file).spec), str(spec_file), "ACTIVE")
    store.close()
    rows = json.loads(_run(tmp_path, "status", "--json").stdout)
    assert rows[0]["usd_per_hour"] == pytest.approx(2 * P5_48XL_BLOCK + 2 * M7I_XLARGE + EKS_STANDARD + NAT_AND_IPV4)
    assert rows[0]["usd_unpriced"] == ["FSx for Lustre"]
    table = _run(tmp_path, "status").stdout
    assert "not priced" in table and "FSx for Lustre" in table


def test_create_and_destroy_say_what_their_figure_leaves_out(monkeypatch: pytest.MonkeyPatch):
    """``create`` and ``destroy`` print the same figure as ``plan``; it names FSx beside it too."""
    import importlib
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from fmcluster.output import ui

    # the modules, not the functions of the same name that fmcluster.verbs.lifecycle exports
    create = importlib.import_module("fmcluster.verbs.lifecycle.create")
    destroy = importlib.import_module("fmcluster.verbs.lifecycle.destroy")

    out = io.StringIO()
    monkeypatch.setattr(ui, "err_console", lambda: Console(file=out, width=400, no_color=True))
    spec = _spec()
    create._print_capacity(spec)
    destroy._print_billing([SimpleNamespace(spec=spec)])
    text = out.getvalue()
    total = 2 * P5_48XL_BLOCK + 2 * M7I_XLARGE + EKS_STANDARD + NAT_AND_IPV4
    assert f"${total:,.2f}/hour" in text and "not counting FSx for Lustre (no bundled price)" in text
    assert f"stops billing of up to ~${total:,.2f}/hour at the queues' maximum, plus FSx for Lustre" in text
