"""The EKS `system` node group, and instance facts known offline for every type EC2 lists.

The system node group: its CreateNodegroup and launch template documents (On-Demand, the standard AL2023 image of
the type's architecture, the label and taint where cluster software goes, no EFA), the add-ons told to run there
(each request checked against botocore's EKS model), its price in `plan`, and `scale NAME system=N`'s rules.
Instance facts: a few types whose facts are typed here from AWS's instance-type pages, and `plan` of an EKS spec of
types outside the curated catalog with no endpoint at all.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.backends.eks import EksBackend
from fmcluster.backends.registry import render
from fmcluster.catalog import hardware as hw
from fmcluster.catalog.names import instance_type_problem
from fmcluster.cost_report.figures import plan_report
from fmcluster.errors import UsageError
from fmcluster.pricing.model import spec_cost
from fmcluster.pricing.rates import PriceBook
from fmcluster.spec import load_spec
from fmcluster.spec.models import NodeRange
from fmcluster.validate.requests import check_document

ROOT = Path(__file__).resolve().parents[3]
FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")
SPEC = """\
name: sysdemo
backend: eks
queues:
  - name: cpu
    instance_type: m7i.2xlarge
    nodes: 2
  - name: gpu
    instance_type: g6.xlarge
    nodes: 1
"""
# Typed by hand, not read from fmcluster: the node group's label and taint (issue 27; EKS CreateNodegroup taints
# take the effect as NO_SCHEDULE), and what a pod carries to land there.
LABELS = {"fmcluster.io/node-role": "system"}
TAINTS = [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}]
ON_SYSTEM = {"nodeSelector": {"fmcluster.io/node-role": "system"},
             "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true",
                              "effect": "NoSchedule"}]}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty state dir: no DescribeInstanceTypes answer was ever cached."""
    state = tmp_path / "state"
    monkeypatch.setenv("FMCLUSTER_HOME", str(state))
    return state


def _spec(tmp_path: Path, text: str = SPEC):
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return load_spec(path).spec


def _document(rendered, kind: str, key: str):
    return next(d for d in rendered.documents if (d.kind, d.key) == (kind, key))


# --- render ---------------------------------------------------------------------------------------------------


def test_the_system_node_group_is_on_demand_labelled_and_tainted(tmp_path: Path, home: Path) -> None:
    rendered = render(_spec(tmp_path))
    group = _document(rendered, "eks_nodegroup", "system")
    body = group.body
    assert body["nodegroupName"] == "system"
    assert (body["capacityType"], body["amiType"]) == ("ON_DEMAND", "AL2023_x86_64_STANDARD")
    assert body["scalingConfig"] == {"minSize": 2, "maxSize": 2, "desiredSize": 2}
    assert body["labels"] == LABELS and body["taints"] == TAINTS
    assert body["subnets"] == _document(rendered, "eks_nodegroup", "cpu").body["subnets"]  # the nodes' private one
    assert check_document(group) == []  # botocore's EKS CreateNodegroup shape (taint effect enum included)
    # The queues' node groups carry no taint: training pods need no toleration.
    assert "taints" not in _document(rendered, "eks_nodegroup", "cpu").body
    template = _document(rendered, "launch_template", "system")
    data = template.body["LaunchTemplateData"]
    assert data["InstanceType"] == "m7i.xlarge"
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert [nic.get("InterfaceType") for nic in data["NetworkInterfaces"]] == [None]  # one plain interface, no EFA
    assert not {"Placement", "CapacityReservationSpecification", "InstanceMarketOptions"} & set(data)
    assert check_document(template) == []
    assert not any(d.kind == "placement_group" and d.key == "system" for d in rendered.documents)


def test_a_graviton_system_type_boots_the_arm_image_and_the_count_is_the_spec_s(tmp_path: Path, home: Path) -> None:
    spec = _spec(tmp_path, SPEC.replace("backend: eks\n", "backend: eks\nkubernetes:\n  system_nodes: 3\n"
                                                           "  system_instance_type: m7g.large\n"))
    body = _document(render(spec), "eks_nodegroup", "system").body
    assert body["amiType"] == "AL2023_ARM_64_STANDARD"
    assert body["scalingConfig"] == {"minSize": 3, "maxSize": 3, "desiredSize": 3}


def test_coredns_and_the_fsx_csi_controller_run_on_the_system_nodes(tmp_path: Path, home: Path) -> None:
    rendered = render(_spec(tmp_path))
    coredns = _document(rendered, "eks_addon", "coredns")
    fsx = _document(rendered, "eks_addon", "aws-fsx-csi-driver")
    # CoreDNS's add-on schema takes nodeSelector and tolerations at the top; the FSx CSI driver's, its chart's
    # controller.nodeSelector and controller.tolerations.
    assert json.loads(coredns.body["configurationValues"]) == ON_SYSTEM
    assert json.loads(fsx.body["configurationValues"]) == {"controller": ON_SYSTEM}
    assert check_document(coredns) == [] and check_document(fsx) == []  # botocore's CreateAddon shape
    # The add-ons whose pods run on every node keep EKS's defaults.
    assert "configurationValues" not in _document(rendered, "eks_addon", "vpc-cni").body


# --- plan and cost --------------------------------------------------------------------------------------------

# AWS EC2 On-Demand pricing, Linux, US East (N. Virginia): m7i.xlarge $0.2016 per hour.
M7I_XLARGE_USD = 0.2016


def test_plan_prices_the_system_nodes_on_demand(tmp_path: Path, home: Path) -> None:
    spec = _spec(tmp_path)
    cost = spec_cost(spec)
    assert cost.system_nodes is not None
    assert (cost.system_nodes.instance_type, cost.system_nodes.nodes) == ("m7i.xlarge", 2)
    assert cost.system_nodes.usd_per_hour == pytest.approx(2 * M7I_XLARGE_USD)
    report = plan_report(spec, PriceBook(spec.region)).to_dict()
    assert report["cost"]["system_nodes_usd_per_hour"] == pytest.approx(2 * M7I_XLARGE_USD)
    # the queues' m7i.2xlarge and g6.xlarge have no bundled price: the total is the known parts, and says so
    # ($0.10 control plane, $0.05 NAT gateway and its address, the system nodes)
    assert report["usd_per_hour"] == pytest.approx(0.10 + 0.05 + 2 * M7I_XLARGE_USD)
    assert report["cost"]["unknown"] == ["queue cpu (m7i.2xlarge)", "queue gpu (g6.xlarge)"]


def test_a_system_type_without_a_bundled_price_is_listed_as_unknown(tmp_path: Path, home: Path) -> None:
    spec = _spec(tmp_path, SPEC.replace("backend: eks\n", "backend: eks\nkubernetes: {system_instance_type: "
                                                           "c7i.2xlarge}\n"))
    cost = spec_cost(spec)
    assert cost.system_nodes is not None and cost.system_nodes.usd_per_hour is None
    assert "price unknown" in cost.system_nodes.price.note
    assert "system nodes (c7i.2xlarge)" in cost.unknown


def test_other_backends_run_no_system_nodes(tmp_path: Path, home: Path) -> None:
    spec = _spec(tmp_path, SPEC.replace("backend: eks", "backend: pcs").replace("g6.xlarge", "m7i.xlarge"))
    assert spec_cost(spec).system_nodes is None


# --- scale ------------------------------------------------------------------------------------------------------


def test_scale_sizes_the_system_group_with_a_fixed_count() -> None:
    backend = EksBackend()
    data: dict = {"name": "x", "queues": []}
    assert backend.scale_own_group(data, "system", 3) is True
    assert data["kubernetes"] == {"system_nodes": 3}
    assert backend.scale_own_group(data, "train", 3) is False  # not the backend's own group
    with pytest.raises(UsageError, match="runs a fixed number of nodes"):
        backend.scale_own_group(data, "system", NodeRange.model_construct(min=1, max=4))


# --- instance facts known offline --------------------------------------------------------------------------------

# (type, vCPUs, memory GiB, architecture, accelerators, accelerator maker, EFA supported), typed from AWS's
# "Amazon EC2 instance types" specification pages: General purpose (m7i.2xlarge 8 vCPUs 32 GiB; m7g.large 2 vCPUs
# 8 GiB, Graviton3), Compute optimized (c7gn.16xlarge 64 vCPUs 128 GiB, EFA), Accelerated computing (g6.xlarge 1
# NVIDIA L4 with 24 GB, 4 vCPUs 16 GiB; inf2.xlarge 1 Inferentia2, 4 vCPUs 16 GiB; g5.48xlarge 8 NVIDIA A10G,
# 192 vCPUs 768 GiB, EFA), High-performance computing (hpc7g.16xlarge 64 vCPUs 128 GiB, Graviton3E, EFA).
FACTS = [
    ("m7i.2xlarge", 8, 32, "x86_64", 0, None, False),
    ("m7g.large", 2, 8, "arm64", 0, None, False),
    ("c7gn.16xlarge", 64, 128, "arm64", 0, None, True),
    ("g6.xlarge", 4, 16, "x86_64", 1, "NVIDIA", False),
    ("inf2.xlarge", 4, 16, "x86_64", 1, "Inferentia2", False),
    ("g5.48xlarge", 192, 768, "x86_64", 8, "NVIDIA", True),
    ("hpc7g.16xlarge", 64, 128, "arm64", 0, None, True),
]


@pytest.mark.parametrize(("name", "vcpus", "memory", "arch", "accelerators", "maker", "efa"), FACTS,
                         ids=[f[0] for f in FACTS])
def test_facts_of_types_outside_the_catalog_are_known_offline(home: Path, name: str, vcpus: int, memory: int,
                                                              arch: str, accelerators: int, maker: str | None,
                                                              efa: bool) -> None:
    facts = hw.hardware(name)
    assert facts.source == "ec2"  # EC2's DescribeInstanceTypes data, shipped: no endpoint, nothing cached
    assert not (home / "cache").exists()
    assert (facts.vcpus, facts.memory_gib, facts.architecture) == (vcpus, memory, arch)
    assert (facts.accelerators, facts.efa_supported) == (accelerators, efa)
    if maker is not None:
        assert maker in (facts.accelerator_model or "")
    assert instance_type_problem(name) is None


def test_p6e_gb200_is_known_offline_from_the_curated_catalog(home: Path) -> None:
    """moto lacks it; the curated catalog has it, EFA layout included (16 interfaces, odd cards efa-only)."""
    facts = hw.hardware("p6e-gb200.36xlarge")
    assert (facts.source, facts.architecture, facts.accelerators, facts.efa_interfaces) == ("catalog", "arm64", 4, 16)
    assert facts.efa_only_cards == frozenset({1, 3, 5, 7, 9, 11, 13, 15})


def test_a_type_aws_does_not_sell_is_unknown_with_the_nearest_name(home: Path) -> None:
    problem = instance_type_problem("m7i.3xlarge")
    assert problem is not None and problem.startswith("unknown instance type 'm7i.3xlarge' (did you mean '")
    assert instance_type_problem("g6.xlarg") == "unknown instance type 'g6.xlarg' (did you mean 'g6.xlarge'?)"


def test_the_shipped_facts_are_what_the_generator_makes_from_moto() -> None:
    """scripts/generate_instance_types.py from the installed moto and the catalog gives the shipped file, so
    nobody edits it by hand; it stays compact."""
    spec = importlib.util.spec_from_file_location("generate_instance_types",
                                                  ROOT / "scripts" / "generate_instance_types.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = (ROOT / "fmcluster" / "catalog" / "ec2_instance_types.json.gz").read_bytes()
    assert len(shipped) < 300_000
    data = json.loads(gzip.decompress(shipped))
    assert data == module.build()
    assert len(data["instance_types"]) > 1_300 and data["curated"]["types"] == ["p6e-gb200.36xlarge"]


def _offline_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"FMCLUSTER_HOME": str(home), "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true", "NO_COLOR": "1", "COLUMNS": "200"})
    return env


def test_plan_of_an_eks_spec_of_general_and_gpu_types_needs_no_endpoint(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC, encoding="utf-8")
    result = subprocess.run([FMCLUSTER, "plan", str(path), "--json"], capture_output=True, text=True,
                            env=_offline_env(home), timeout=120)
    assert result.returncode == 0, result.stderr
    queues = {q["name"]: q for q in json.loads(result.stdout)["queues"]}
    assert (queues["gpu"]["gpus"], queues["gpu"]["facts_source"]) == (1, "ec2")  # one NVIDIA L4
    assert (queues["cpu"]["gpus"], queues["cpu"]["facts_source"]) == (0, "ec2")
    assert not (home / "cache").exists()  # nothing was read from an endpoint


def test_help_does_not_read_the_shipped_facts() -> None:
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom fmcluster.cli.app import app\n"
            "assert CliRunner().invoke(app, ['--help']).exit_code == 0\n"
            "hardware = sys.modules.get('fmcluster.catalog.hardware')\n"
            "print(0 if hardware is None else hardware.shipped_types.cache_info().currsize)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_a_system_type_ec2_sells_only_as_capacity_blocks_is_refused(tmp_path: Path, home: Path) -> None:
    """A type newer than the shipped list, read from EC2 (here written to the cache as DescribeInstanceTypes answers
    it), whose SupportedUsageClasses lack on-demand: the system nodes must not end with a block."""
    hw.remember([{"InstanceType": "x9c.2xlarge", "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
                  "VCpuInfo": {"DefaultVCpus": 8}, "MemoryInfo": {"SizeInMiB": 32768},
                  "SupportedUsageClasses": ["capacity-block"], "NetworkInfo": {"EfaSupported": False}}])
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("backend: eks\n", "backend: eks\nkubernetes: {system_instance_type: x9c.2xlarge}\n"),
                    encoding="utf-8")
    from fmcluster.errors import SpecError

    with pytest.raises(SpecError, match=r":3:36: kubernetes.system_instance_type: EC2 does not sell x9c.2xlarge "
                                        r"On-Demand \(it sells it as capacity-block\)"):
        load_spec(path)
