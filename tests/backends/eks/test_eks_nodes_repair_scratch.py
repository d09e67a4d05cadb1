"""EKS queues' node repair (``queues[].auto_repair``) and NVMe scratch (``queues[].scratch_mount``), offline.

Scratch: a p5 queue's launch template carries nodeadm's NodeConfig in MIME multi-part user data, checked here
against nodeadm's API as typed by hand from awslabs/amazon-eks-ami ``nodeadm/api/v1alpha1/nodeconfig_types.go``
(no schema file is published). Repair: each queue's ``nodeRepairConfig`` (checked against botocore's EKS model by
fmcluster's request check), the monitoring agent add-on once per cluster, and ``plan`` saying reboot-not-replace on
a Capacity Block; each refusal exits 2 with its position.
"""

from __future__ import annotations

import email
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fmcluster.backends.registry import render
from fmcluster.spec import load_spec
from fmcluster.validate.requests import check_document

FMCLUSTER = str(Path(sys.executable).parent / "fmcluster")
SPEC = """\
name: nodes
backend: eks
queues:
  - name: train
    instance_type: p5.48xlarge
    nodes: 2
    scratch_mount: /scratch
    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}
  - name: spare
    instance_type: p5.48xlarge
    nodes: 1
  - name: cpu
    instance_type: m7i.2xlarge
    nodes: 1
"""
# nodeadm's v1alpha1 API (nodeconfig_types.go at awslabs/amazon-eks-ami 01348c0d): the members of each struct the
# NodeConfig below may use, and the LocalStorageStrategy enum ({RAID0, RAID10, Mount}).
NODECONFIG_MEMBERS = {
    (): {"apiVersion", "kind", "metadata", "spec"},
    ("spec",): {"cluster", "containerd", "instance", "kubelet", "featureGates"},
    ("spec", "instance"): {"localStorage"},
    ("spec", "instance", "localStorage"): {"strategy", "mountPath", "disabledMounts"},
}
STRATEGIES = {"RAID0", "RAID10", "Mount"}
# EKS User Guide, node-health-nma.adoc: XID 79 ("GPU has fallen off the bus") and NVLink errors repair by Replace.
REPLACED_BY_DEFAULT = {"NvidiaXID79Error", "NvidiaNVLinkError"}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("FMCLUSTER_HOME", str(state))
    return state


def _rendered(tmp_path: Path, text: str = SPEC):
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return render(load_spec(path).spec)


def _document(rendered, kind: str, key: str):
    return next(d for d in rendered.documents if (d.kind, d.key) == (kind, key))


def _members(node: dict, at: tuple[str, ...] = ()) -> None:
    assert set(node) <= NODECONFIG_MEMBERS[at], (at, set(node) - NODECONFIG_MEMBERS[at])
    for key, value in node.items():
        if isinstance(value, dict) and (*at, key) in NODECONFIG_MEMBERS:
            _members(value, (*at, key))


def test_a_p5_queue_s_scratch_is_a_nodeadm_raid0_in_mime_user_data(tmp_path: Path, home: Path) -> None:
    rendered = _rendered(tmp_path)
    data = _document(rendered, "launch_template", "train").body["LaunchTemplateData"]
    user_data = data["UserData"]["Fn::Base64"]  # sent base64-encoded once its references are filled
    message = email.message_from_string(user_data)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    # EKS User Guide, "Customize managed nodes with launch templates": nodeadm reads application/node.eks.aws parts
    (part,) = [p for p in message.walk() if p.get_content_type() == "application/node.eks.aws"]
    config = yaml.safe_load(part.get_payload())
    assert (config["apiVersion"], config["kind"]) == ("node.eks.aws/v1alpha1", "NodeConfig")
    _members(config)
    storage = config["spec"]["instance"]["localStorage"]
    assert storage == {"strategy": "RAID0", "mountPath": "/scratch"} and storage["strategy"] in STRATEGIES
    check_document(_document(rendered, "launch_template", "train"))  # botocore's EC2 request shape
    # setup-local-disks mounts the array at <mountPath>/0: render says where pods find it
    assert any("hostPath volume (path: /scratch/0" in note for note in rendered.notes), rendered.notes
    # m7i.2xlarge has no instance store: no user data at all (EKS's own bootstrap stays alone)
    assert "UserData" not in _document(rendered, "launch_template", "cpu").body["LaunchTemplateData"]


def test_node_repair_per_queue_and_the_agent_once(tmp_path: Path, home: Path) -> None:
    rendered = _rendered(tmp_path)
    train = _document(rendered, "eks_nodegroup", "train")
    config = train.body["nodeRepairConfig"]
    assert config["enabled"] is True
    overrides = config["nodeRepairConfigOverrides"]
    assert REPLACED_BY_DEFAULT <= {o["nodeUnhealthyReason"] for o in overrides}
    assert {o["repairAction"] for o in overrides} == {"Reboot"}
    assert all(set(o) == {"nodeMonitoringCondition", "nodeUnhealthyReason", "minRepairWaitTimeMins",
                          "repairAction"} for o in overrides)  # "each override requires all of the following fields"
    check_document(train)  # botocore's CreateNodegroup shape
    # On-Demand GPUs: EKS's own actions (Replace where documented); a CPU queue: off by default, said explicitly
    assert _document(rendered, "eks_nodegroup", "spare").body["nodeRepairConfig"] == {"enabled": True}
    assert _document(rendered, "eks_nodegroup", "cpu").body["nodeRepairConfig"] == {"enabled": False}
    agents = [d for d in rendered.documents if (d.kind, d.key) == ("eks_addon", "eks-node-monitoring-agent")]
    assert len(agents) == 1 and agents[0].body["addonName"] == "eks-node-monitoring-agent"
    check_document(agents[0])
    off = SPEC.replace("    nodes: 2\n", "    nodes: 2\n    auto_repair: false\n").replace(
        "    nodes: 1\n", "    nodes: 1\n    auto_repair: false\n")
    quiet = _rendered(tmp_path, off)
    assert not [d for d in quiet.documents if d.key == "eks-node-monitoring-agent"]
    assert _document(quiet, "eks_nodegroup", "train").body["nodeRepairConfig"] == {"enabled": False}


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"FMCLUSTER_HOME": str(home), "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true", "NO_COLOR": "1", "COLUMNS": "250"})
    return env


def test_plan_says_reboot_not_replace_on_the_capacity_block(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC, encoding="utf-8")
    result = subprocess.run([FMCLUSTER, "plan", str(path), "--json"], capture_output=True, text=True,
                            env=_env(home), timeout=120)
    assert result.returncode == 0, result.stderr
    notes = {q["name"]: q["repair_note"] for q in json.loads(result.stdout)["queues"]}
    assert "reboot-not-replace" in notes["train"] and "Capacity Block" in notes["train"]
    assert "reboot" not in notes["spare"] and notes["cpu"] is None


# Each refusal: the CLI's exit 2 and the position (1-based line:column of the value, counted by hand).
REFUSALS = [
    ("scratch-without-instance-store", SPEC.replace("    instance_type: m7i.2xlarge\n    nodes: 1\n",
                                                    "    instance_type: m7i.2xlarge\n    nodes: 1\n"
                                                    "    scratch_mount: /scratch\n"),
     "15:20", "queues[2].scratch_mount", "m7i.2xlarge has no instance-store NVMe"),
    ("auto-repair-contradicts-gpu-health-checks",
     "name: x\nbackend: pcs\nqueues:\n  - name: t\n    instance_type: p5.48xlarge\n    nodes: 1\n"
     "    gpu_health_checks: true\n    auto_repair: false\nslurm: {version: '26.05'}\n",
     "8:18", "queues[0].auto_repair", "contradicts gpu_health_checks: true"),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_refusals_exit_2_with_position(tmp_path: Path, home: Path, case) -> None:
    _, text, where, field, fragment = case
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run([FMCLUSTER, "plan", str(path)], capture_output=True, text=True, env=_env(home),
                            timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"spec.yaml:{where}: {field}:" in result.stderr and fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_status_lists_the_conditions_the_agent_sets_false() -> None:
    """A Node as the EKS node monitoring agent leaves it after a GPU fault (node-health-nma.adoc: condition
    AcceleratedHardwareReady, reason NvidiaXID79Error), typed by hand: status lists that condition, not the healthy
    ones nor the kubelet's Ready. The sandbox's Nodes carry only Ready (their status cannot be written), so this
    is read from a literal Node."""
    from fmcluster.backends.eks.cluster_view import unhealthy

    node = {"metadata": {"name": "ip-10-0-1-5.ec2.internal"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady"},
        {"type": "KernelReady", "status": "True", "reason": "KernelIsReady"},
        {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79Error",
         "lastTransitionTime": "2026-12-05T10:00:00Z"}]}}
    assert unhealthy(node) == [{"node": "ip-10-0-1-5.ec2.internal", "condition": "AcceleratedHardwareReady",
                                "reason": "NvidiaXID79Error", "since": "2026-12-05T10:00:00Z"}]
    node["status"]["conditions"][0]["status"] = "False"  # NotReady is the kubelet's, reported apart
    node["status"]["conditions"][2]["status"] = "True"
    assert unhealthy(node) == []
