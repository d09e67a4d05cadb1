"""The network fmcluster creates when the spec names no subnet, and the checks of a subnet the spec names.

Offline: the rendered documents (botocore's EC2 model, ParallelCluster's schema) and the load-time rules.
Sandbox: the installed ``fmcluster`` command creates a PCS cluster whose 32-interface p5.48xlarge node
registers (it sits in the private subnet behind the NAT gateway), and a ParallelCluster cluster; ``destroy``
leaves nothing tagged for either (EC2 describe calls by tag). Preflight against user-built VPCs.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from fixtures.lifecycle import PclusterCli, PcsCli, _ok, cli_fixture

from fmcluster.backends import registry
from fmcluster.backends.registry import render
from fmcluster.preflight import run_preflight
from fmcluster.spec import load_spec
from fmcluster.spec.models import Spec
from fmcluster.validate.requests import check_document, with_stand_ins

NETWORK_KINDS = {"vpc", "subnet", "internet_gateway", "elastic_ip", "nat_gateway", "route_table", "vpc_endpoint"}
TAG = "fmcluster:cluster"


def _load(tmp_path: Path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load_spec(path)


def _errors(tmp_path: Path, text: str) -> list[str]:
    from fmcluster.errors import SpecError

    with pytest.raises(SpecError) as caught:
        _load(tmp_path, text)
    return [str(p) for p in caught.value.problems]


P5 = "queues:\n  - {name: train, instance_type: p5.48xlarge, nodes: 2}\n"
P5_BLOCK = "queues:\n  - name: train\n    instance_type: p5.48xlarge\n    nodes: 2\n"


# -- rendering ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["pcs", "parallelcluster"])
def test_without_a_subnet_the_network_is_rendered_and_botocore_accepts_it(tmp_path, backend):
    spec = _load(tmp_path, f"name: net\nbackend: {backend}\n{P5}").spec
    rendered = render(spec)
    network = [d for d in rendered.documents if d.kind in NETWORK_KINDS]
    assert sorted(f"{d.kind}:{d.key}" for d in network) == [
        "elastic_ip:nat", "internet_gateway:cluster", "nat_gateway:cluster", "route_table:compute",
        "route_table:public", "subnet:compute", "subnet:public", "vpc:cluster", "vpc_endpoint:s3"]
    for document in network:
        assert check_document(document) == [], document.filename
        tags = {t["Key"]: t["Value"] for spec_ in _tag_specs(document.body) for t in spec_["Tags"]}
        assert tags["fmcluster:resource"] == f"{document.kind}:{document.key}"
        assert {"fmcluster:cluster", "fmcluster:region", "fmcluster:cluster-id"} <= set(tags)
    vpc = rendered.one("vpc", "cluster").body
    assert vpc["create"]["CidrBlock"] == "10.0.0.0/16"
    assert vpc["dns_hostnames"]["EnableDnsHostnames"] == {"Value": True}
    assert rendered.one("subnet", "compute").body["create"]["CidrBlock"] == "10.0.0.0/17"
    assert "public_ips" not in rendered.one("subnet", "compute").body
    assert rendered.one("subnet", "public").body["public_ips"]["MapPublicIpOnLaunch"] == {"Value": True}
    assert rendered.one("route_table", "compute").body["route"]["NatGatewayId"] == "${nat_gateway.cluster.id}"
    assert rendered.one("route_table", "public").body["route"]["GatewayId"] == "${internet_gateway.cluster.id}"
    assert rendered.one("vpc_endpoint", "s3").body["ServiceName"] == "com.amazonaws.us-east-1.s3"
    assert any("NAT gateway costs $0.045/h" in note for note in rendered.notes)


def _tag_specs(body):
    if isinstance(body, dict):
        if "TagSpecifications" in body:
            yield from body["TagSpecifications"]
        for value in body.values():
            if isinstance(value, dict):
                yield from _tag_specs(value)


def test_pcs_compute_goes_private_and_login_public(tmp_path):
    rendered = render(_load(tmp_path, f"name: net\nbackend: pcs\n{P5}").spec)
    assert rendered.one("compute_node_group", "train").body["subnetIds"] == ["${subnet.compute.id}"]
    assert rendered.one("compute_node_group", "login").body["subnetIds"] == ["${subnet.public.id}"]
    assert rendered.one("cluster").body["networking"]["subnetIds"] == ["${subnet.compute.id}"]
    assert rendered.one("security_group", "cluster").body["create"]["VpcId"] == "${vpc.cluster.id}"


def test_parallelcluster_head_goes_public_and_queues_private(tmp_path, monkeypatch):
    from fmcluster.backends.parallelcluster.config_checks import check_schema

    spec = _load(tmp_path, f"name: net\nbackend: parallelcluster\n{P5}").spec
    config = render(spec).one("pcluster_cluster").body
    assert config["HeadNode"]["Networking"]["SubnetId"] == "${subnet.public.id}"
    assert config["Scheduling"]["SlurmQueues"][0]["Networking"]["SubnetIds"] == ["${subnet.compute.id}"]
    monkeypatch.setenv("AWS_DEFAULT_REGION", spec.region)
    assert check_schema(spec.name, with_stand_ins(config), spec.region).errors == []


def test_vpc_cidr_splits_into_the_subnets(tmp_path):
    spec = _load(tmp_path, f"name: net\nbackend: pcs\nnetwork: {{vpc_cidr: 172.20.0.0/20}}\n{P5}").spec
    rendered = render(spec)
    assert rendered.one("vpc", "cluster").body["create"]["CidrBlock"] == "172.20.0.0/20"
    assert rendered.one("subnet", "compute").body["create"]["CidrBlock"] == "172.20.0.0/21"
    assert rendered.one("subnet", "public").body["create"]["CidrBlock"] == "172.20.8.0/24"


def test_a_named_subnet_creates_no_network(tmp_path):
    spec = _load(tmp_path, f"name: net\nbackend: pcs\nnetwork: {{subnet_id: subnet-0123456789abcdef0}}\n{P5}").spec
    assert not [d for d in render(spec).documents if d.kind in NETWORK_KINDS]


# -- load-time rules ------------------------------------------------------------------------------------------
def test_create_vpc_with_a_subnet_is_refused_at_its_line(tmp_path):
    errors = _errors(tmp_path, "name: net\nbackend: pcs\nnetwork:\n  subnet_id: subnet-0123456789abcdef0\n"
                               f"  create_vpc: true\n{P5}")
    assert any(":5:15: network.create_vpc: a created network has its own subnets" in e for e in errors), errors


def test_vpc_cidr_needs_a_created_network_and_a_usable_size(tmp_path):
    errors = _errors(tmp_path, "name: net\nbackend: pcs\nnetwork:\n  subnet_id: subnet-0123456789abcdef0\n"
                               f"  vpc_cidr: 10.1.0.0/16\n{P5}")
    assert any(":5:13: network.vpc_cidr: only a network fmcluster creates" in e for e in errors), errors
    errors = _errors(tmp_path, f"name: net\nbackend: pcs\nnetwork: {{vpc_cidr: 10.1.0.0/24}}\n{P5}")
    assert any("network.vpc_cidr: '10.1.0.0/24' is a /24" in e for e in errors), errors


def test_head_subnet_without_subnet_is_refused(tmp_path):
    errors = _errors(tmp_path, "name: net\nbackend: parallelcluster\nnetwork:\n"
                               f"  head_subnet_id: subnet-0123456789abcdef0\n{P5}")
    assert any(":4:19: network.head_subnet_id:" in e for e in errors), errors


def test_default_vpc_with_multi_interface_nodes_is_refused_on_pcs_and_warned_on_parallelcluster(tmp_path):
    text = f"network: {{create_vpc: false}}\n{P5}"
    errors = _errors(tmp_path, "name: net\nbackend: pcs\n" + text)
    assert any(":5:34: queues[0].instance_type: 'p5.48xlarge' launches with 32 network interfaces" in e
               and "PCS API to register" in e for e in errors), errors
    loaded = _load(tmp_path, "name: net\nbackend: parallelcluster\n" + text)
    assert any("queues[0].instance_type" in str(w) and "32 network interfaces" in str(w) for w in loaded.warnings)
    # single-interface nodes may use the default VPC
    loaded = _load(tmp_path, "name: net\nbackend: pcs\nnetwork: {create_vpc: false}\n"
                             "queues:\n  - {name: small, instance_type: p5.4xlarge, nodes: 1}\n")
    assert not [d for d in render(loaded.spec).documents if d.kind in NETWORK_KINDS]


# -- preflight on subnets the user built ----------------------------------------------------------------------
def _spec(backend: str, subnet: str) -> Spec:
    return Spec.model_validate({"name": f"net-{uuid.uuid4().hex[:8]}", "backend": backend,
                                "network": {"subnet_id": subnet},
                                "queues": [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 1}]})


def _check(sandbox, spec: Spec):
    results = run_preflight(spec, "us-east-1", lambda service: sandbox.client(service, "us-east-1"),
                            registry.get(spec.backend).checks)
    return next(r for r in results if r.name == "node network")


def test_preflight_passes_a_private_subnet_behind_a_nat_gateway(sandbox):
    network = sandbox.private_network()
    result = _check(sandbox, _spec("pcs", network["private_subnet"]))
    assert result.status == "passed" and "NAT gateway" in result.summary, result


def test_preflight_refuses_pcs_and_warns_parallelcluster_without_a_way_out(sandbox):
    network = sandbox.private_network(nat=False)
    result = _check(sandbox, _spec("pcs", network["private_subnet"]))
    assert result.status == "failed" and "could not register with PCS" in result.summary, result
    assert any(d.startswith("fix: ") for d in result.details)
    result = _check(sandbox, _spec("parallelcluster", network["private_subnet"]))
    assert result.status == "warning" and "no default route to a NAT gateway" in result.summary, result


def test_preflight_accepts_a_pcs_interface_endpoint_instead_of_nat(sandbox):
    network = sandbox.private_network(nat=False, pcs_endpoint=True)
    assert _check(sandbox, _spec("pcs", network["private_subnet"])).status == "passed"


def test_preflight_refuses_a_public_subnet_for_multi_interface_pcs_nodes(sandbox):
    ec2 = sandbox.client("ec2")
    default = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"][0]
    result = _check(sandbox, _spec("pcs", default["SubnetId"]))
    assert result.status == "failed" and "auto-assigns public IPv4 addresses" in result.summary, result


# -- create and destroy in the sandbox ------------------------------------------------------------------------
def _tagged(sandbox, name: str) -> dict[str, list[str]]:
    """Every networking resource tagged for the cluster that still exists (EC2 describe calls by tag)."""
    ec2 = sandbox.client("ec2")
    tag = [{"Name": f"tag:{TAG}", "Values": [name]}]

    def mine(items, key):
        return [i[key] for i in items if {t["Key"]: t["Value"] for t in i.get("Tags", [])}.get(TAG) == name
                and str(i.get("State", "available")).lower() not in ("deleted",)]

    return {kind: ids for kind, ids in {
        "vpcs": mine(ec2.describe_vpcs(Filters=tag)["Vpcs"], "VpcId"),
        "subnets": mine(ec2.describe_subnets(Filters=tag)["Subnets"], "SubnetId"),
        "internet_gateways": mine(ec2.describe_internet_gateways(Filters=tag)["InternetGateways"],
                                  "InternetGatewayId"),
        "addresses": mine(ec2.describe_addresses(Filters=tag)["Addresses"], "AllocationId"),
        "nat_gateways": mine(ec2.describe_nat_gateways(Filters=tag)["NatGateways"], "NatGatewayId"),
        "route_tables": mine(ec2.describe_route_tables(Filters=tag)["RouteTables"], "RouteTableId"),
        "vpc_endpoints": mine(ec2.describe_vpc_endpoints(Filters=tag)["VpcEndpoints"], "VpcEndpointId"),
        "security_groups": mine(ec2.describe_security_groups(Filters=tag)["SecurityGroups"], "GroupId"),
    }.items() if ids}


class P5PcsCli(PcsCli):
    def __init__(self, sandbox, tmp_path):
        super().__init__(sandbox, tmp_path)
        data = yaml.safe_load(self.spec.read_text())
        data["queues"] = [{"name": "train", "instance_type": "p5.48xlarge", "nodes": 1}]
        self.spec.write_text(yaml.safe_dump(data, sort_keys=False))


pcs_cli = cli_fixture(P5PcsCli)
pc_cli = cli_fixture(PclusterCli)


def test_pcs_without_subnet_creates_its_network_and_nodes_register(pcs_cli, sandbox):
    _ok(pcs_cli.create())
    ec2, pcs = sandbox.client("ec2"), sandbox.client("pcs")
    made = _tagged(sandbox, pcs_cli.name)
    assert {k: len(v) for k, v in made.items()} == {
        "vpcs": 1, "subnets": 2, "internet_gateways": 1, "addresses": 1, "nat_gateways": 1, "route_tables": 2,
        "vpc_endpoints": 1, "security_groups": 1}
    subnets = {s["SubnetId"]: s for s in ec2.describe_subnets(SubnetIds=made["subnets"])["Subnets"]}
    private = next(s for s in subnets.values() if not s["MapPublicIpOnLaunch"])
    cluster = pcs.get_cluster(clusterIdentifier=pcs_cli.name)["cluster"]
    assert cluster["status"] == "ACTIVE"
    groups = {g["name"]: pcs.get_compute_node_group(clusterIdentifier=cluster["id"],
                                                    computeNodeGroupIdentifier=g["id"])["computeNodeGroup"]
              for g in pcs.list_compute_node_groups(clusterIdentifier=cluster["id"])["computeNodeGroups"]}
    train = groups["train"]
    assert train["status"] == "ACTIVE" and train["subnetIds"] == [private["SubnetId"]]
    # A node that cannot reach PCS leaves errorInfo on its group (the sandbox's registration rule).
    assert not train.get("errorInfo"), train.get("errorInfo")
    nodes = [i for r in ec2.describe_instances(Filters=[
        {"Name": "tag:aws:pcs:compute-node-group-id", "Values": [train["id"]]},
        {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]]
    assert len(nodes) == 1 and nodes[0]["SubnetId"] == private["SubnetId"]
    # moto lists the first interfaces only; more than one is what takes the public address away
    assert len(nodes[0]["NetworkInterfaces"]) > 1 and not nodes[0].get("PublicIpAddress")
    login = groups["login"]
    assert login["subnetIds"] != [private["SubnetId"]] and subnets[login["subnetIds"][0]]["MapPublicIpOnLaunch"]

    diff = _ok(pcs_cli.run_in_process("diff", str(pcs_cli.spec), "--json"))  # the answer; create was the command
    network_changes = [c for c in __import__("json").loads(diff.stdout)["changes"]
                       if c["resource"].split(":")[0] in NETWORK_KINDS and c["action"] != "no-op"]
    assert network_changes == []

    _ok(pcs_cli.destroy_here())
    assert _tagged(sandbox, pcs_cli.name) == {}
    pcs_cli.assert_nothing_left()


def test_parallelcluster_without_subnet_creates_its_network_and_destroy_removes_it(pc_cli, sandbox):
    _ok(pc_cli.create())
    made = _tagged(sandbox, pc_cli.name)
    assert len(made["vpcs"]) == 1 and len(made["subnets"]) == 2 and len(made["nat_gateways"]) == 1
    heads = [i for r in sandbox.client("ec2").describe_instances(Filters=[
        {"Name": "tag:parallelcluster:cluster-name", "Values": [pc_cli.name]},
        {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]]
    assert heads and {i["SubnetId"] for i in heads} <= set(made["subnets"])
    _ok(pc_cli.destroy_here())  # in this process: what it leaves is read from the sandbox
    pc_cli.wait_until_gone()
    assert _tagged(sandbox, pc_cli.name) == {}


# -- extra IAM policies and security groups (issue 14 item 2) ----------------------------------------------
SUBNET = "subnet-0123456789abcdef0"
ACCESS = (f"network:\n  subnet_id: {SUBNET}\n  additional_security_groups: [sg-0123456789abcdef0]\n"
          "iam: {additional_policies: [arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess]}\n")


def test_policies_and_groups_render_on_parallelcluster(tmp_path, monkeypatch):
    from fmcluster.backends.parallelcluster.config_checks import check_schema

    text = ("name: acc\nbackend: parallelcluster\n" + ACCESS + P5_BLOCK +
            "    iam: {additional_policies: [arn:aws:iam::123456789012:policy/ecr-read]}\n")
    spec = _load(tmp_path, text).spec
    config = render(spec).one("pcluster_cluster").body
    head, queue = config["HeadNode"], config["Scheduling"]["SlurmQueues"][0]
    assert head["Networking"]["AdditionalSecurityGroups"] == ["sg-0123456789abcdef0"]
    assert {"Policy": "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"} in head["Iam"]["AdditionalIamPolicies"]
    assert queue["Networking"]["AdditionalSecurityGroups"] == ["sg-0123456789abcdef0"]
    assert queue["Iam"]["AdditionalIamPolicies"] == [{"Policy": "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"},
                                                     {"Policy": "arn:aws:iam::123456789012:policy/ecr-read"}]
    monkeypatch.setenv("AWS_DEFAULT_REGION", spec.region)
    assert check_schema(spec.name, with_stand_ins(config), spec.region).errors == []
    own = _load(tmp_path, text.replace("additional_security_groups", "security_groups")).spec
    assert render(own).one("pcluster_cluster").body["HeadNode"]["Networking"]["SecurityGroups"] == \
        ["sg-0123456789abcdef0"]


def test_policies_and_groups_render_on_pcs(tmp_path):
    rendered = render(_load(tmp_path, "name: acc\nbackend: pcs\n" + ACCESS + P5).spec)
    profile = rendered.one("instance_profile", "nodes").body
    assert "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess" in profile["managed_policies"]
    nics = rendered.one("launch_template", "train").body["LaunchTemplateData"]["NetworkInterfaces"]
    assert nics[0]["Groups"] == ["${security_group.cluster.id}", "sg-0123456789abcdef0"]
    assert all(n["Groups"] == ["${security_group.cluster.id}"] for n in nics[1:])
    login = rendered.one("launch_template", "login").body["LaunchTemplateData"]
    assert login["SecurityGroupIds"] == ["${security_group.cluster.id}", "sg-0123456789abcdef0"]
    for document in rendered.documents:
        assert check_document(document) == [], document.filename


def test_access_fields_a_backend_cannot_honour_are_refused(tmp_path):
    errors = _errors(tmp_path, f"name: acc\nbackend: pcs\nnetwork:\n  subnet_id: {SUBNET}\n"
                               f"  security_groups: [sg-0123456789abcdef0]\n{P5}")
    assert any(":5:20: network.security_groups: not supported on pcs" in e for e in errors), errors
    errors = _errors(tmp_path, f"name: acc\nbackend: pcs\n{P5_BLOCK}    iam: {{additional_policies: "
                               "[arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess]}\n")
    assert any("queues[0].iam: not supported on pcs" in e for e in errors), errors
    errors = _errors(tmp_path, "name: acc\nbackend: pcs\nnetwork:\n  additional_security_groups: "
                               f"[sg-0123456789abcdef0]\n{P5}")
    assert any("network.additional_security_groups: security groups belong to a VPC" in e for e in errors), errors
    errors = _errors(tmp_path, f"name: acc\nbackend: parallelcluster\nnetwork:\n  subnet_id: {SUBNET}\n"
                               "  security_groups: [sg-0123456789abcdef0]\n"
                               f"  additional_security_groups: [sg-0123456789abcdef1]\n{P5}")
    assert any("not both" in e for e in errors), errors
    errors = _errors(tmp_path, "name: acc\nbackend: pcs\niam: {additional_policies: [s3-read]}\n" + P5)
    assert any("iam.additional_policies[0]" in e for e in errors), errors


def test_pcs_policies_and_groups_attach_diff_and_outlive_destroy(sandbox, tmp_path):
    ec2, iam = sandbox.client("ec2"), sandbox.client("iam")
    network = sandbox.private_network()
    group = ec2.create_security_group(GroupName=f"db-{uuid.uuid4().hex[:6]}", Description="team database",
                                      VpcId=network["vpc"])["GroupId"]
    policy = iam.create_policy(PolicyName=f"data-read-{uuid.uuid4().hex[:6]}", PolicyDocument=(
        '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", '
        '"Resource": "*"}]}'))["Policy"]["Arn"]
    cli = PcsCli(sandbox, tmp_path)
    data = yaml.safe_load(cli.spec.read_text())
    data["network"] = {"subnet_id": network["private_subnet"], "additional_security_groups": [group]}
    data["iam"] = {"additional_policies": [policy, "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"]}
    cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        _ok(cli.create())
        from fmcluster.backends.pcs.render import node_role_name

        role = node_role_name(cli.name, "us-east-1")
        attached = {p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]}
        assert {policy, "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"} <= attached
        templates = ec2.describe_launch_templates(Filters=[{"Name": f"tag:{TAG}", "Values": [cli.name]}])
        for template in templates["LaunchTemplates"]:
            version = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
                "LaunchTemplateVersions"][0]["LaunchTemplateData"]
            groups = version.get("SecurityGroupIds") or version["NetworkInterfaces"][0]["Groups"]
            assert group in groups, (template["LaunchTemplateName"], groups)

        data["iam"] = {"additional_policies": ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"]}
        cli.spec.write_text(yaml.safe_dump(data, sort_keys=False))
        diff = __import__("json").loads(_ok(cli.run("diff", str(cli.spec), "--json")).stdout)
        change = next(c for c in diff["changes"] if c["resource"] == "instance_profile:nodes")
        assert change["action"] == "update" and policy in change["attributes"]["managed_policies"]["old"]
        _ok(cli.create())
        attached = {p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]}
        assert policy not in attached
    finally:
        _ok(cli.destroy())
    # fmcluster never deletes what it did not create
    assert iam.get_policy(PolicyArn=policy)["Policy"]["Arn"] == policy
    assert ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]["GroupId"] == group


def test_status_cost_counts_a_live_nat_gateway():
    from fmcluster.pricing.model import live_cost

    report = {"region": "us-east-1", "instances": [], "queues": [],
              "resources": [{"type": "nat_gateway", "status": "available"}, {"type": "vpc", "status": "available"}]}
    cost = live_cost(report)
    assert cost["usd_per_hour_now"] == cost["usd_per_hour_max"] == 0.05
    assert cost["usd_so_far"] == 0.0  # no creation time read: nothing claimed
    # one that has run for 10 hours: 10 x ($0.045 NAT + $0.005 public IPv4)
    import datetime as dt

    now = dt.datetime(2026, 12, 3, 12, tzinfo=dt.timezone.utc)
    report["resources"][0]["created"] = "2026-12-03 02:00:00+00:00"
    assert live_cost(report, now=now)["usd_so_far"] == 0.5
    report["region"] = "ap-northeast-1"
    assert "no price for NAT gateway in ap-northeast-1" in live_cost(report)["cost_basis"]
