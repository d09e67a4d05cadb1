"""What each backend can honour of the storage, health-check, node-software and scheduling fields, and the
refusal (position, reason, what to do instead) where it cannot. Positions are 1-based, counted by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster.errors import SpecError
from fmcluster.spec import load_spec

QUEUE = "  - name: train\n    instance_type: p5.48xlarge\n    nodes: 2\n"
PC = "name: demo\nbackend: parallelcluster\nqueues:\n" + QUEUE  # 6 lines
PCS = "name: demo\nbackend: pcs\nqueues:\n" + QUEUE  # 6 lines

CASES = [
    ("lustre-id-8-hex", PC + "storage:\n  lustre: {existing_id: fs-01234567}\n", 8, 25,
     "storage.lustre.existing_id", "fs- and 17 hex digits"),
    ("home-volume-on-efs", PC + "storage:\n  home: {type: efs, existing_id: fsvol-0123456789abcdef0}\n", 8, 34,
     "storage.home.existing_id", "type efs takes an EFS file system id"),
    ("home-fs-on-openzfs", PC + "storage:\n  home: {existing_id: fs-0123456789abcdef0}\n", 8, 23,
     "storage.home.existing_id", "type openzfs takes an FSx for OpenZFS volume id"),
    ("home-existing-with-size", PC + "storage:\n  home: {existing_id: fsvol-0123456789abcdef0, capacity_gib: 512}\n",
     8, 62, "storage.home.capacity_gib", "an existing one keeps its size"),
    ("lustre-existing-with-size", PC + "storage:\n  lustre: {existing_id: fs-0123456789abcdef0, capacity_gib: 2400}\n",
     8, 61, "storage.lustre.capacity_gib", "keeps its own"),
    ("health-checks-explicit-on-25.11", PCS.replace("    nodes: 2\n", "    nodes: 2\n    gpu_health_checks: true\n")
     + "slurm: {version: '25.11'}\n", 7, 24, "queues[0].gpu_health_checks",
     "not supported on pcs with Slurm 25.11: PCS instance health checks need Slurm 26.05"),
    ("health-checks-on-cpu-pcs", "name: demo\nbackend: pcs\nqueues:\n  - name: cpu\n    instance_type: m7i.large\n"
     "    nodes: 1\n    gpu_health_checks: true\n", 7, 24, "queues[0].gpu_health_checks", "need NVIDIA GPUs"),
    ("health-checks-on-trainium-pc", "name: demo\nqueues:\n  - name: trn\n    instance_type: trn2.48xlarge\n"
     "    nodes: 1\n    gpu_health_checks: true\n", 6, 24, "queues[0].gpu_health_checks",
     "not supported on parallelcluster"),
    ("pcs-queue-setting-not-allowed", PCS.replace("    nodes: 2\n", "    nodes: 2\n    slurm_settings: {Nodes: x}\n"),
     7, 29, "queues[0].slurm_settings.Nodes", "not supported on pcs: Nodes is not among the queue settings"),
    ("pcs-cluster-setting-not-allowed", PCS + "slurm: {custom_settings: {SlurmctldHost: x}}\n", 7, 42,
     "slurm.custom_settings.SlurmctldHost", "not supported on pcs"),
    ("pc-queue-oversubscribe",
     PC.replace("    nodes: 2\n", "    nodes: 2\n    slurm_settings: {OverSubscribe: 'NO'}\n"), 7, 37,
     "queues[0].slurm_settings.OverSubscribe", "Use job_exclusive instead"),
    ("pc-cluster-prolog", PC + "slurm: {custom_settings: {Prolog: /x}}\n", 7, 35, "slurm.custom_settings.Prolog",
     "not supported on parallelcluster"),
    ("scratch-without-nvme", "name: demo\nqueues:\n  - name: cpu\n    instance_type: trn2.48xlarge\n    nodes: 1\n"
     "    scratch_mount: /scratch\n", None, None, "queues[0].scratch_mount", None),
    ("auto-repair-contradicts-gpu-health-checks",
     PC.replace("    nodes: 2\n", "    nodes: 2\n    gpu_health_checks: false\n    auto_repair: true\n"), 8, 18,
     "queues[0].auto_repair", "contradicts gpu_health_checks: false"),
    ("auto-repair-explicit-on-25.11", PCS.replace("    nodes: 2\n", "    nodes: 2\n    auto_repair: true\n")
     + "slurm: {version: '25.11'}\n", 7, 18, "queues[0].auto_repair",
     "Set slurm.version to 26.05, or auto_repair: false"),
    ("auto-repair-on-cpu-pcs", "name: demo\nbackend: pcs\nqueues:\n  - name: cpu\n    instance_type: m7i.large\n"
     "    nodes: 1\n    auto_repair: true\n", 7, 18, "queues[0].auto_repair", "need NVIDIA GPUs"),
    ("auto-repair-on-trainium-pc", "name: demo\nqueues:\n  - name: trn\n    instance_type: trn2.48xlarge\n"
     "    nodes: 1\n    auto_repair: true\n", 6, 18, "queues[0].auto_repair",
     "its only health check (HealthChecks.Gpu) runs on GPU instances"),
    # m7i.4xlarge: EBS only (EC2 DescribeInstanceTypes: no InstanceStorageInfo); fmcluster ships EC2's facts.
    ("eks-scratch-without-nvme", "name: demo\nbackend: eks\nqueues:\n  - name: cpu\n    instance_type: m7i.4xlarge\n"
     "    nodes: 1\n    scratch_mount: /scratch\n", 7, 20, "queues[0].scratch_mount",
     "m7i.4xlarge has no instance-store NVMe"),
    ("bootstrap-missing-file", PC + "bootstrap:\n  - {run: ./nope.sh}\n", 8, 11, "bootstrap[0].run", "no such file"),
    ("bootstrap-bad-url", PC + "bootstrap:\n  - {run: 'https://x/y.sh'}\n", 8, 11, "bootstrap[0].run",
     "give a local path or an s3:// URL"),
    ("bootstrap-bad-target", PC + "bootstrap:\n  - {run: s3://bucket/x.sh, on: everywhere}\n", 8, 33,
     "bootstrap[0].on", "compute"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_refused_with_position(tmp_path: Path, case) -> None:
    _, text, line, column, path, fragment = case
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(text)
    if fragment is None:  # a case whose facts depend on the catalog: refused or not, never silently dropped
        try:
            load_spec(spec_file)
        except SpecError as exc:
            assert any(p.path == path for p in exc.problems), exc.problems
        return
    with pytest.raises(SpecError) as raised:
        load_spec(spec_file)
    problems = [p for p in raised.value.problems if p.path == path]
    assert problems, raised.value.problems
    assert (problems[0].line, problems[0].column) == (line, column), problems[0]
    assert fragment in problems[0].message, problems[0].message


def test_default_health_checks_on_25_11_warn_instead_of_failing(tmp_path: Path) -> None:
    """The default (true) must not make every 25.11 spec fail: the GPU queues run without PCS's checks, and a
    warning at slurm.version says so and how to get them."""
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(PCS + "slurm: {version: '25.11'}\n")
    loaded = load_spec(spec_file)
    [warning] = [w for w in loaded.warnings if w.path == "slurm.version"]
    assert "health checks need Slurm 26.05" in warning.message and "train" in warning.message
    from fmcluster.backends.registry import render

    groups = render(loaded.spec, str(spec_file)).by_kind("compute_node_group")
    assert all("instanceHealthChecks" not in g.body for g in groups)


def test_health_checks_render_on_26_05_for_nvidia_only(tmp_path: Path) -> None:
    from fmcluster.backends.registry import render

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(PCS + "  - {name: cpu, instance_type: c7i.8xlarge, nodes: 1}\n")
    rendered = render(load_spec(spec_file).spec, str(spec_file))
    assert rendered.one("compute_node_group", "train").body["instanceHealthChecks"] == {
        "healthMonitoring": {"mode": "STANDARD"}, "deepHealthChecks": {"onStart": {"profile": "QUICK"}}}
    assert "instanceHealthChecks" not in rendered.one("compute_node_group", "cpu").body
    assert "instanceHealthChecks" not in rendered.one("compute_node_group", "login").body


def test_job_exclusive_defaults_follow_the_accelerator(tmp_path: Path) -> None:
    from fmcluster.backends.registry import render

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(PC + "  - {name: cpu, instance_type: c7i.8xlarge, nodes: 1}\n")
    config = render(load_spec(spec_file).spec, str(spec_file)).one("pcluster_cluster").body
    assert [q["JobExclusiveAllocation"] for q in config["Scheduling"]["SlurmQueues"]] == [True, False]


def test_bootstrap_on_key_is_not_yaml_true(tmp_path: Path) -> None:
    """YAML 1.1 reads a bare `on:` key as true; the spec reads it as the field `on`."""
    (tmp_path / "x.sh").write_text("#!/bin/bash\necho\n")
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(PC + "bootstrap:\n  - {run: ./x.sh, on: head}\n")
    assert load_spec(spec_file).spec.bootstrap[0].on == "head"


def test_pcs_size_counts_the_login_node(tmp_path: Path) -> None:
    """Queues reaching 32 nodes with the login group make 33: PCS's SMALL holds 32, so auto picks MEDIUM."""
    from fmcluster.backends.registry import render

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(PCS.replace("nodes: 2", "nodes: {min: 0, max: 32}"))
    assert render(load_spec(spec_file).spec, str(spec_file)).one("cluster").body["size"] == "MEDIUM"
    spec_file.write_text(PCS.replace("nodes: 2", "nodes: {min: 0, max: 31}"))
    assert render(load_spec(spec_file).spec, str(spec_file)).one("cluster").body["size"] == "SMALL"


def test_no_gdr_support_anywhere(tmp_path: Path) -> None:
    """GdrSupport "has no effect and should no longer be used" (ParallelCluster 3.0.2 release notes): not even
    on p5.4xlarge, which has no GPUDirect RDMA at all."""
    from fmcluster.backends.registry import render

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(PC + "  - {name: small, instance_type: p5.4xlarge, nodes: 1}\n")
    config = render(load_spec(spec_file).spec, str(spec_file)).one("pcluster_cluster").body
    for queue in config["Scheduling"]["SlurmQueues"]:
        assert "GdrSupport" not in queue["ComputeResources"][0]["Efa"]
