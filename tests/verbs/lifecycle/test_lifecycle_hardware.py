"""End to end in the sandbox: a queue of an instance type outside the catalog (g5.12xlarge), whose GPUs and EFA
come from DescribeInstanceTypes, created and destroyed on both backends by the installed command. The offline steps
around it (plan, render, validate) answer in this process, as does the Trainium cluster's create and destroy."""

from __future__ import annotations

import base64
import json

import yaml
from fixtures.lifecycle import PclusterCli, PcsCli, _ok, cli_fixture

pcs_cli = cli_fixture(PcsCli)
pcluster_cli = cli_fixture(PclusterCli)


def _g5_spec(cli, backend: str, network: dict | None = None) -> None:
    data = {"name": cli.name, "backend": backend, "region": "us-east-1",
            "queues": [{"name": "infer", "instance_type": "g5.12xlarge", "nodes": 1}]}
    if network:
        data["network"] = network
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))


def test_g5_queue_on_pcs(pcs_cli, sandbox):
    _g5_spec(pcs_cli, "pcs")
    plan = json.loads(_ok(pcs_cli.run_in_process("plan", str(pcs_cli.spec), "--json")).stdout)
    assert (plan["queues"][0]["gpus"], plan["queues"][0]["facts_source"]) == (4, "ec2")
    _ok(pcs_cli.create())
    assert pcs_cli.status()["status"] == "ACTIVE"
    ec2 = sandbox.client("ec2")
    templates = ec2.describe_launch_templates(Filters=[{"Name": "tag:fmcluster:cluster", "Values": [pcs_cli.name]}])
    infer = next(t for t in templates["LaunchTemplates"] if t["LaunchTemplateName"].endswith("-infer"))
    data = ec2.describe_launch_template_versions(LaunchTemplateId=infer["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    # EC2: g5.12xlarge has one network card and one EFA interface (MaximumEfaInterfaces 1)
    assert [(n["NetworkCardIndex"], n.get("InterfaceType")) for n in data["NetworkInterfaces"]] == [(0, "efa")]
    _ok(pcs_cli.destroy())
    pcs_cli.assert_nothing_left()


def test_g5_queue_on_parallelcluster(pcluster_cli, sandbox):
    network = sandbox.private_network()
    # ParallelCluster lays EFA on a single-card type as a primary plus an efa-only interface: no public IP there.
    _g5_spec(pcluster_cli, "parallelcluster", {"subnet_id": network["private_subnet"],
                                               "head_subnet_id": network["public_subnet"]})
    rendered = next(d for d in yaml.safe_load_all(_ok(pcluster_cli.run_in_process("render",
                                                                                     str(pcluster_cli.spec))).stdout)
                    if d and "Scheduling" in d)  # the config, then the node scripts' bucket
    queue = rendered["Scheduling"]["SlurmQueues"][0]
    assert queue["HealthChecks"]["Gpu"]["Enabled"] is True
    assert queue["ComputeResources"][0]["Efa"]["Enabled"] is True
    validated = _ok(pcluster_cli.run_in_process("validate", str(pcluster_cli.spec)))
    assert "pcluster validators" in validated.stdout
    _ok(pcluster_cli.create())
    assert pcluster_cli.status()["backend_status"] == "CREATE_COMPLETE"
    _ok(pcluster_cli.destroy())
    pcluster_cli.wait_until_gone()
    pcluster_cli.assert_nothing_left()


def test_a_layout_only_ec2_knows_is_read_before_the_rules_judge_it(pcs_cli):
    """p6e-gb200's EFA layout (moto lacks the type; the catalog holds it, from ParallelCluster's launch template
    code): with an endpoint the rendered PCS launch template is the one EC2's answer describes, 16 EFA cards,
    efa-only on the odd cards whose InterfaceTypes allow nothing else."""
    data = {"name": pcs_cli.name, "backend": "pcs", "region": "us-east-1",
            "head_node": {"instance_type": "m7g.2xlarge"},
            "queues": [{"name": "train", "instance_type": "p6e-gb200.36xlarge", "nodes": 18,
                        "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0",
                                     "ultraserver": "u-p6e-gb200x72"}}]}
    pcs_cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    documents = list(yaml.safe_load_all(_ok(pcs_cli.run_in_process("render", str(pcs_cli.spec))).stdout))
    template = next(d for d in documents if d and d.get("LaunchTemplateName", "").endswith("-train"))
    interfaces = template["LaunchTemplateData"]["NetworkInterfaces"]
    assert [(nic["NetworkCardIndex"], nic.get("InterfaceType")) for nic in interfaces] == [(0, None)] + [
        (card, "efa-only" if card % 2 else "efa") for card in range(1, 17)]


def test_trainium_node_group_installs_neuron_first(pcs_cli, sandbox):
    """A Trainium queue on AWS's PCS sample AMIs (no Neuron driver): its node group's user data installs Neuron
    before anything else, and the cluster comes and goes like any other."""
    data = {"name": pcs_cli.name, "backend": "pcs", "region": "us-east-1",
            "queues": [{"name": "train", "instance_type": "trn1.32xlarge", "nodes": 1}]}
    pcs_cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    created = _ok(pcs_cli.create_here())
    assert "carry no Neuron driver: fmcluster installs it" in created.stderr
    ec2 = sandbox.client("ec2")
    templates = ec2.describe_launch_templates(Filters=[{"Name": "tag:fmcluster:cluster", "Values": [pcs_cli.name]}])
    train = next(t for t in templates["LaunchTemplates"] if t["LaunchTemplateName"].endswith("-train"))
    user_data = base64.b64decode(ec2.describe_launch_template_versions(LaunchTemplateId=train["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]).decode()
    steps = [line for line in user_data.splitlines() if line.startswith("/opt/fmcluster/")]
    assert steps[0] == "/opt/fmcluster/neuron.sh", steps
    assert pcs_cli.status()["status"] == "ACTIVE"
    _ok(pcs_cli.destroy_here())
    pcs_cli.assert_nothing_left()
