"""fmcluster's PCS image lookup (``fmcluster.backends.pcs.images``) against the sandbox, which holds AWS's sample
AMIs as the PCS user guide publishes them ("Using sample Amazon Machine Images (AMIs) with AWS PCS")."""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster.backends.pcs.images import SAMPLE_CAUTION, find_images, supports
from fmcluster.errors import SpecError, UsageError
from fmcluster.spec import load_spec

SPEC = """\
name: imgtest
region: {region}
backend: pcs
head_node: {{instance_type: m7i.xlarge}}
queues:
  - {{name: gpu, instance_type: {instance_type}, nodes: 1}}
"""


def _spec(tmp_path: Path, extra: str = "", region: str = "us-east-1", instance_type: str = "p5.4xlarge"):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(region=region, instance_type=instance_type) + extra)
    return load_spec(path).spec


def test_default_slurm_finds_the_multi_version_sample_ami(sandbox, tmp_path):
    warnings: list[str] = []
    images = find_images(_spec(tmp_path), sandbox.client("ec2"), warn=warnings.append)
    [image] = images.values()
    assert image.name.startswith("aws-pcs-sample_ami-al2023-x86_64-") and "-slurm-" not in image.name
    assert (image.architecture, image.root_device_name, image.sample) == ("x86_64", "/dev/xvda", True)
    described = sandbox.client("ec2").describe_images(ImageIds=[image.ami_id])["Images"][0]
    assert "26.05" in described["Description"]
    assert len(warnings) == 1 and warnings[0].startswith(SAMPLE_CAUTION) and image.ami_id in warnings[0]


def test_each_architecture_gets_its_own_image(sandbox, tmp_path):
    # c7gn is Graviton (arm64); the login node m7i is x86_64.
    images = find_images(_spec(tmp_path, instance_type="c7gn.16xlarge"), sandbox.client("ec2"))
    assert set(images) == {"x86_64", "arm64"}
    assert images["arm64"].name.startswith("aws-pcs-sample_ami-al2023-arm64-")


def test_slurm_25_11_takes_the_newest_image_that_carries_it(sandbox, tmp_path):
    image = find_images(_spec(tmp_path, "slurm: {version: '25.11'}\n"), sandbox.client("ec2"))["x86_64"]
    listed = sandbox.client("ec2").describe_images(ImageIds=[image.ami_id])["Images"][0]
    assert supports(listed, "25.11")
    older = sandbox.client("ec2").describe_images(Owners=["amazon"], Filters=[
        {"Name": "name", "Values": ["aws-pcs-sample_ami-al2023-x86_64-slurm-25.11*"]}])["Images"]
    assert older and all(o["CreationDate"] < listed["CreationDate"] for o in older)


def test_no_sample_ami_outside_pcs_regions(sandbox, tmp_path):
    # ca-central-1 is not among the Regions the AWS General Reference lists for PCS.
    spec = _spec(tmp_path, region="ca-central-1")
    with pytest.raises(UsageError, match="no AWS PCS sample AMI for x86_64 supports Slurm 26.05 in ca-central-1"):
        find_images(spec, sandbox.client("ec2", "ca-central-1"))


def test_own_ami_gives_its_root_device_and_must_fit_every_architecture(sandbox, tmp_path):
    ec2 = sandbox.client("ec2")
    ubuntu = next(i for i in ec2.describe_images(Owners=["amazon"])["Images"]
                  if i.get("RootDeviceName") == "/dev/sda1" and i.get("Architecture") == "x86_64")
    warnings: list[str] = []
    images = find_images(_spec(tmp_path, f"image: {{ami: {ubuntu['ImageId']}}}\n"), ec2, warn=warnings.append)
    assert images["x86_64"].root_device_name == "/dev/sda1" and not images["x86_64"].sample
    assert warnings == []  # AWS's caution is about sample AMIs only
    # An x86_64 login node with arm64 compute cannot share one AMI: refused when the spec loads, before any call.
    with pytest.raises(SpecError, match="c7gn.16xlarge is arm64 but the login node .* and image.ami is one AMI"):
        _spec(tmp_path, f"image: {{ami: {ubuntu['ImageId']}}}\n", instance_type="c7gn.16xlarge")
    # Its AMI of the other architecture is still caught when it is looked up.
    path = tmp_path / "arm.yaml"
    path.write_text(SPEC.format(region="us-east-1", instance_type="c7gn.16xlarge").replace("m7i.xlarge", "m7g.large")
                    + f"image: {{ami: {ubuntu['ImageId']}}}\n")
    arm = load_spec(path).spec
    with pytest.raises(UsageError, match="is x86_64, but the spec's instance types also need arm64"):
        find_images(arm, ec2)


def test_supports_reads_name_before_26_05_and_description_after():
    assert supports({"Name": "aws-pcs-sample_ami-amzn2-x86_64-slurm-25.05-2025"}, "25.05")
    assert not supports({"Name": "aws-pcs-sample_ami-amzn2-x86_64-slurm-25.05-2025"}, "25.11")
    multi = {"Name": "aws-pcs-sample_ami-al2023-arm64-2026", "Description": "Slurm: 25.05, 25.11, 26.05."}
    assert supports(multi, "26.05") and supports(multi, "25.11") and not supports(multi, "24.11")
