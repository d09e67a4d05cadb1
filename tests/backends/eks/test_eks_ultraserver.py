"""A p6e-gb200 UltraServer queue on EKS, without a cluster: what `render` and `validate` make of it (NVIDIA's DRA
driver's ComputeDomain parts, the ARM NVIDIA image, the label its kubelet plugin selects on, a job example), the
refusals through the command (exit 2, the spec's position), and preflight's placement where AWS sells the type.

Facts typed by hand: "Use P6e-GB200 UltraServers with Amazon EKS" (EKS guide: amiType AL2023_ARM_64_NVIDIA, the
DRA driver's ComputeDomains for IMEX, the NVIDIA device plugin for GPUs); the DRA driver v0.4.1 render and its
upstream admission-policy bug (shared/reference/kubernetes-addons/README.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fixtures.eks_specs import GB200_SPEC

from fmcluster.backends.registry import render
from fmcluster.spec import load_spec

NAMESPACE = "dra-driver-nvidia-gpu"
PLUGIN_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:dra-driver-nvidia-gpu-service-account-kubeletplugin"


@pytest.fixture
def spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    path = tmp_path / "spec.yaml"
    path.write_text(GB200_SPEC)
    return path


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """``fmcluster ARGS`` through the command's own entry point, in this process: (exit code, stdout, stderr)."""
    from fmcluster.cli.app import main

    monkeypatch.setattr(sys, "argv", ["fmcluster", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def _objects(rendered) -> dict[tuple[str, str], dict]:
    return {(d.body["kind"], d.body["metadata"]["name"]): d.body for d in rendered.documents if d.kind == "kube_object"}


def test_render_holds_the_compute_domain_parts_and_an_example(spec_file: Path) -> None:
    rendered = render(load_spec(spec_file).spec, str(spec_file))
    objects = _objects(rendered)
    for crd in ("computedomains.resource.nvidia.com", "computedomaincliques.resource.nvidia.com"):
        assert ("CustomResourceDefinition", crd) in objects
    for device_class in ("compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"):
        assert objects[("DeviceClass", device_class)]["apiVersion"] == "resource.k8s.io/v1"
    assert objects[("Namespace", NAMESPACE)]
    # The kubelet plugin stays on the GPU nodes (AWS's values: required nvidia.com/gpu.present=true, the
    # nvidia.com/gpu toleration); the controller joins the other controllers on the system nodes.
    plugin = objects[("DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin")]["spec"]["template"]["spec"]
    assert "nodeSelector" not in plugin
    term = plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]
    controller = objects[("Deployment", "dra-driver-nvidia-gpu-controller")]["spec"]["template"]["spec"]
    assert controller["nodeSelector"] == {"fmcluster.io/node-role": "system"}
    # GPUs still from the device plugin
    assert ("DaemonSet", "nvidia-device-plugin-daemonset") in objects
    # the admission policy names the account the plugin runs as (published: ...-service-account, which none is)
    policy = objects[("ValidatingAdmissionPolicy", "resourceslices-policy-dra-driver-nvidia-gpu")]
    assert [c["expression"] for c in policy["spec"]["matchConditions"]] == [
        f'request.userInfo.username == "{PLUGIN_ACCOUNT}"']
    assert plugin["serviceAccountName"] == PLUGIN_ACCOUNT.rsplit(":", 1)[1]

    group = next(d.body for d in rendered.documents if (d.kind, d.key) == ("eks_nodegroup", "train"))
    assert (group["amiType"], group["capacityType"]) == ("AL2023_ARM_64_NVIDIA", "CAPACITY_BLOCK")
    assert group["labels"]["nvidia.com/gpu.present"] == "true"
    assert group["subnets"] == ["subnet-0123456789abcdef1"]

    (example,) = rendered.examples
    domain, pod = example.body
    assert (domain["apiVersion"], domain["kind"]) == ("resource.nvidia.com/v1beta1", "ComputeDomain")
    template = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    assert pod["spec"]["resourceClaims"] == [{"name": "imex-channel", "resourceClaimTemplateName": template}]
    container = pod["spec"]["containers"][0]["resources"]
    assert container["claims"] == [{"name": "imex-channel"}] and container["limits"]["nvidia.com/gpu"] == 4
    assert pod["spec"]["nodeSelector"] == {"fmcluster.io/queue": "train"}


def test_render_prints_and_validate_passes(spec_file: Path, monkeypatch, capsys) -> None:
    code, out, err = _run(monkeypatch, capsys, "render", str(spec_file))
    assert code == 0, err
    assert "--- # example-train-imex.yaml" in out and "kind: ComputeDomain" in out
    code, out, err = _run(monkeypatch, capsys, "validate", str(spec_file), "--json")
    assert code == 0, err
    results = {r["name"]: r["status"] for r in json.loads(out)["checks"]}
    assert (results["render"], results["kubernetes schemas"], results["botocore shapes"]) == ("passed",) * 3


@pytest.mark.parametrize("change, position, fragment", [
    ("capacity: {type: spot}", "10:22", "only inside UltraServers, bought as Capacity Blocks"),
    ("capacity: {type: on-demand}", "10:22", "not as on-demand"),
])
def test_gb200_bought_otherwise_is_refused(spec_file: Path, monkeypatch, capsys, change: str, position: str,
                                           fragment: str) -> None:
    spec_file.write_text(GB200_SPEC.replace("capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0, "
                                      "ultraserver: u-p6e-gb200x72}", change))
    code, _, err = _run(monkeypatch, capsys, "plan", str(spec_file))
    assert code == 2 and f"spec.yaml:{position}: queues[0].capacity.type" in err, err
    assert fragment in " ".join(err.split()) and "Traceback" not in err


@pytest.mark.parametrize("version, fragment", [("1.33", "served from Kubernetes 1.34"),
                                                ("1.32", "has no Dynamic Resource Allocation")])
def test_kubernetes_without_the_drivers_api_is_refused(spec_file: Path, monkeypatch, capsys, version: str,
                                                       fragment: str) -> None:
    spec_file.write_text(GB200_SPEC.replace("region: us-east-1\n",
                                      f"region: us-east-1\nkubernetes: {{version: '{version}'}}\n"))
    code, _, err = _run(monkeypatch, capsys, "plan", str(spec_file))
    assert code == 2 and "spec.yaml:4:23: kubernetes.version" in err, err
    assert fragment in " ".join(err.split())
