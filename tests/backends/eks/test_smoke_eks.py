"""``fmcluster smoke`` on EKS, offline: the MPIJob it submits (per scheduler, held to the MPI Operator's own CRD
schema), the script its launcher runs, and the report it makes of a launcher's log built from recorded nccl-tests
output (tests/data/nccl-tests/SOURCES.md). The sandbox run (the sandbox's MPI Operator runs the job on emulated p5
nodes: exit 0 healthy, exit 1 naming a faulted node's check, no MPIJob left) is in
tests/backends/eks/test_lifecycle_eks.py."""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fixtures.eks_specs import GB200_SPEC

from fmcluster.backends.eks.smoke import mpijob
from fmcluster.backends.eks.smoke import submit as smoke_eks
from fmcluster.backends.eks.software.validate import _closed
from fmcluster.backends.smoke import checks as smoke
from fmcluster.errors import UsageError
from fmcluster.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"


def mpijob_crd() -> dict[str, Any]:
    """The MPIJob CRD of the MPI Operator v0.8.0, as fmcluster ships the operator's release (held to upstream's
    sha256 by test_scheduler_releases.py)."""
    from fmcluster.backends.eks.software import releases

    (crd,) = [c for c in releases.crds(releases.MPI_OPERATOR) if c["metadata"]["name"] == "mpijobs.kubeflow.org"]
    return crd


@functools.cache
def _validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    crd = mpijob_crd()
    version = next(v for v in crd["spec"]["versions"] if f"{crd['spec']['group']}/{v['name']}" == api_version)
    assert crd["spec"]["names"]["kind"] == kind
    return jsonschema.Draft202012Validator(_closed(copy.deepcopy(version["schema"]["openAPIV3Schema"])))


def _schema_problems(document: dict[str, Any]) -> list[str]:
    """What an API server serving the CRD would refuse (strict field validation: unknown fields too). Metadata is
    ObjectMeta, which the CRD leaves open; kube_validate checks names and labels the same way for every object."""
    body = {key: value for key, value in document.items() if key != "metadata"}
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _validator(document["apiVersion"], document["kind"]).iter_errors(body)]


def _job(scheduler: str, nodes: int | None = None, image: str | None = None) -> tuple[dict[str, Any], Any]:
    spec = load_spec(ROOT / "configs" / f"p5-{scheduler}-eks.yaml").spec
    expect = smoke.expectations(spec, None, nodes)
    job = mpijob.smoke_job(spec, expect.queue, expect.nodes, image)
    return mpijob.manifest(spec, job, 600), expect


def _worker(document: dict[str, Any]) -> dict[str, Any]:
    return document["spec"]["mpiReplicaSpecs"]["Worker"]


@pytest.mark.parametrize("scheduler", ["kueue", "volcano", "kai"])
def test_the_mpijob_asks_for_whole_p5_nodes_and_passes_the_crd_schema(scheduler):
    document, _ = _job(scheduler)
    assert _schema_problems(document) == []
    worker = _worker(document)
    assert worker["replicas"] == 2  # the example's queue: 2 static p5.48xlarge
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    # p5.48xlarge: 8 H100 and 32 EFA interfaces (AWS's P5 page; the EKS EFA guide's p5 example asks for 32)
    assert (limits["nvidia.com/gpu"], limits["vpc.amazonaws.com/efa"]) == (8, 32)
    assert document["spec"]["slotsPerWorker"] == 8
    assert worker["template"]["spec"]["nodeSelector"] == {"fmcluster.io/queue": "train"}
    assert document["spec"]["runPolicy"]["activeDeadlineSeconds"] == 600
    assert document["metadata"]["namespace"] == "default"


def test_each_scheduler_gets_its_own_queue_marks():
    kueue, _ = _job("kueue")
    # Kueue: the LocalQueue fmcluster makes for queue "train" in namespace default (templates/eks/kueue.yaml.j2)
    assert kueue["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "train"
    assert "schedulerName" not in _worker(kueue)["template"]["spec"]
    assert "hugepages-2Mi" not in _worker(kueue)["template"]["spec"]["containers"][0]["resources"]["limits"]

    volcano, _ = _job("volcano")
    for role in ("Launcher", "Worker"):
        template = volcano["spec"]["mpiReplicaSpecs"][role]["template"]
        assert template["spec"]["schedulerName"] == "volcano"
        assert template["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "train"}
    assert volcano["spec"]["runPolicy"]["schedulingPolicy"] == {"queue": "train"}
    assert "kueue.x-k8s.io/queue-name" not in volcano["metadata"]["labels"]
    # AWS's nccl-tests MPIJob gives each worker 5120Mi of 2 MiB huge pages for libfabric
    assert _worker(volcano)["template"]["spec"]["containers"][0]["resources"]["limits"]["hugepages-2Mi"] == "5120Mi"

    kai, _ = _job("kai")
    assert kai["metadata"]["labels"]["kai.scheduler/queue"] == "train"
    for role in ("Launcher", "Worker"):
        template = kai["spec"]["mpiReplicaSpecs"][role]["template"]
        assert template["spec"]["schedulerName"] == "kai-scheduler"
        assert template["metadata"]["labels"]["kai.scheduler/queue"] == "train"


@pytest.mark.parametrize("scheduler", ["volcano", "kai"])
def test_a_queue_without_efa_asks_for_no_huge_pages(scheduler):
    """The 2 MiB pages are the EFA installer's, reserved only where EFA is attached: g6.xlarge has none ("EFA
    supported instance types" of the EC2 user guide leaves it out), so its workers ask for neither EFA nor pages
    (they would never be placed)."""
    spec = load_spec(ROOT / "configs" / f"p5-{scheduler}-eks.yaml").spec
    data = spec.model_dump(mode="json", exclude_none=True)
    data["queues"] = [{"name": "l4", "instance_type": "g6.xlarge", "nodes": 2}]
    spec = type(spec).model_validate(data)
    job = mpijob.smoke_job(spec, spec.queues[0], 2, None)
    limits = _worker(mpijob.manifest(spec, job, 600))["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "hugepages-2Mi" not in limits and "vpc.amazonaws.com/efa" not in limits
    assert limits["nvidia.com/gpu"] == 1  # g6.xlarge: one NVIDIA L4 (EC2 user guide, "Amazon EC2 G6 instances")


def test_the_schema_check_catches_a_wrong_field():
    document, _ = _job("kueue")
    document["spec"]["runPolicy"]["cleanupPolicy"] = "Running"  # the field is cleanPodPolicy
    document["spec"]["slotsPerWorker"] = "8"
    problems = _schema_problems(document)
    assert any("cleanupPolicy" in problem for problem in problems), problems
    assert any(problem.startswith("spec.slotsPerWorker:") for problem in problems), problems


def test_image_and_nodes_options():
    document, expect = _job("kueue", nodes=1, image="example.com/my/nccl:1")
    assert expect.nodes == 1 and _worker(document)["replicas"] == 1
    images = {c["image"] for role in ("Launcher", "Worker")
              for c in document["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"]}
    assert images == {"example.com/my/nccl:1"}
    default, _ = _job("kueue")
    assert _worker(default)["template"]["spec"]["containers"][0]["image"].startswith(
        "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.43.2-ofiv1.16.3-")
    with pytest.raises(UsageError, match="at most 2 nodes"):
        _job("kueue", nodes=3)


def test_a_queue_without_nvidia_gpus_is_refused_and_never_the_default():
    spec = load_spec(ROOT / "configs" / "p5-kueue-eks.yaml").spec
    data = spec.model_dump(mode="json", exclude_none=True)
    data["queues"].insert(0, {"name": "cpu", "instance_type": "m7i.2xlarge", "nodes": 1})
    spec = type(spec).model_validate(data)
    with pytest.raises(UsageError, match="no NVIDIA GPUs"):
        mpijob.smoke_job(spec, spec.queues[0], 1, None)
    assert mpijob.default_queue(spec) == "train"


def test_the_launcher_script_is_valid_bash():
    document, _ = _job("kueue")
    command = document["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["/bin/bash", "-c"]
    script = command[2]
    assert "-np 16 -N 8" in script and "all_reduce_perf -b 8M -e 4G" in script  # 2 nodes × 8 ranks
    assert subprocess.run(["bash", "-n", "-c", script], capture_output=True).returncode == 0
    if shutil.which("shellcheck"):
        checked = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout


# --- the report of a launcher's log ----------------------------------------------------------------------

def _launcher_log(nccl_file: str, rc: int = 0) -> str:
    """What the launcher prints on 2 × p5.48xlarge: each worker's facts, then all_reduce_perf's recorded output."""
    lines = []
    for pod in ("fmcluster-smoke-train-worker-0", "fmcluster-smoke-train-worker-1"):
        lines += [f"FMCLUSTER {pod} gpus 8", f"FMCLUSTER {pod} efa_provider 32", f"FMCLUSTER {pod} efa_devices 32"]
    lines.append("FMCLUSTER-NCCL-BEGIN /opt/nccl-tests/build/all_reduce_perf on 2 node(s) x 8 rank(s)")
    lines.append((DATA / "nccl-tests" / nccl_file).read_text())
    lines += ["FMCLUSTER-NCCL-END", f"FMCLUSTER - nccl ran {rc}"]
    return "\n".join(lines) + "\n"


def _report(outcome: smoke_eks.Outcome) -> dict[str, Any]:
    spec = load_spec(ROOT / "configs" / "p5-kueue-eks.yaml").spec
    expect = smoke.expectations(spec, None, None)
    return smoke_eks._report(spec, expect, mpijob.smoke_job(spec, expect.queue, 2, None), outcome)


def test_a_healthy_p5_run_passes_and_names_the_nodes():
    hosts = {"fmcluster-smoke-train-worker-0": "ip-10-0-1-1.ec2.internal",
             "fmcluster-smoke-train-worker-1": "ip-10-0-1-2.ec2.internal"}
    report = _report(smoke_eks.Outcome("SUCCEEDED", "done", log=_launcher_log("aws-samples-2x-p5.48xlarge.txt"),
                                       hosts=hosts))
    assert report["ok"] is True, report
    assert (report["job_id"], report["job_state"], report["output_file"]) == ("fmcluster-smoke-train", "SUCCEEDED",
                                                                               None)
    assert (report["scheduler"], report["nodes"]) == ("kueue", 2)
    assert [n["node"] for n in report["node_checks"]] == [
        "ip-10-0-1-1.ec2.internal (fmcluster-smoke-train-worker-0)",
        "ip-10-0-1-2.ec2.internal (fmcluster-smoke-train-worker-1)"]
    bandwidth = next(c for c in report["checks"] if c["name"] == "efa_bandwidth")
    # peak 487.26 GB/s (the recorded run's in-place 16 GiB row) against 3,200 Gbps = 400 GB/s of EFA
    assert (bandwidth["status"], bandwidth["found"], bandwidth["expected"]) == ("passed", 487.26, 400.0)
    assert "error" not in report


def test_a_slow_fabric_fails_the_bandwidth_check():
    # 2 × p4de.24xlarge peak at 78.33 GB/s: far below 70 % of a p5's 400 GB/s (as NCCL over TCP would be)
    report = _report(smoke_eks.Outcome("SUCCEEDED", "done", log=_launcher_log("aws-samples-2x-p4de.24xlarge.txt")))
    assert report["ok"] is False
    bandwidth = next(c for c in report["checks"] if c["name"] == "efa_bandwidth")
    assert (bandwidth["status"], bandwidth["found"]) == ("failed", 78.33)


def test_no_result_is_a_failure_with_one_reason():
    report = _report(smoke_eks.Outcome("TIMEOUT", "no result within the timeout (6 s); last seen: submitted"))
    assert report["ok"] is False and report["node_checks"] == []
    assert [c["name"] for c in report["checks"]] == ["job"]
    assert report["error"] == ("MPIJob default/fmcluster-smoke-train TIMEOUT: no result within the timeout (6 s); "
                               "last seen: submitted")


def test_a_job_that_never_reached_the_cluster_says_so():
    report = _report(smoke_eks.Outcome("NO_MPIJOB_KIND", "the cluster's API serves no MPIJob (kubeflow.org/v2beta1): "
                                                         "the MPI Operator is not installed", submitted=False))
    assert (report["ok"], report["job_state"]) == (False, "NO_MPIJOB_KIND")
    assert report["error"] == ("MPIJob default/fmcluster-smoke-train not submitted: the cluster's API serves no "
                               "MPIJob (kubeflow.org/v2beta1): the MPI Operator is not installed")




def test_on_an_ultraserver_queue_each_worker_claims_an_imex_channel(tmp_path):
    """The job gets its own ComputeDomain (AWS's P6e-GB200 page: "a ComputeDomain per workload job"), and each worker
    claims a channel from the ResourceClaimTemplate the DRA driver makes for it (the driver's docs/install.md), beside
    its 4 GPUs from the device plugin (p6e-gb200.36xlarge: 4 Blackwell GPUs)."""
    path = tmp_path / "spec.yaml"
    path.write_text(GB200_SPEC)
    spec = load_spec(path).spec
    expect = smoke.expectations(spec, None, None)
    job = mpijob.smoke_job(spec, expect.queue, expect.nodes, None)
    document = mpijob.manifest(spec, job, 600)
    assert _schema_problems(document) == []
    pod = _worker(document)["template"]["spec"]
    domain = mpijob.compute_domain(spec, job)
    assert (domain["apiVersion"], domain["kind"], domain["metadata"]["name"]) == (
        "resource.nvidia.com/v1beta1", "ComputeDomain", "fmcluster-smoke-train-imex")
    template = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    assert pod["resourceClaims"] == [{"name": "imex-channel", "resourceClaimTemplateName": template}]
    resources = pod["containers"][0]["resources"]
    assert resources["claims"] == [{"name": "imex-channel"}] and resources["limits"]["nvidia.com/gpu"] == 4
    # elsewhere no channel is claimed
    p5, _ = _job("kueue")
    assert "resourceClaims" not in _worker(p5)["template"]["spec"]
