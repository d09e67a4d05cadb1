"""The machines: architecture checks at load time, and facts for instance types outside the catalog read from
EC2's DescribeInstanceTypes (the sandbox serves AWS's published data) and cached on disk."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fmcluster.backends.registry import render
from fmcluster.catalog import hardware as hw
from fmcluster.errors import SpecError
from fmcluster.spec import load_spec

FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")
GB200_ON_X86_HEAD = """\
name: gb200
backend: parallelcluster
head_node:
  instance_type: m7i.2xlarge
queues:
  - name: train
    instance_type: p6e-gb200.36xlarge
    nodes: 18
    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}
"""


def _offline_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"FMCLUSTER_HOME": str(home), "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true", "NO_COLOR": "1", "COLUMNS": "200"})
    return env


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh state dir, so no cached DescribeInstanceTypes answer of another test leaks in."""
    state = tmp_path / "state"
    monkeypatch.setenv("FMCLUSTER_HOME", str(state))
    return state


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# --- item 8: architectures ------------------------------------------------------------------------------


def test_x86_head_with_gb200_compute_exits_2_naming_the_line(tmp_path: Path, home: Path) -> None:
    path = _write(tmp_path, GB200_ON_X86_HEAD)
    result = subprocess.run([FMCLUSTER, "plan", str(path)], capture_output=True, text=True,
                            env=_offline_env(home), timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{path}:7:20: queues[0].instance_type: p6e-gb200.36xlarge is arm64 but the head node (m7i.2xlarge) " \
           "is x86_64" in " ".join(result.stderr.split())


def test_default_head_is_refused_too_and_the_hint_names_a_graviton_type(tmp_path: Path, home: Path) -> None:
    text = GB200_ON_X86_HEAD.replace("head_node:\n  instance_type: m7i.2xlarge\n", "")
    with pytest.raises(SpecError) as caught:
        load_spec(_write(tmp_path, text))
    message = str(caught.value)
    assert ":5:20: queues[0].instance_type:" in message
    assert "such as m7g.2xlarge" in message


def test_arm64_head_with_gb200_compute_loads(tmp_path: Path, home: Path) -> None:
    loaded = load_spec(_write(tmp_path, GB200_ON_X86_HEAD.replace("m7i.2xlarge", "m7g.2xlarge")))
    assert loaded.spec.head_node.instance_type == "m7g.2xlarge"


def test_pcs_node_groups_may_differ_in_architecture(tmp_path: Path, home: Path) -> None:
    """PCS gives each node group its own AMI: an x86 login group with arm64 compute is a valid cluster."""
    text = GB200_ON_X86_HEAD.replace("parallelcluster", "pcs").replace("p6e-gb200.36xlarge", "c7g.16xlarge")
    text = text.replace("    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}\n", "")
    loaded = load_spec(_write(tmp_path, text))
    rendered = render(loaded.spec)
    assert {d.key for d in rendered.documents if d.kind == "compute_node_group"} == {"login", "train"}


def test_pcs_one_ami_for_two_architectures_is_refused(tmp_path: Path, home: Path) -> None:
    text = GB200_ON_X86_HEAD.replace("parallelcluster", "pcs").replace("p6e-gb200.36xlarge", "c7g.16xlarge")
    text = text.replace("    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}\n", "")
    text += "image: {ami: ami-0123456789abcdef0}\n"
    with pytest.raises(SpecError) as caught:
        load_spec(_write(tmp_path, text))
    assert ":7:20: queues[0].instance_type: c7g.16xlarge is arm64 but the login node (m7i.2xlarge)" in \
        str(caught.value)


@pytest.mark.parametrize(("name", "arch"), [
    ("m7g.large", "arm64"), ("c7gn.16xlarge", "arm64"), ("a1.large", "arm64"), ("g5g.16xlarge", "arm64"),
    ("m7i.large", "x86_64"), ("g5.12xlarge", "x86_64"), ("p6e-gb200.36xlarge", "arm64"), ("trn2.48xlarge", "x86_64")])
def test_architecture_without_an_endpoint(name: str, arch: str, home: Path) -> None:
    assert hw.hardware(name).architecture == arch


# --- item 7: any instance type ---------------------------------------------------------------------------

G5 = """\
name: g5-demo
backend: parallelcluster
queues:
  - name: infer
    instance_type: g5.12xlarge
    nodes: 2
"""


def test_g5_facts_are_known_offline(tmp_path: Path, home: Path) -> None:
    """g5.12xlarge is outside the catalog: EC2's DescribeInstanceTypes data shipped with fmcluster gives its GPUs
    and EFA with no endpoint and nothing cached (AWS's G5 page: 4 NVIDIA A10G with 24 GB each, EFA)."""
    path = _write(tmp_path, G5)
    result = subprocess.run([FMCLUSTER, "plan", str(path), "--json"], capture_output=True, text=True,
                            env=_offline_env(home), timeout=180)
    assert result.returncode == 0, result.stderr
    queue = json.loads(result.stdout)["queues"][0]
    assert (queue["gpus"], queue["accelerators_per_node"], queue["facts_source"]) == (8, 4, "ec2")
    assert queue["accelerator_model"] == "NVIDIA A10G"
    assert queue["hbm_total_gb"] == pytest.approx(2 * 4 * 22888 / 1024 * 1.073741824, abs=0.2)

    rendered = subprocess.run([FMCLUSTER, "render", str(path)], capture_output=True, text=True,
                              env=_offline_env(home), timeout=180)
    assert rendered.returncode == 0, rendered.stderr
    config = next(d for d in yaml.safe_load_all(rendered.stdout) if d and "Scheduling" in d)  # after the network's
    queue_doc = config["Scheduling"]["SlurmQueues"][0]
    assert queue_doc["HealthChecks"]["Gpu"]["Enabled"] is True
    assert queue_doc["ComputeResources"][0]["Efa"]["Enabled"] is True  # EC2: EfaSupported, 1 EFA interface
    assert not (home / "cache").exists()


def test_a_type_ec2_does_not_list_is_refused_offline_with_the_way_forward(tmp_path: Path, home: Path) -> None:
    result = subprocess.run([FMCLUSTER, "plan", str(_write(tmp_path, G5.replace("g5.12xlarge", "g5.13xlarge")))],
                            capture_output=True, text=True, env=_offline_env(home), timeout=120)
    assert result.returncode == 2, result.stderr
    flat = " ".join(result.stderr.split())
    assert ":5:20: queues[0].instance_type: unknown instance type 'g5.13xlarge' (did you mean 'g5." in flat
    assert "run once with an AWS endpoint" in flat


def test_pcs_efa_layout_from_ec2_for_a_new_family(home: Path) -> None:
    """p4d's layout from DescribeInstanceTypes (4 cards, 4 EFA interfaces); a type with card 0 ENA-only keeps it."""
    from fmcluster.spec.decisions import efa_network_interfaces
    from fmcluster.spec.models import Queue

    hw.remember([{"InstanceType": "x9e.48xlarge", "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
                  "GpuInfo": {"Gpus": [{"Count": 8, "Manufacturer": "NVIDIA", "Name": "X",
                                        "MemoryInfo": {"SizeInMiB": 81920}}]},
                  "NetworkInfo": {"EfaSupported": True, "MaximumNetworkCards": 5,
                                  "EfaInfo": {"MaximumEfaInterfaces": 4},
                                  # EC2's InterfaceTypes: card 1 takes only efa-only (as p6e-gb200's odd cards)
                                  "NetworkCards": [{"NetworkCardIndex": 1, "InterfaceTypes": ["efa-only"]},
                                                   {"NetworkCardIndex": 2, "InterfaceTypes": ["interface", "efa",
                                                                                              "efa-only"]}]}}])
    layout = efa_network_interfaces(Queue(name="q", instance_type="x9e.48xlarge", nodes=1))
    assert layout[0] == {"card": 0, "device": 0, "efa": False, "efa_only": False}
    assert [(nic["card"], nic["efa_only"]) for nic in layout[1:]] == [(1, True), (2, False), (3, False), (4, False)]
    assert hw.hardware("x9e.48xlarge").has_gpus


# --- item 4: images by purpose -----------------------------------------------------------------------------

PCS_P5 = """\
name: imgfam
backend: pcs
queues:
  - name: train
    instance_type: p5.48xlarge
    nodes: 2
"""


def test_pcs_sample_family_renders_the_sample_ami_lookup(tmp_path: Path, home: Path) -> None:
    loaded = load_spec(_write(tmp_path, PCS_P5 + "image: {family: pcs-sample}\n"))
    assert loaded.spec.image.family == "pcs-sample"
    render(loaded.spec)  # offline: no AMI is named until create looks the sample AMI up


@pytest.mark.parametrize(("backend", "family", "parameter"), [
    ("pcs", "dlami", "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id"),
    ("pcs", "neuron", "/aws/service/neuron/dlami/multi-framework/amazon-linux-2023/latest/image_id"),
    ("parallelcluster", "dlami",
     "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"),
])
def test_deep_learning_families_are_refused_with_the_way_forward(tmp_path: Path, home: Path, backend: str,
                                                                 family: str, parameter: str) -> None:
    text = PCS_P5.replace("pcs", backend, 1) + f"image:\n  family: {family}\n"
    with pytest.raises(SpecError) as caught:
        load_spec(_write(tmp_path, text))
    message = str(caught.value)
    assert ":8:11: image.family: AWS's" in message and parameter in message
    assert ("pcluster build-image" in message) is (backend == "parallelcluster")


def test_pcs_sample_family_on_parallelcluster_and_two_images_are_refused(tmp_path: Path, home: Path) -> None:
    with pytest.raises(SpecError, match=r":7:17: image.family: AWS's PCS sample AMIs carry the PCS agent"):
        load_spec(_write(tmp_path, PCS_P5.replace("pcs", "parallelcluster", 1) + "image: {family: pcs-sample}\n"))
    with pytest.raises(SpecError, match=r":7:8: image: give exactly one of image.ami"):
        load_spec(_write(tmp_path, PCS_P5 + "image: {family: pcs-sample, ami: ami-0123456789abcdef0}\n"))


@pytest.mark.parametrize("backend", ["pcs", "parallelcluster"])
def test_trainium_nodes_get_the_neuron_driver_first(tmp_path: Path, home: Path, backend: str) -> None:
    """Neither backend's default image has the Neuron driver: a trn2 queue is not silently left without one."""
    text = PCS_P5.replace("p5.48xlarge", "trn2.48xlarge").replace("backend: pcs", f"backend: {backend}")
    loaded = load_spec(_write(tmp_path, text))
    assert any(":5:20: queues[0].instance_type: " in str(w) and "carry no Neuron driver: fmcluster installs it"
               in str(w) for w in loaded.warnings)
    from fmcluster.backends.parallelcluster import render as parallelcluster
    from fmcluster.backends.pcs import render as pcs
    from fmcluster.backends.slurm.node_software import compute_steps

    layout = {"pcs": pcs, "parallelcluster": parallelcluster}[backend].NODE_LAYOUT
    steps = compute_steps(loaded.spec, loaded.spec.queues[0], str(tmp_path / "spec.yaml"), layout)
    assert steps[0].name == "neuron.sh"
    # a CPU queue next to it does not run it
    cpu = load_spec(_write(tmp_path, PCS_P5.replace("p5.48xlarge", "c7i.4xlarge"))).spec
    assert "neuron.sh" not in [s.name for s in compute_steps(cpu, cpu.queues[0], "", layout)]


def test_trainium_on_an_os_without_neuron_packages_is_refused(tmp_path: Path, home: Path) -> None:
    text = PCS_P5.replace("p5.48xlarge", "trn2.48xlarge").replace("backend: pcs", "backend: parallelcluster")
    with pytest.raises(SpecError, match=r"os: trn2.48xlarge needs the Neuron driver, .* AWS publishes only for "
                                        r"ubuntu2204, ubuntu2404, alinux2023"):
        load_spec(_write(tmp_path, text + "os: rocky9\n"))
    assert not [w for w in load_spec(_write(tmp_path, text + "image: {ami: ami-0123456789abcdef0}\n")).warnings
                if "Neuron" in str(w)]


# --- item 5: capacity detail ---------------------------------------------------------------------------------

GB200_X72 = """\
name: gb200
backend: parallelcluster
head_node: {instance_type: m7g.2xlarge}
network: {subnet_id: subnet-0123456789abcdef0}
queues:
  - name: train
    instance_type: p6e-gb200.36xlarge
    nodes: 36
    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0, ultraserver: u-p6e-gb200x72}
"""
GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/train-odcrs"


def test_ultraserver_queue_renders_and_plans_its_nvlink_domains(tmp_path: Path, home: Path) -> None:
    loaded = load_spec(_write(tmp_path, GB200_X72))
    assert not [w for w in loaded.warnings if "IMEX" in str(w)]  # ParallelCluster: nothing left to the user
    config = render(loaded.spec).documents[0].body
    # the head node puts fmcluster's IMEX prolog into ParallelCluster's shared prolog.d
    [imex] = [s for s in config["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Sequence"]
              if s["Script"].endswith("/imex_prolog.sh")]
    assert imex["Args"] == ["install", "parallelcluster"]
    assert "CustomActions" not in config["Scheduling"]["SlurmQueues"][0] or not any(
        s["Script"].endswith("/imex_prolog.sh")
        for s in config["Scheduling"]["SlurmQueues"][0]["CustomActions"]["OnNodeConfigured"]["Sequence"])
    queue = config["Scheduling"]["SlurmQueues"][0]
    assert queue["CapacityType"] == "CAPACITY_BLOCK"
    assert queue["CapacityReservationTarget"] == {"CapacityReservationId": "cr-0123456789abcdef0"}
    assert queue["Tags"] == [{"Key": "fmcluster:ultraserver", "Value": "u-p6e-gb200x72"}]
    assert queue["ComputeResources"][0]["MinCount"] == queue["ComputeResources"][0]["MaxCount"] == 36
    result = subprocess.run([FMCLUSTER, "plan", str(tmp_path / "spec.yaml"), "--json"], capture_output=True,
                            text=True, env=_offline_env(home), timeout=120)
    assert result.returncode == 0, result.stderr
    domain = json.loads(result.stdout)["queues"][0]["ultraserver"]
    assert domain == {"type": "u-p6e-gb200x72", "count": 2, "instances_per_domain": 18,
                      "accelerators_per_domain": 72, "link": "NVLink 5"}
    text = subprocess.run([FMCLUSTER, "plan", str(tmp_path / "spec.yaml")], capture_output=True, text=True,
                          env=_offline_env(home), timeout=120).stdout
    assert "2 × u-p6e-gb200x72 UltraServers, each one NVLink 5 domain of 72 GPUs on 18 instances" in \
        " ".join(text.split())


def test_ultraserver_only_type_without_ultraserver_is_pointed_at_it(tmp_path: Path, home: Path) -> None:
    loaded = load_spec(_write(tmp_path, GB200_X72.replace(", ultraserver: u-p6e-gb200x72", "")))
    assert any(":7:20: queues[0].instance_type: p6e-gb200.36xlarge is sold only in EC2 UltraServers "
               "(u-p6e-gb200x36 (9 instances), u-p6e-gb200x72 (18 instances))" in str(w) for w in loaded.warnings)


@pytest.mark.parametrize(("change", "where", "message"), [
    (("nodes: 36", "nodes: 20"), ":8:12: queues[0].nodes: 20 nodes is not a whole number of u-p6e-gb200x72 "
     "UltraServers (18 p6e-gb200.36xlarge each): use 18 or 36", None),
    (("ultraserver: u-p6e-gb200x72", "ultraserver: u-trn2x64"), ":9:89: queues[0].capacity.ultraserver: "
     "u-trn2x64 is made of trn2u.48xlarge instances, not p6e-gb200.36xlarge", None),
    (("type: capacity-block, reservation_id", "type: reservation, reservation_id"),
     ":9:86: queues[0].capacity.ultraserver: UltraServers are sold only as Capacity Blocks", None),
])
def test_ultraserver_rules(tmp_path: Path, home: Path, change: tuple[str, str], where: str, message: None) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(_write(tmp_path, GB200_X72.replace(*change)))
    assert where in str(caught.value)


def test_pcs_ultraserver_tags_its_nodes_and_warns_about_imex(tmp_path: Path, home: Path) -> None:
    text = GB200_X72.replace("parallelcluster", "pcs").replace("nodes: 36", "nodes: 18")
    loaded = load_spec(_write(tmp_path, text))
    assert any("IMEX prolog the cluster's Slurm Prolog" in str(w) and "enabled nvidia-imex" in str(w)
               for w in loaded.warnings)
    documents = render(loaded.spec).documents
    cluster = next(d for d in documents if d.kind == "cluster").body
    assert {"parameterName": "Prolog", "parameterValue": "/opt/fmcluster/prolog/imex.sh"} in \
        cluster["slurmConfiguration"]["slurmCustomSettings"]
    template = next(d for d in documents if d.kind == "launch_template" and d.key == "train")
    data = template.body["LaunchTemplateData"]
    assert {"Key": "fmcluster:ultraserver", "Value": "u-p6e-gb200x72"} in data["TagSpecifications"][0]["Tags"]
    # the catalog's EFA layout, offline: card 0 ENA, EFA on cards 1-16, efa-only on the odd ones
    assert [(nic["NetworkCardIndex"], nic.get("InterfaceType")) for nic in data["NetworkInterfaces"]] == [
        (0, None)] + [(card, "efa-only" if card % 2 else "efa") for card in range(1, 17)]
    # the node group installs the prolog before anything else runs
    from fmcluster.engine.references import references, resolve
    from fmcluster.validate.requests import stand_in

    body = resolve(template.body, {ref: stand_in(ref) for ref in references(template.body)})
    user_data = base64.b64decode(body["LaunchTemplateData"]["UserData"]).decode()
    commands = [line for line in user_data.splitlines() if line.startswith("/opt/fmcluster/")]
    assert commands[0] == "/opt/fmcluster/imex_prolog.sh install pcs"


@pytest.mark.parametrize(("change", "where"), [
    (("backend: pcs\n", "backend: pcs\nslurm: {custom_settings: {Prolog: /opt/site/prolog.sh}}\n"),
     "slurm.custom_settings.Prolog: not supported on pcs with queue train: PCS takes one cluster Prolog"),
    (("backend: pcs\n", "backend: pcs\nslurm: {version: '24.11'}\n"),
     "slurm.version: queue train needs IMEX configured per job, which AWS PCS supports from Slurm 25.05"),
])
def test_pcs_gb200_keeps_the_prolog_for_imex(tmp_path: Path, home: Path, change: tuple[str, str],
                                              where: str) -> None:
    text = GB200_X72.replace("parallelcluster", "pcs").replace("nodes: 36", "nodes: 18")
    with pytest.raises(SpecError, match=re.escape(where)):
        load_spec(_write(tmp_path, text.replace(*change)))


@pytest.mark.parametrize("backend", ["parallelcluster", "pcs"])
def test_reservation_resource_group_is_the_launch_target(tmp_path: Path, home: Path, backend: str) -> None:
    text = (f"name: grp\nbackend: {backend}\nnetwork: {{subnet_id: subnet-0123456789abcdef0}}\nqueues:\n"
            f"  - name: train\n    instance_type: p5.48xlarge\n    nodes: 2\n"
            f"    capacity: {{type: reservation, resource_group_arn: '{GROUP}'}}\n")
    rendered = render(load_spec(_write(tmp_path, text)).spec)
    if backend == "parallelcluster":
        target = rendered.documents[0].body["Scheduling"]["SlurmQueues"][0]["CapacityReservationTarget"]
    else:
        template = next(d for d in rendered.documents if d.kind == "launch_template" and d.key == "train")
        target = template.body["LaunchTemplateData"]["CapacityReservationSpecification"]["CapacityReservationTarget"]
    assert target == {"CapacityReservationResourceGroupArn": GROUP}


def test_resource_group_rules(tmp_path: Path, home: Path) -> None:
    base = "name: grp\nqueues:\n  - name: train\n    instance_type: p5.48xlarge\n    nodes: 2\n"
    both = base + f"    capacity: {{type: reservation, reservation_id: cr-0123456789abcdef0, resource_group_arn: " \
                  f"'{GROUP}'}}\n"
    with pytest.raises(SpecError, match="give reservation_id or resource_group_arn, not both"):
        load_spec(_write(tmp_path, both))
    block = base + f"    capacity: {{type: capacity-block, reservation_id: cr-0123456789abcdef0, " \
                   f"resource_group_arn: '{GROUP}'}}\n"
    with pytest.raises(SpecError, match="resource_group_arn is for capacity type 'reservation'"):
        load_spec(_write(tmp_path, block))


# --- item 9: Capacity Block prices -------------------------------------------------------------------------


def test_capacity_block_price_comes_from_ec2_offerings(tmp_path: Path, home: Path, sandbox) -> None:
    """The sandbox sells u-p6e-gb200x72 blocks at AWS's published $10.582 per GPU-hour (instance-facts.yaml)."""
    from fmcluster.cost_report.figures import plan_report
    from fmcluster.pricing.capacity_blocks import fetch_capacity_block_prices
    from fmcluster.pricing.rates import LivePriceBook, PriceBook

    spec = load_spec(_write(tmp_path, GB200_X72)).spec
    blocks = fetch_capacity_block_prices(spec, "us-east-1", ec2=sandbox.client("ec2"))
    price = blocks["train"]
    assert price.usd_per_instance_hour == pytest.approx(4 * 10.582)
    assert "DescribeCapacityBlockOfferings" in price.note and "us-east-1-dfw-2a" in price.note
    report = plan_report(spec, LivePriceBook("us-east-1", {"p6e-gb200.36xlarge": None}, blocks))
    queue = report.queues[0]
    assert (queue.price_basis, queue.usd_per_hour) == ("capacity-block", pytest.approx(36 * 4 * 10.582))
    # without --live-prices: the bundled basis, said as such
    assert plan_report(spec, PriceBook("us-east-1")).queues[0].price_note.startswith("Capacity Block price")


def test_capacity_block_queue_without_a_bundled_block_rate_is_unpriced_not_on_demand(tmp_path: Path,
                                                                                     home: Path) -> None:
    """A block bills its own rate (issue 35): p5en.48xlarge has an On-Demand rate but no bundled block rate, so
    the queue is unpriced and said, never shown at On-Demand."""
    from fmcluster.cost_report.figures import plan_report
    from fmcluster.pricing.rates import PriceBook

    text = ("name: p5cb\nqueues:\n  - name: train\n    instance_type: p5en.48xlarge\n    nodes: 2\n"
            "    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}\n")
    report = plan_report(load_spec(_write(tmp_path, text)).spec, PriceBook("us-east-1"))
    queue = report.queues[0]
    assert (queue.price_basis, queue.usd_per_hour) == (None, None)
    assert "Capacity Block rate is not bundled" in queue.price_note
    assert "queue train (p5en.48xlarge)" in report.cost.unknown
