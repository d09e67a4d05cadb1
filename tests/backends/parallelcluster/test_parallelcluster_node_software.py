"""Node software on ParallelCluster, end to end: ``software.containers`` and a ``bootstrap`` script render as
``CustomActions.OnNodeConfigured`` from the cluster's bucket (``CustomS3Bucket``, made by fmcluster, versioned
as ParallelCluster requires), the cluster reaches CREATE_COMPLETE in the sandbox with the scripts in that
bucket, and ``destroy`` leaves nothing tagged for the cluster.
"""

from __future__ import annotations

import hashlib

import yaml
from fixtures.lifecycle import PclusterCli, _ok, cli_fixture

from fmcluster.backends.registry import render
from fmcluster.backends.slurm.node_software import SCRIPTS_DIR
from fmcluster.spec import load_spec

SETUP = "#!/bin/bash\n# set NCCL knobs for this site\necho \"nccl setup $*\" >> /var/log/nccl-setup.log\n"


class SoftwareCli(PclusterCli):
    name_prefix = "e2e-sw"

    def __init__(self, sandbox, tmp_path):
        super().__init__(sandbox, tmp_path)
        (tmp_path / "setup-nccl.sh").write_text(SETUP)
        data = yaml.safe_load(self.spec.read_text())
        data["software"] = {"containers": True}
        data["bootstrap"] = [{"run": "./setup-nccl.sh", "args": ["--proto", "simple"], "on": "compute"}]
        self.spec.write_text(yaml.safe_dump(data, sort_keys=False))

    def buckets(self) -> list[str]:
        s3 = self.sandbox.client("s3")
        found = []
        for bucket in s3.list_buckets()["Buckets"]:
            try:
                tags = s3.get_bucket_tagging(Bucket=bucket["Name"])["TagSet"]
            except s3.exceptions.ClientError:
                continue
            if {"Key": "fmcluster:cluster", "Value": self.name} in tags:
                found.append(bucket["Name"])
        return found

    def has_cloud_resources(self) -> bool:
        return bool(self.stacks() or self.buckets())


cli = cli_fixture(SoftwareCli)


def test_render_puts_the_scripts_in_custom_actions(cli):
    rendered = render(load_spec(cli.spec).spec, str(cli.spec))
    config = rendered.one("pcluster_cluster").body
    assert config["CustomS3Bucket"] == "${bucket.scripts.name}"
    queue = config["Scheduling"]["SlurmQueues"][0]
    sequence = queue["CustomActions"]["OnNodeConfigured"]["Sequence"]
    assert sequence[0] == {"Script": "s3://${bucket.scripts.name}/fmcluster/scripts/containers.sh",
                           "Args": ["parallelcluster"]}
    assert sequence[-1] == {"Script": "s3://${bucket.scripts.name}/fmcluster/scripts/bootstrap-0-setup-nccl.sh",
                            "Args": ["--proto", "simple"]}
    head = config["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Sequence"]
    # the bootstrap is compute-only; every head node keeps Slurm's topology.conf (test_parallelcluster_topology.py)
    assert [s["Script"].rsplit("/", 1)[1] for s in head] == ["containers.sh", "slurm_topology.py"]
    bucket = rendered.one("bucket", "scripts").body
    assert bucket["versioning"]["VersioningConfiguration"]["Status"] == "Enabled"
    assert {o["Key"] for o in bucket["objects"]} == {"fmcluster/scripts/containers.sh",
                                                     "fmcluster/scripts/bootstrap-0-setup-nccl.sh",
                                                     "fmcluster/scripts/slurm_topology.py"}


def test_create_uploads_the_scripts_and_destroy_removes_the_bucket(cli):
    _ok(cli.create())
    [stack] = cli.stacks()
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack
    [bucket] = cli.buckets()
    s3 = cli.sandbox.client("s3")
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="fmcluster/")["Contents"]}
    assert keys == {"fmcluster/scripts/containers.sh", "fmcluster/scripts/bootstrap-0-setup-nccl.sh",
                    "fmcluster/scripts/slurm_topology.py"}
    body = s3.get_object(Bucket=bucket, Key="fmcluster/scripts/containers.sh")["Body"].read()
    assert hashlib.sha256(body).digest() == hashlib.sha256((SCRIPTS_DIR / "containers.sh").read_bytes()).digest()
    assert s3.get_object(Bucket=bucket, Key="fmcluster/scripts/bootstrap-0-setup-nccl.sh")["Body"].read().decode() \
        == SETUP
    # the stack ParallelCluster built was given the bucket and the scripts from it
    template = cli.sandbox.client("cloudformation").get_template(StackName=cli.name)["TemplateBody"]
    assert bucket in str(template)
    # a re-run changes nothing; an edited script is uploaded again
    (cli.spec.parent / "setup-nccl.sh").write_text(SETUP + "echo again\n")
    _ok(cli.create())
    assert s3.get_object(Bucket=bucket, Key="fmcluster/scripts/bootstrap-0-setup-nccl.sh")["Body"].read().decode() \
        .endswith("echo again\n")
    _ok(cli.destroy())
    cli.wait_until_gone()
    assert cli.buckets() == []
