"""Rendering: every example renders, the backends' own checkers accept the output (and do reject a broken
document), and the rendered documents carry the best-practice defaults of DESIGN.md §2."""

from __future__ import annotations

import base64
import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from fmcluster.backends.parallelcluster.config_checks import check_schema
from fmcluster.backends.registry import render
from fmcluster.engine.references import references, resolve
from fmcluster.render import RenderedDocuments
from fmcluster.render.common import CLUSTER_TAG
from fmcluster.render.documents import Document
from fmcluster.spec import load_spec
from fmcluster.spec.models import Spec
from fmcluster.validate.requests import check_document, stand_in, with_stand_ins

# SSH closed to everyone: loopback only. ParallelCluster's HeadNode/Ssh/AllowedIps defaults to 0.0.0.0/0 when unset
# (ParallelCluster 3 configuration reference, docs.aws.amazon.com/parallelcluster/latest/ug/HeadNode-v3.html), so a
# spec without network.ssh.allowed_cidr must name a CIDR that lets no one in.
SSH_CLOSED = "127.0.0.1/32"

pytestmark = pytest.mark.filterwarnings("ignore:The .default. argument to fields is deprecated")

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
CONFIG_IDS = [p.stem for p in CONFIGS]


def _load(path: Path) -> Spec:
    return load_spec(path).spec


def _render_text(tmp_path: Path, text: str) -> tuple[Spec, RenderedDocuments]:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    spec = _load(path)
    return spec, render(spec, str(path))


def _by_backend(backend: str) -> list[Path]:
    return [p for p in CONFIGS if yaml.safe_load(p.read_text())["backend"] == backend]


PC_CONFIGS = _by_backend("parallelcluster")
PCS_CONFIGS = _by_backend("pcs")


def _config(stem: str) -> Path:
    return next(p for p in CONFIGS if p.stem == stem)


def test_examples_exist() -> None:
    assert len(CONFIGS) >= 6
    assert PC_CONFIGS and PCS_CONFIGS


# --- every example renders and passes the backend's own checks -----------------------------------

@pytest.mark.parametrize("path", CONFIGS, ids=CONFIG_IDS)
def test_example_renders(path: Path) -> None:
    spec = _load(path)
    rendered = render(spec, str(path))
    assert rendered.backend == spec.backend
    assert rendered.documents
    for document in rendered.documents:
        assert document.text.strip()
        assert yaml.safe_load(document.text) == document.body
    assert len({(d.kind, d.key) for d in rendered.documents}) == len(rendered.documents)
    assert len({d.filename for d in rendered.documents}) == len(rendered.documents)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No endpoint, no credentials, fresh pcluster clients and a fresh boto3 default session, whatever ran before in
    this process: the schema's own look-ups (the subnet's AZ, the ODCR) then fail at once, as offline `validate`'s
    do, instead of calling the sandbox an earlier in-process command left in boto3's default session and waiting
    out its retries (seen in a clean-clone run: 54 s)."""
    from fixtures.pcluster import reset_pcluster_clients

    for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    reset_pcluster_clients()
    yield
    reset_pcluster_clients()


@pytest.mark.parametrize("path", PC_CONFIGS, ids=[p.stem for p in PC_CONFIGS])
def test_parallelcluster_schema_accepts(path: Path, monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    from pcluster.schemas.cluster_schema import ClusterSchema

    spec = _load(path)
    # Ids issued at create time (the OpenZFS root volume) are references here; fill them as validate does.
    config = with_stand_ins(render(spec, str(path)).one("pcluster_cluster").body)
    monkeypatch.setenv("AWS_DEFAULT_REGION", spec.region)
    findings = check_schema(spec.name, copy.deepcopy(config), spec.region)
    assert findings.errors == []
    # The same, straight through ParallelCluster 3.16's schema: raises on any error.
    cluster = ClusterSchema(cluster_name=spec.name).load(copy.deepcopy(config))
    assert cluster.scheduling.queues


def test_parallelcluster_schema_rejects_a_broken_config(monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    spec = _load(_config("quickstart-parallelcluster"))
    config = copy.deepcopy(render(spec).one("pcluster_cluster").body)
    config["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["MinCount"] = "x"
    config["Scheduling"]["SlurmQueues"][0]["CapacityType"] = "CHEAP"
    monkeypatch.setenv("AWS_DEFAULT_REGION", spec.region)
    findings = check_schema(spec.name, config, spec.region)
    text = "\n".join(findings.errors)
    assert "MinCount" in text and "CapacityType" in text


@pytest.mark.parametrize("path", PCS_CONFIGS, ids=[p.stem for p in PCS_CONFIGS])
def test_pcs_documents_pass_botocore_shapes(path: Path) -> None:
    rendered = render(_load(path), str(path))
    for document in rendered.documents:
        assert check_document(document) == [], document.filename


def _corrupt(document: Document, change) -> Document:
    body = copy.deepcopy(document.body)
    change(body)
    return dataclasses.replace(document, body=body)


def _pcs_rendered() -> RenderedDocuments:
    return render(_load(_config("quickstart-pcs")))


@pytest.mark.parametrize(("kind", "key", "change", "expected"), [
    ("compute_node_group", "gpu", lambda b: b["scalingConfiguration"].__setitem__("minInstanceCount", "x"),
     "minInstanceCount"),
    ("compute_node_group", "gpu", lambda b: b.__setitem__("purchaseOption", "CHEAP"), "purchaseOption"),
    ("compute_node_group", "gpu", lambda b: b.pop("subnetIds"), "subnetIds"),
    ("compute_node_group", "gpu", lambda b: b.__setitem__("colour", "blue"), "colour"),
    ("cluster", "", lambda b: b.pop("clusterName"), "clusterName"),
    ("cluster", "", lambda b: b.__setitem__("size", "HUGE"), "size"),
    ("queue", "gpu", lambda b: b.__setitem__("queueName", "x" * 100), "queueName"),
    ("launch_template", "gpu", lambda b: b["LaunchTemplateData"]["MetadataOptions"].__setitem__("HttpTokens", 1),
     "HttpTokens"),
    ("security_group", "cluster", lambda b: b["create"].pop("GroupName"), "GroupName"),
], ids=["min-x", "purchase-option", "no-subnets", "unknown-member", "no-cluster-name", "size", "long-queue-name",
        "http-tokens-type", "no-group-name"])
def test_botocore_check_can_fail(kind: str, key: str, change, expected: str) -> None:
    rendered = _pcs_rendered()
    document = rendered.one(kind, key)
    assert check_document(document) == []
    problems = check_document(_corrupt(document, change))
    assert problems, f"{kind} corrupted by {expected} still passes"
    assert any(expected in p for p in problems), problems


# --- best-practice defaults in the PCS documents ----------------------------------------------------

PCS_QUEUE = """\
name: efa-layout
backend: pcs
network: {{subnet_id: subnet-0123456789abcdef0}}
queues:
  - name: train
    instance_type: {instance_type}
    nodes: 2
"""


@pytest.mark.parametrize(("instance_type", "efa", "card0_efa"), [
    ("p5.48xlarge", 32, True),
    ("p5e.48xlarge", 32, True),
    ("p5en.48xlarge", 16, True),
    ("p6-b200.48xlarge", 8, True),
    ("p6-b300.48xlarge", 16, False),
    ("p4d.24xlarge", 4, True),
    ("trn2.48xlarge", 16, True),
    ("p5.4xlarge", 1, True),
])
def test_pcs_efa_interfaces_per_instance_type(tmp_path: Path, instance_type: str, efa: int, card0_efa: bool) -> None:
    text = PCS_QUEUE.format(instance_type=instance_type)
    if instance_type.startswith("trn"):  # Trainium needs a PCS AMI with the Neuron driver, not the sample AMI
        text += "image: {ami: ami-0123456789abcdef0}\n"
    _, rendered = _render_text(tmp_path, text)
    data = rendered.one("launch_template", "train").body["LaunchTemplateData"]
    nics = data["NetworkInterfaces"]
    assert "SecurityGroupIds" not in data
    assert sum(1 for n in nics if n.get("InterfaceType") == "efa") == efa
    cards = [n["NetworkCardIndex"] for n in nics]
    assert cards == list(range(len(nics)))  # one interface per card, in order
    primary = nics[0]
    assert (primary["NetworkCardIndex"], primary["DeviceIndex"]) == (0, 0)
    assert (primary.get("InterfaceType") == "efa") is card0_efa
    assert len(nics) == efa + (0 if card0_efa else 1)
    # AWS: every additional interface takes the next card and device index 1.
    assert all(n["DeviceIndex"] == 1 for n in nics[1:])
    # Every interface carries the cluster security group (else it gets the VPC's default group).
    assert all(n["Groups"] == ["${security_group.cluster.id}"] for n in nics)
    assert all(n["DeleteOnTermination"] is True for n in nics)
    for document in rendered.documents:
        assert check_document(document) == [], document.filename


def test_pcs_efa_off_uses_security_group_ids(tmp_path: Path) -> None:
    _, rendered = _render_text(tmp_path, PCS_QUEUE.format(instance_type="p5.48xlarge") + "    efa: false\n")
    data = rendered.one("launch_template", "train").body["LaunchTemplateData"]
    assert "NetworkInterfaces" not in data
    assert data["SecurityGroupIds"] == ["${security_group.cluster.id}"]
    assert "Placement" not in data  # no EFA: no cluster placement group either
    assert not rendered.by_kind("placement_group")


@pytest.mark.parametrize("path", PCS_CONFIGS, ids=[p.stem for p in PCS_CONFIGS])
def test_pcs_launch_templates_are_hardened(path: Path) -> None:
    rendered = render(_load(path), str(path))
    templates = rendered.by_kind("launch_template")
    assert {t.key for t in templates} == {"login"} | {q.name for q in _load(path).queues}
    for document in templates:
        data = document.body["LaunchTemplateData"]
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        assert data["MetadataOptions"]["HttpEndpoint"] == "enabled"
        for mapping in data["BlockDeviceMappings"]:
            assert mapping["Ebs"]["Encrypted"] is True
        assert ("NetworkInterfaces" in data) != ("SecurityGroupIds" in data)
        user_data = _user_data(document)
        assert user_data.startswith("Content-Type: multipart/mixed")
        assert "#!/bin/bash" in user_data and "${" + "fsx_lustre" not in user_data


def test_pcs_capacity_block_layout() -> None:
    spec = _load(_config("p6-b300-capacity-block-pcs"))
    rendered = render(spec)
    queue = spec.queues[0]
    group = rendered.one("compute_node_group", "train").body
    assert group["purchaseOption"] == "CAPACITY_BLOCK"
    scaling = group["scalingConfiguration"]
    assert scaling["minInstanceCount"] == scaling["maxInstanceCount"] == queue.nodes
    data = rendered.one("launch_template", "train").body["LaunchTemplateData"]
    assert data["InstanceMarketOptions"]["MarketType"] == "capacity-block"
    target = data["CapacityReservationSpecification"]["CapacityReservationTarget"]
    assert target["CapacityReservationId"] == queue.capacity.reservation_id
    assert "Placement" not in data
    assert not rendered.by_kind("placement_group")
    # "Your launch template must include ... A valid InstanceType that matches the instance type of the
    # Capacity Block" (PCS user guide, "Configure an AWS PCS compute node group to use a Capacity Block")
    assert data["InstanceType"] == queue.instance_type == "p6-b300.48xlarge"


def test_pcs_root_device_comes_from_the_image() -> None:
    """The root volume mapping names the AMI's RootDeviceName (DescribeImages); offline a stand-in, said so."""
    from fmcluster.backends.pcs.images import Image
    from fmcluster.backends.pcs.render import ROOT_DEVICE_TO_RESOLVE
    from fmcluster.backends.pcs.render import render as render_pcs

    spec = _load(_config("quickstart-pcs"))
    offline = render_pcs(spec)
    devices = {d.key: d.body["LaunchTemplateData"]["BlockDeviceMappings"][0]["DeviceName"]
               for d in offline.by_kind("launch_template")}
    assert set(devices.values()) == {ROOT_DEVICE_TO_RESOLVE}
    assert any("RootDeviceName" in note for note in offline.notes)
    assert "amiId" not in offline.one("compute_node_group", "gpu").body
    image = Image("ami-0123456789abcdef0", "own", "x86_64", "/dev/sda1", sample=False)
    rendered = render_pcs(spec, images={"x86_64": image})
    for document in rendered.by_kind("launch_template"):
        assert document.body["LaunchTemplateData"]["BlockDeviceMappings"][0]["DeviceName"] == "/dev/sda1"
    assert rendered.one("compute_node_group", "gpu").body["amiId"] == image.ami_id
    assert not any("RootDeviceName" in note for note in rendered.notes)


def test_pcs_placement_group_for_on_demand_efa_queue() -> None:
    rendered = render(_load(_config("p6-b200-pcs")))
    groups = rendered.by_kind("placement_group")
    assert [g.key for g in groups] == ["train"]  # the c7i CPU queue has no EFA: no placement group
    assert groups[0].body["Strategy"] == "cluster"
    data = rendered.one("launch_template", "train").body["LaunchTemplateData"]
    assert data["Placement"]["GroupName"] == "${placement_group.train.name}"  # the graph's edge to the group
    assert "Placement" not in rendered.one("launch_template", "cpu").body["LaunchTemplateData"]
    assert rendered.one("compute_node_group", "train").body["purchaseOption"] == "ONDEMAND"


def test_pcs_reservation_has_no_placement_group(tmp_path: Path) -> None:
    _, rendered = _render_text(tmp_path, PCS_QUEUE.format(instance_type="p5.48xlarge")
                               + "    capacity: {type: reservation, reservation_id: cr-0123456789abcdef0}\n")
    assert not rendered.by_kind("placement_group")
    data = rendered.one("launch_template", "train").body["LaunchTemplateData"]
    assert "Placement" not in data and "InstanceMarketOptions" not in data
    assert rendered.one("compute_node_group", "train").body["purchaseOption"] == "ONDEMAND"


def test_pcs_lustre_is_persistent_2() -> None:
    rendered = render(_load(_config("p6-b200-pcs")))
    fsx = rendered.one("fsx_lustre").body
    assert fsx["FileSystemType"] == "LUSTRE"
    assert fsx["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    assert fsx["LustreConfiguration"]["MetadataConfiguration"] == {"Mode": "USER_PROVISIONED", "Iops": 6000}
    assert fsx["StorageCapacity"] == 2400


def test_pcs_size_and_login_group() -> None:
    rendered = render(_load(_config("quickstart-pcs")))
    cluster = rendered.one("cluster").body
    assert cluster["size"] == "SMALL"
    assert cluster["scheduler"] == {"type": "SLURM", "version": "26.05"}
    login = rendered.one("compute_node_group", "login").body
    assert login["scalingConfiguration"] == {"minInstanceCount": 1, "maxInstanceCount": 1}
    assert {q.key for q in rendered.by_kind("queue")} == {"gpu", "burst"}  # the login group has no queue


@pytest.mark.parametrize("path", PCS_CONFIGS, ids=[p.stem for p in PCS_CONFIGS])
def test_pcs_ssh_never_open_unless_written(path: Path) -> None:
    spec = _load(path)
    groups = render(spec).by_kind("security_group")
    cidrs = [r["CidrIp"] for group in groups for rule in group.body["ingress"]["IpPermissions"]
             for r in rule.get("IpRanges", [])]
    assert "0.0.0.0/0" not in cidrs
    assert cidrs == ([spec.network.ssh.allowed_cidr] if spec.network.ssh.allowed_cidr else [])
    assert [g.key for g in groups] == (["cluster", "login"] if spec.network.ssh.allowed_cidr else ["cluster"])


def test_pcs_ssh_open_when_written(tmp_path: Path) -> None:
    _, rendered = _render_text(tmp_path, PCS_QUEUE.format(instance_type="p5.48xlarge").replace(
        "network: {", "network: {ssh: {allowed_cidr: 0.0.0.0/0}, "))
    ingress = rendered.one("security_group", "login").body["ingress"]["IpPermissions"]
    assert [r["CidrIp"] for rule in ingress for r in rule.get("IpRanges", [])] == ["0.0.0.0/0"]


# --- best-practice defaults in the ParallelCluster config --------------------------------------------

def _pc_config(path: Path) -> tuple[Spec, dict[str, Any]]:
    spec = _load(path)
    return spec, render(spec, str(path)).one("pcluster_cluster").body


@pytest.mark.parametrize("path", PC_CONFIGS, ids=[p.stem for p in PC_CONFIGS])
def test_parallelcluster_defaults(path: Path) -> None:
    spec, config = _pc_config(path)
    assert config["Imds"]["ImdsSupport"] == "v2.0"
    head = config["HeadNode"]
    assert head["LocalStorage"]["RootVolume"]["Encrypted"] is True
    assert head["Imds"]["Secured"] is True
    allowed = head["Ssh"]["AllowedIps"]
    assert allowed != "0.0.0.0/0"
    assert allowed == (spec.network.ssh.allowed_cidr or SSH_CLOSED)
    for queue_spec, queue in zip(spec.queues, config["Scheduling"]["SlurmQueues"], strict=True):
        assert queue["Name"] == queue_spec.name
        assert queue["JobExclusiveAllocation"] is True
        assert queue["ComputeSettings"]["LocalStorage"]["RootVolume"]["Encrypted"] is True
        assert queue["HealthChecks"]["Gpu"]["Enabled"] is True  # every example queue is a GPU queue
        resource = queue["ComputeResources"][0]
        assert resource["Efa"]["Enabled"] is (queue_spec.efa is not False)  # on unless the spec turns it off
        # GdrSupport "has no effect and should no longer be used" (ParallelCluster 3.0.2 release notes): EFA
        # turns GPUDirect RDMA on by itself wherever the instance type has it.
        assert "GdrSupport" not in resource["Efa"]
    for storage in config.get("SharedStorage", []):
        if storage["StorageType"] == "FsxLustre" and "FileSystemId" not in storage["FsxLustreSettings"]:
            assert storage["FsxLustreSettings"]["DeploymentType"] == "PERSISTENT_2"


def test_parallelcluster_capacity_block() -> None:
    spec, config = _pc_config(_config("p5en-capacity-block-parallelcluster"))
    queue = config["Scheduling"]["SlurmQueues"][0]
    assert queue["CapacityType"] == "CAPACITY_BLOCK"
    assert queue["CapacityReservationTarget"]["CapacityReservationId"] == spec.queues[0].capacity.reservation_id
    resource = queue["ComputeResources"][0]
    assert resource["MinCount"] == resource["MaxCount"] == 8
    assert queue["Networking"]["PlacementGroup"]["Enabled"] is False


def test_parallelcluster_reservation_has_no_placement_group() -> None:
    _, config = _pc_config(_config("p5-odcr-parallelcluster"))
    queue = config["Scheduling"]["SlurmQueues"][0]
    assert queue["CapacityType"] == "ONDEMAND"
    assert queue["CapacityReservationTarget"]["CapacityReservationId"] == "cr-0123456789abcdef0"
    assert queue["Networking"]["PlacementGroup"]["Enabled"] is False
    lustre = next(s for s in config["SharedStorage"] if s["StorageType"] == "FsxLustre")
    assert lustre["FsxLustreSettings"]["DeploymentType"] == "PERSISTENT_2"
    assert lustre["FsxLustreSettings"]["StorageCapacity"] == 4800


def test_parallelcluster_on_demand_efa_queue_gets_placement_group(tmp_path: Path) -> None:
    spec, rendered = _render_text(tmp_path, "name: od\nbackend: parallelcluster\n"
                                  "queues:\n  - {name: gpu, instance_type: p5.4xlarge, nodes: {min: 0, max: 2}}\n")
    config = rendered.one("pcluster_cluster").body
    queue = config["Scheduling"]["SlurmQueues"][0]
    assert queue["CapacityType"] == "ONDEMAND"
    assert "CapacityReservationTarget" not in queue
    assert queue["Networking"]["PlacementGroup"]["Enabled"] is True
    assert queue["ComputeResources"][0]["MinCount"] == 0
    assert queue["ComputeResources"][0]["MaxCount"] == 2
    assert config["HeadNode"]["Ssh"]["AllowedIps"] == SSH_CLOSED


def test_parallelcluster_queue_without_efa_has_no_placement_group() -> None:
    _, config = _pc_config(_config("quickstart-parallelcluster"))
    queue = config["Scheduling"]["SlurmQueues"][0]
    assert queue["ComputeResources"][0]["Efa"]["Enabled"] is False
    assert queue["Networking"]["PlacementGroup"]["Enabled"] is False


def test_parallelcluster_ssh_open_only_when_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, rendered = _render_text(tmp_path, "name: open\nbackend: parallelcluster\nnetwork:\n"
                                  "  ssh: {allowed_cidr: 0.0.0.0/0, key_name: 'my key: 1'}\n"
                                  "queues:\n  - {name: train, instance_type: p5.48xlarge, nodes: 2}\n")
    config = rendered.one("pcluster_cluster").body
    assert config["HeadNode"]["Ssh"] == {"KeyName": "my key: 1", "AllowedIps": "0.0.0.0/0"}
    monkeypatch.setenv("AWS_DEFAULT_REGION", spec.region)

    assert check_schema(spec.name, with_stand_ins(config), spec.region).errors == []


def test_parallelcluster_gpu_health_checks_off_without_gpus(tmp_path: Path) -> None:
    _, rendered = _render_text(tmp_path, "name: cpu\nbackend: parallelcluster\n"
                               "queues:\n  - {name: cpu, instance_type: c7i.8xlarge, nodes: 2}\n")
    queue = rendered.one("pcluster_cluster").body["Scheduling"]["SlurmQueues"][0]
    assert queue["HealthChecks"]["Gpu"]["Enabled"] is False
    assert queue["ComputeResources"][0]["Efa"]["Enabled"] is False
    assert queue["Networking"]["PlacementGroup"]["Enabled"] is False


def test_free_text_values_are_quoted(tmp_path: Path) -> None:
    """A key name or database user YAML would read as another type (or as syntax) stays a string."""
    text = ("name: quoted\nbackend: parallelcluster\nnetwork:\n  ssh: {key_name: 'yes'}\n"
            "queues:\n  - {name: train, instance_type: p5.48xlarge, nodes: 2}\n"
            "slurm:\n  accounting: true\n  database: {uri: 'db.example.com:3306', user: 'on', "
            "password_secret_arn: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:slurm # db'}\n")
    _, rendered = _render_text(tmp_path, text)
    config = rendered.one("pcluster_cluster").body
    assert config["HeadNode"]["Ssh"]["KeyName"] == "yes"
    database = config["Scheduling"]["SlurmSettings"]["Database"]
    assert database == {"Uri": "db.example.com:3306", "UserName": "on",
                        "PasswordSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurm # db"}
    _, rendered = _render_text(tmp_path, PCS_QUEUE.format(instance_type="p5.48xlarge").replace(
        "network: {", "network: {ssh: {key_name: 'no'}, "))
    assert rendered.one("launch_template", "train").body["LaunchTemplateData"]["KeyName"] == "no"


# --- tags on every resource ---------------------------------------------------------------------------

def _tag_sets(value: Any) -> list[dict[str, str]]:
    """Every tag collection in a document: EC2/IAM/FSx/pcluster ``Tags`` lists and PCS ``tags`` maps."""
    found: list[dict[str, str]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("Tags", "TagSet") and isinstance(item, list):
                found.append({t["Key"]: t["Value"] for t in item})
            elif key == "tags" and isinstance(item, dict):
                found.append(dict(item))
            else:
                found.extend(_tag_sets(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_tag_sets(item))
    return found


@pytest.mark.parametrize("path", CONFIGS, ids=CONFIG_IDS)
def test_every_resource_is_tagged(path: Path) -> None:
    spec = _load(path)
    for document in render(spec).documents:
        if document.kind == "kube_object":  # Kubernetes objects carry labels, not tags
            assert document.body["metadata"]["labels"]["fmcluster.io/cluster"] == spec.name, document.filename
            continue
        tag_sets = _tag_sets(document.body)
        assert tag_sets, f"{document.filename} has no tags"
        for tags in tag_sets:
            assert tags[CLUSTER_TAG] == spec.name, document.filename
            for key, value in spec.tags.items():
                assert tags[key] == value, document.filename
        if document.kind == "launch_template":
            kinds = [t["ResourceType"] for t in document.body["TagSpecifications"]]
            kinds += [t["ResourceType"] for t in document.body["LaunchTemplateData"]["TagSpecifications"]]
            assert kinds == ["launch-template", "instance"]
        if document.kind == "instance_profile":
            assert len(tag_sets) == 2  # the role and the instance profile


# --- references ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PCS_CONFIGS, ids=[p.stem for p in PCS_CONFIGS])
def test_references_name_documents(path: Path) -> None:
    """Every ``${kind.key.attribute}`` names a document of the same render (the graph's edges), or a value the
    session supplies (``network.*``, ``fmcluster.*``)."""
    from fmcluster.engine.graph import provider_of

    rendered = render(_load(path))
    names = {f"{d.kind}:{d.key}" for d in rendered.documents}
    for document in rendered.documents:
        for reference in references(document.body):
            provider = provider_of(reference)
            assert provider is None or provider in names, f"{document.filename}: ${{{reference}}}"


def _user_data(document: Document, values: dict[str, str] | None = None) -> str:
    """The launch template's user data as EC2 receives it: references filled, then base64-decoded."""
    body = resolve(document.body, values or {ref: stand_in(ref) for ref in references(document.body)})
    return base64.b64decode(body["LaunchTemplateData"]["UserData"]).decode()


def test_user_data_references_are_filled_before_encoding() -> None:
    """The Lustre mount in the node bootstrap names the file system AWS creates: its references must be
    visible to references()/resolve() (so the engine fills them), not hidden inside base64."""
    rendered = render(_load(_config("p6-b200-pcs")))
    for document in rendered.by_kind("launch_template"):
        assert {"fsx_lustre.lustre.dns_name", "fsx_lustre.lustre.mount_name"} <= references(document.body)
        values = {ref: stand_in(ref) for ref in references(document.body)}
        values |= {"fsx_lustre.lustre.dns_name": "fs-1.fsx.example", "fsx_lustre.lustre.mount_name": "mnt1"}
        user_data = _user_data(document, values)
        assert "/opt/fmcluster/mount_storage.sh lustre fs-1.fsx.example mnt1 /fsx" in user_data
        assert "${fsx_lustre" not in user_data
