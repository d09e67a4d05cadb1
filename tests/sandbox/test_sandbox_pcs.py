"""PCS emulator of the sandbox, driven by real boto3 clients over real HTTP.

A tiny threaded werkzeug server routes ``X-Amz-Target: AWSParallelComputingService.*`` to the emulator
and everything else to moto's server app in the same process, like the sandbox server does.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from http import HTTPStatus

import boto3
import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

from fmcluster_sandbox import model_check
from fmcluster_sandbox.faults import Faults
from fmcluster_sandbox.pcs import CLUSTER_TAG, NODE_GROUP_TAG, PcsEmulator

ACCOUNT = "123456789012"
REGION = "us-east-1"
CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Router:
    """WSGI app: PCS to the emulator, the rest to moto."""

    def __init__(self) -> None:
        self.moto = DomainDispatcherApplication(create_backend_app)
        self.emulator: PcsEmulator | None = None
        self.operations: set[str] = set()

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith("AWSParallelComputingService."):
            return self.moto(environ, start_response)
        operation = target.split(".", 1)[1]
        self.operations.add(operation)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        scope = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/", environ.get("HTTP_AUTHORIZATION", ""))
        region = scope.group(1) if scope else REGION
        status, headers, out = self.emulator.handle(operation, body, region, ACCOUNT)
        start_response(f"{status} {HTTPStatus(status).phrase}", list(headers.items()))
        return [out]


@pytest.fixture(scope="module")
def server():
    router = Router()
    httpd = make_server("127.0.0.1", 0, router, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield router, f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()


class Env:
    """Clients plus moto prerequisites of one test."""

    def __init__(self, router: Router, endpoint: str) -> None:
        self.faults = Faults()
        self.clock = FakeClock()
        self.emulator = router.emulator = PcsEmulator(self.faults, clock=self.clock)
        self.endpoint = endpoint
        self.pcs = self.client("pcs")
        self.raw = self.client("pcs", config=Config(parameter_validation=False, retries={"max_attempts": 1}))
        self.ec2 = self.client("ec2")
        self.iam = self.client("iam")
        subnets = self.ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])[
            "Subnets"
        ]
        # by zone: a and b sell every instance type these tests launch
        self.subnets = [s["SubnetId"] for s in sorted(subnets, key=lambda s: s["AvailabilityZone"])]
        self.vpc = subnets[0]["VpcId"]
        self.sg = self.ec2.create_security_group(GroupName="pcs", Description="pcs", VpcId=self.vpc)[
            "GroupId"
        ]
        self.lt = self.ec2.create_launch_template(
            LaunchTemplateName="pcs-nodes",
            # instance tags go in the template's data (CreateLaunchTemplate's own TagSpecifications tag the template)
            LaunchTemplateData={"ImageId": "ami-12c6146b", "SecurityGroupIds": [self.sg], "TagSpecifications": [
                {"ResourceType": "instance", "Tags": [{"Key": "Project", "Value": "fm"}]}]},
        )["LaunchTemplate"]["LaunchTemplateId"]
        self.profile = self.make_profile("AWSPCS-test", "AWSPCS-test-profile")

    def client(self, service: str, region: str = REGION, config: Config | None = None):
        return boto3.client(service, endpoint_url=self.endpoint, region_name=region, config=config, **CREDS)

    def make_profile(self, role: str, profile: str, path: str = "/") -> str:
        self.iam.create_role(RoleName=role, Path=path, AssumeRolePolicyDocument="{}")
        arn = self.iam.create_instance_profile(InstanceProfileName=profile, Path=path)["InstanceProfile"][
            "Arn"
        ]
        self.iam.add_role_to_instance_profile(InstanceProfileName=profile, RoleName=role)
        return arn

    def cluster(self, name: str = "demo", size: str = "SMALL", client=None, **extra) -> dict:
        params = {
            "clusterName": name,
            "scheduler": {"type": "SLURM", "version": "25.11"},
            "size": size,
            "networking": {"subnetIds": [self.subnets[0]], "securityGroupIds": [self.sg]},
            **extra,
        }
        return (client or self.pcs).create_cluster(**params)["cluster"]

    def node_group(self, cluster: str, name: str = "train", low: int = 0, high: int = 4, **extra) -> dict:
        params = {
            "clusterIdentifier": cluster,
            "computeNodeGroupName": name,
            "subnetIds": self.subnets[:2],
            "customLaunchTemplate": {"id": self.lt, "version": "$Latest"},
            "iamInstanceProfileArn": self.profile,
            "scalingConfiguration": {"minInstanceCount": low, "maxInstanceCount": high},
            "instanceConfigs": [{"instanceType": "p5.48xlarge"}],
            **extra,
        }
        return self.pcs.create_compute_node_group(**params)["computeNodeGroup"]

    def active_cluster(self, name: str = "demo", **extra) -> dict:
        cluster = self.cluster(name, **extra)
        assert cluster["status"] == "CREATING"
        assert self.pcs.get_cluster(clusterIdentifier=cluster["id"])["cluster"]["status"] == "ACTIVE"
        return cluster

    def instances(self, group_id: str) -> list[dict]:
        pages = self.ec2.describe_instances(
            Filters=[
                {"Name": f"tag:{NODE_GROUP_TAG}", "Values": [group_id]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )["Reservations"]
        return [i for r in pages for i in r["Instances"]]


@pytest.fixture
def env(server):
    router, endpoint = server
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST", data=b"")
    urllib.request.urlopen(request).read()
    return Env(router, endpoint)


def error(excinfo) -> tuple[str, int, dict]:
    response = excinfo.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"], response


# -- whole lifecycle, every operation ----------


def test_lifecycle_covers_every_operation(env, server):
    router, _ = server
    router.operations.clear()
    pcs = env.pcs
    cluster = env.cluster(tags={"team": "ml"})
    assert re.fullmatch(r"pcs_[a-z0-9]{10}", cluster["id"])
    assert cluster["arn"] == f"arn:aws:pcs:{REGION}:{ACCOUNT}:cluster/{cluster['id']}"
    assert cluster["networking"]["subnetIds"] == [env.subnets[0]]
    assert "endpoints" not in cluster
    got = pcs.get_cluster(clusterIdentifier="demo")["cluster"]
    assert got["status"] == "ACTIVE" and got["endpoints"][0]["type"] == "SLURMCTLD"
    assert got["createdAt"].year >= 2024 and got["slurmConfiguration"]["authKey"]["secretArn"]

    group = env.node_group(cluster["id"], low=2, high=4)
    assert group["arn"].endswith(f":computenodegroup/{group['id']}") and group["status"] == "CREATING"
    assert group["purchaseOption"] == "ONDEMAND" and group["launchTemplateMode"] == "CUSTOM"
    group = pcs.get_compute_node_group(clusterIdentifier="demo", computeNodeGroupIdentifier="train")
    assert group["computeNodeGroup"]["status"] == "ACTIVE"
    group_id = group["computeNodeGroup"]["id"]
    nodes = env.instances(group_id)
    assert len(nodes) == 2 and {n["SubnetId"] for n in nodes} == set(env.subnets[:2])
    tags = {t["Key"]: t["Value"] for t in nodes[0]["Tags"]}
    assert tags[CLUSTER_TAG] == cluster["id"] and tags["Project"] == "fm"

    queue = pcs.create_queue(
        clusterIdentifier="demo",
        queueName="qu1",
        computeNodeGroupConfigurations=[{"computeNodeGroupId": group_id}],
    )["queue"]
    assert queue["arn"].endswith(f":queue/{queue['id']}")
    assert pcs.get_queue(clusterIdentifier="demo", queueIdentifier="qu1")["queue"]["status"] == "ACTIVE"
    assert [c["name"] for c in pcs.list_clusters()["clusters"]] == ["demo"]
    assert [g["id"] for g in pcs.list_compute_node_groups(clusterIdentifier="demo")["computeNodeGroups"]] == [
        group_id
    ]
    assert [q["name"] for q in pcs.list_queues(clusterIdentifier=cluster["id"])["queues"]] == ["qu1"]

    updated = pcs.update_cluster(
        clusterIdentifier="demo", slurmConfiguration={"scaleDownIdleTimeInSeconds": 300}
    )["cluster"]
    assert updated["status"] == "UPDATING"
    assert (
        pcs.get_cluster(clusterIdentifier="demo")["cluster"]["slurmConfiguration"][
            "scaleDownIdleTimeInSeconds"
        ]
        == 300
    )
    pcs.update_queue(
        clusterIdentifier="demo", queueIdentifier="qu1", slurmConfiguration={"slurmCustomSettings": []}
    )
    pcs.update_compute_node_group(
        clusterIdentifier="demo",
        computeNodeGroupIdentifier="train",
        scalingConfiguration={"minInstanceCount": 1, "maxInstanceCount": 4},
    )
    pcs.tag_resource(resourceArn=cluster["arn"], tags={"env": "test"})
    pcs.untag_resource(resourceArn=cluster["arn"], tagKeys=["team"])
    assert pcs.list_tags_for_resource(resourceArn=cluster["arn"])["tags"] == {"env": "test"}

    node = env.instances(group_id)[0]["InstanceId"]
    reg = pcs.register_compute_node_group_instance(clusterIdentifier="demo", bootstrapId=node)
    assert reg["computeNodeGroupId"] == group_id and reg["endpoints"] and reg["sharedSecret"]
    with pytest.raises(ClientError) as excinfo:
        pcs.register_compute_node_group_instance(clusterIdentifier="demo", bootstrapId="i-0000000000000")
    assert error(excinfo)[:2] == ("AccessDeniedException", 403)

    pcs.delete_queue(clusterIdentifier="demo", queueIdentifier="qu1")
    pcs.delete_compute_node_group(clusterIdentifier="demo", computeNodeGroupIdentifier=group_id)
    assert pcs.list_compute_node_groups(clusterIdentifier="demo")["computeNodeGroups"] == []
    assert env.instances(group_id) == []
    pcs.delete_cluster(clusterIdentifier="demo")
    with pytest.raises(ClientError) as excinfo:
        pcs.get_cluster(clusterIdentifier="demo")
    code, status, response = error(excinfo)
    assert (code, status, response["resourceId"]) == ("ResourceNotFoundException", 404, "demo")
    model_ops = set(botocore.session.get_session().get_service_model("pcs").operation_names)
    assert router.operations == model_ops


def test_outputs_match_the_model(env):
    cluster = env.active_cluster(slurmConfiguration={"accounting": {"mode": "STANDARD"}})
    env.node_group(cluster["id"], low=1, high=2)
    for op, params in [
        ("GetCluster", {"clusterIdentifier": "demo"}),
        ("ListClusters", {}),
        ("GetComputeNodeGroup", {"clusterIdentifier": "demo", "computeNodeGroupIdentifier": "train"}),
    ]:
        status, headers, body = env.emulator.handle(op, json.dumps(params).encode(), REGION, ACCOUNT)
        assert status == 200 and headers["Content-Type"] == "application/x-amz-json-1.0"
        assert model_check.check("pcs", op, json.loads(body), output=True) == []
    endpoints = env.pcs.get_cluster(clusterIdentifier="demo")["cluster"]["endpoints"]
    assert {e["type"] for e in endpoints} == {"SLURMCTLD", "SLURMDBD"}
    env.pcs.update_cluster(clusterIdentifier="demo", slurmConfiguration={"slurmRest": {}})
    assert env.pcs.get_cluster(clusterIdentifier="demo")["cluster"]["slurmConfiguration"]["slurmRest"] == {
        "mode": "NONE"
    }
    env.pcs.update_cluster(clusterIdentifier="demo", slurmConfiguration={"slurmRest": {"mode": "STANDARD"}})
    endpoints = env.pcs.get_cluster(clusterIdentifier="demo")["cluster"]["endpoints"]
    assert {e["type"] for e in endpoints} == {"SLURMCTLD", "SLURMDBD", "SLURMRESTD"}


# -- validation ----------


def test_model_validation_reports_field_list(env):
    with pytest.raises(ClientError) as excinfo:
        env.raw.create_cluster(
            clusterName="1bad",
            scheduler={"type": "SLURM", "version": "25.11"},
            size="HUGE",
            networking={"subnetIds": ["bogus"], "securityGroupIds": [env.sg]},
            clientToken="short",
        )
    code, status, response = error(excinfo)
    assert (code, status, response["reason"]) == ("ValidationException", 400, "fieldValidationFailed")
    fields = {f["name"] for f in response["fieldList"]}
    assert fields == {"clusterName", "size", "networking.subnetIds[0]", "clientToken"}
    assert (
        excinfo.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"] == "ValidationException"
    )

    with pytest.raises(ClientError) as excinfo:
        env.raw.create_compute_node_group(
            clusterIdentifier="demo",
            computeNodeGroupName="train",
            subnetIds=[env.subnets[0]],
            iamInstanceProfileArn=env.profile,
            scalingConfiguration={"minInstanceCount": -1},
            instanceConfigs=[{"instanceType": "p5.48xlarge"}],
            nodeLifecycleActions={
                "stages": {"nodeReady": [{"name": "x", "scriptSource": {"scriptLocation": "ftp://x"}}]}
            },
        )
    fields = {f["name"] for f in error(excinfo)[2]["fieldList"]}
    assert fields == {
        "scalingConfiguration.minInstanceCount",
        "scalingConfiguration.maxInstanceCount",
        "nodeLifecycleActions.stages.nodeReady[0].scriptSource.scriptLocation",
    }
    status, _, body = env.emulator.handle("ListClusters", b'{"bogus": 1, "nextToken": 5}', REGION, ACCOUNT)
    names = {f["name"] for f in json.loads(body)["fieldList"]}
    assert status == 400 and names == {"bogus", "nextToken"}
    with pytest.raises(ClientError) as excinfo:
        env.raw.list_clusters(maxResults=500)
    assert error(excinfo)[2]["fieldList"][0]["name"] == "maxResults"


def test_unparseable_and_unknown_operation():
    emulator = PcsEmulator(Faults())
    status, headers, body = emulator.handle("CreateCluster", b"{not json", REGION, ACCOUNT)
    assert status == 400 and b"cannotParse" in body and headers["x-amzn-ErrorType"] == "ValidationException"
    status, _, body = emulator.handle("LaunchRockets", b"{}", REGION, ACCOUNT)
    assert status == 400 and b"unknownOperation" in body


@pytest.mark.parametrize("version", ["24.11", "25.05", "99.1"])
def test_eol_and_unknown_slurm_versions_refused(env, version):
    with pytest.raises(ClientError) as excinfo:
        env.pcs.create_cluster(
            clusterName="demo",
            scheduler={"type": "SLURM", "version": version},
            size="SMALL",
            networking={"subnetIds": [env.subnets[0]]},
        )
    code, _, response = error(excinfo)
    assert code == "ValidationException" and response["fieldList"][0]["name"] == "scheduler.version"


def test_reference_checks(env):
    def refused(call, field, code="ValidationException"):
        with pytest.raises(ClientError) as excinfo:
            call()
        got, _, response = error(excinfo)
        assert got == code
        if field:
            assert response["fieldList"][0]["name"] == field, response

    refused(
        lambda: env.cluster(networking={"subnetIds": ["subnet-0123456789abcdef0"]}), "networking.subnetIds[0]"
    )
    refused(
        lambda: env.cluster(
            networking={"subnetIds": [env.subnets[0]], "securityGroupIds": ["sg-0123456789abcdef0"]}
        ),
        "networking.securityGroupIds[0]",
    )
    refused(lambda: env.cluster(networking={"subnetIds": env.subnets[:2]}), "networking.subnetIds")
    env.active_cluster()
    refused(
        lambda: env.node_group("demo", customLaunchTemplate={"id": "lt-0123456789abcdef0", "version": "1"}),
        "customLaunchTemplate.id",
    )
    refused(
        lambda: env.node_group("demo", customLaunchTemplate={"id": env.lt, "version": "7"}),
        "customLaunchTemplate.version",
    )
    missing = f"arn:aws:iam::{ACCOUNT}:instance-profile/nope"
    refused(lambda: env.node_group("demo", iamInstanceProfileArn=missing), "iamInstanceProfileArn")
    wrong_role = env.make_profile("plain-role", "plain-profile")
    refused(lambda: env.node_group("demo", iamInstanceProfileArn=wrong_role), "iamInstanceProfileArn")
    refused(lambda: env.node_group("demo", subnetIds=["subnet-0123456789abcdef0"]), "subnetIds[0]")
    other_vpc = env.ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    foreign = env.ec2.create_subnet(VpcId=other_vpc, CidrBlock="10.9.1.0/24")["Subnet"]["SubnetId"]
    refused(lambda: env.node_group("demo", subnetIds=[foreign]), "subnetIds[0]")
    refused(lambda: env.node_group("nope"), None, "ResourceNotFoundException")
    # a /aws-pcs/ path is an accepted alternative to the AWSPCS name prefix
    by_path = env.make_profile("nodes", "nodes-profile", path="/aws-pcs/")
    assert env.node_group("demo", iamInstanceProfileArn=by_path)["status"] == "CREATING"
    refused(
        lambda: env.pcs.create_queue(
            clusterIdentifier="demo",
            queueName="que",
            computeNodeGroupConfigurations=[{"computeNodeGroupId": "pcs_missing123"}],
        ),
        None,
        "ResourceNotFoundException",
    )


# -- conflicts and quotas ----------


def test_conflicts(env):
    env.faults.update({"latency": {"pcs.cluster": 10, "pcs.compute_node_group": 10}})
    env.cluster()

    def conflict(call, resource_type):
        with pytest.raises(ClientError) as excinfo:
            call()
        code, status, response = error(excinfo)
        assert (code, status, response["resourceType"]) == ("ConflictException", 409, resource_type)

    conflict(
        lambda: env.pcs.update_cluster(clusterIdentifier="demo", scheduler={"version": "26.05"}), "cluster"
    )
    conflict(lambda: env.pcs.delete_cluster(clusterIdentifier="demo"), "cluster")
    conflict(lambda: env.node_group("demo"), "cluster")
    env.clock.now += 10
    group = env.node_group("demo")
    conflict(lambda: env.node_group("demo"), "computeNodeGroup")  # duplicate name
    conflict(
        lambda: env.pcs.delete_compute_node_group(
            clusterIdentifier="demo", computeNodeGroupIdentifier="train"
        ),
        "computeNodeGroup",
    )
    env.clock.now += 10
    env.pcs.create_queue(
        clusterIdentifier="demo",
        queueName="qu1",
        computeNodeGroupConfigurations=[{"computeNodeGroupId": group["id"]}],
    )
    conflict(lambda: env.pcs.delete_cluster(clusterIdentifier="demo"), "cluster")
    conflict(
        lambda: env.pcs.delete_compute_node_group(
            clusterIdentifier="demo", computeNodeGroupIdentifier="train"
        ),
        "computeNodeGroup",
    )
    env.pcs.delete_queue(clusterIdentifier="demo", queueIdentifier="qu1")
    env.pcs.delete_compute_node_group(clusterIdentifier="demo", computeNodeGroupIdentifier="train")
    conflict(
        lambda: env.pcs.update_compute_node_group(
            clusterIdentifier="demo",
            computeNodeGroupIdentifier="train",
            scalingConfiguration={"minInstanceCount": 0, "maxInstanceCount": 1},
        ),
        "computeNodeGroup",
    )
    assert (
        env.pcs.get_compute_node_group(clusterIdentifier="demo", computeNodeGroupIdentifier="train")[
            "computeNodeGroup"
        ]["status"]
        == "DELETING"
    )
    env.clock.now += 10
    env.pcs.delete_cluster(clusterIdentifier="demo")


def test_update_to_the_same_or_an_older_slurm_version_is_refused(env):
    """PCS guide, "Troubleshooting AWS PCS cluster version updates": an update to the version the cluster runs,
    or to an older one, is a ValidationException, even on an ACTIVE cluster with no node groups or queues."""
    env.active_cluster("newest", scheduler={"type": "SLURM", "version": "26.05"})
    for version in ("26.05", "25.11"):
        with pytest.raises(ClientError) as excinfo:
            env.pcs.update_cluster(clusterIdentifier="newest", scheduler={"version": version})
        code, status, response = error(excinfo)
        assert (code, status) == ("ValidationException", 400), response
        assert response["fieldList"][0]["name"] == "scheduler.version"
    assert env.pcs.get_cluster(clusterIdentifier="newest")["cluster"]["scheduler"]["version"] == "26.05"
    env.active_cluster("older")  # 25.11: a newer version is accepted
    env.pcs.update_cluster(clusterIdentifier="older", scheduler={"version": "26.05"})
    env.clock.now += 60
    assert env.pcs.get_cluster(clusterIdentifier="older")["cluster"]["scheduler"]["version"] == "26.05"


def test_one_creating_cluster_per_region(env):
    env.faults.update({"latency": {"pcs.cluster": 5}})
    env.cluster("first")
    with pytest.raises(ClientError) as excinfo:
        env.cluster("second")
    code, status, response = error(excinfo)
    assert (code, status, response["serviceCode"]) == ("ServiceQuotaExceededException", 402, "pcs")
    west_ec2 = env.client("ec2", "us-west-2")
    west_subnet = west_ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    west = env.client("pcs", "us-west-2").create_cluster(
        clusterName="second",
        scheduler={"type": "SLURM", "version": "25.11"},
        size="SMALL",
        networking={"subnetIds": [west_subnet]},
    )["cluster"]
    assert ":us-west-2:" in west["arn"]
    env.clock.now += 5
    assert env.cluster("second")["status"] == "CREATING"


def test_node_group_and_queue_quotas_and_size(env):
    cluster = env.active_cluster()
    for index in range(10):
        env.node_group(cluster["id"], name=f"ng{index}", high=3)
    with pytest.raises(ClientError) as excinfo:
        env.node_group(cluster["id"], name="ng10", high=1)
    assert error(excinfo)[0] == "ServiceQuotaExceededException"
    for index in range(10):
        env.pcs.create_queue(clusterIdentifier="demo", queueName=f"que{index}")
    with pytest.raises(ClientError) as excinfo:
        env.pcs.create_queue(clusterIdentifier="demo", queueName="que10")
    assert error(excinfo)[0] == "ServiceQuotaExceededException"
    # SMALL allows 32 instances in total: 10 groups x 3 = 30, raising one to 5 makes 32, to 6 makes 33
    env.pcs.update_compute_node_group(
        clusterIdentifier="demo",
        computeNodeGroupIdentifier="ng0",
        scalingConfiguration={"minInstanceCount": 0, "maxInstanceCount": 5},
    )
    env.pcs.get_cluster(clusterIdentifier="demo")
    with pytest.raises(ClientError) as excinfo:
        env.pcs.update_compute_node_group(
            clusterIdentifier="demo",
            computeNodeGroupIdentifier="ng1",
            scalingConfiguration={"minInstanceCount": 0, "maxInstanceCount": 4},
        )
    code, _, response = error(excinfo)
    assert code == "ServiceQuotaExceededException" and "SMALL" in response["message"]
    with pytest.raises(ClientError) as excinfo:
        env.pcs.update_compute_node_group(
            clusterIdentifier="demo",
            computeNodeGroupIdentifier="ng1",
            scalingConfiguration={"minInstanceCount": 3, "maxInstanceCount": 2},
        )
    assert error(excinfo)[2]["fieldList"][0]["name"] == "scalingConfiguration.minInstanceCount"


def test_size_limit_on_create(env):
    env.active_cluster()
    env.node_group("demo", name="nga", high=20)
    with pytest.raises(ClientError) as excinfo:
        env.node_group("demo", name="ngb", high=13)
    assert error(excinfo)[0] == "ServiceQuotaExceededException"
    assert env.node_group("demo", name="ngb", high=12)["scalingConfiguration"]["maxInstanceCount"] == 12


# -- idempotency, pagination, tags ----------


def test_client_token_idempotency(env):
    """A replayed clientToken returns the result of the original request (PCS API reference, clientToken:
    "the subsequent retries with the same client token return the result from the original successful
    request and they have no additional effect")."""
    first = env.cluster(clientToken="token-0001")
    again = env.cluster(clientToken="token-0001")
    assert again == first and again["status"] == "CREATING"
    assert env.pcs.get_cluster(clusterIdentifier="demo")["cluster"]["status"] == "ACTIVE"
    assert len(env.pcs.list_clusters()["clusters"]) == 1
    with pytest.raises(ClientError) as excinfo:
        env.cluster(size="LARGE", clientToken="token-0001")
    assert error(excinfo)[:2] == ("ConflictException", 409)
    group = env.node_group("demo", clientToken="token-0002")
    assert env.node_group("demo", clientToken="token-0002")["id"] == group["id"]
    env.pcs.delete_compute_node_group(
        clusterIdentifier="demo", computeNodeGroupIdentifier="train", clientToken="token-0003"
    )
    env.pcs.delete_compute_node_group(
        clusterIdentifier="demo", computeNodeGroupIdentifier="train", clientToken="token-0003"
    )


def test_pagination(env):
    for index in range(5):
        env.cluster(f"clu{index}")
    env.pcs.list_clusters()
    paginator = env.pcs.get_paginator("list_clusters")
    pages = list(paginator.paginate(PaginationConfig={"PageSize": 2}))
    assert [len(p["clusters"]) for p in pages] == [2, 2, 1]
    assert [c["name"] for p in pages for c in p["clusters"]] == [f"clu{i}" for i in range(5)]
    for index in range(3):
        env.pcs.create_queue(clusterIdentifier="clu0", queueName=f"que{index}")
    queues = env.pcs.get_paginator("list_queues").paginate(
        clusterIdentifier="clu0", PaginationConfig={"PageSize": 1}
    )
    assert [q["name"] for p in queues for q in p["queues"]] == ["que0", "que1", "que2"]
    with pytest.raises(ClientError) as excinfo:
        env.pcs.list_clusters(nextToken="garbage")
    assert error(excinfo)[0] == "ValidationException"


def test_tags(env):
    cluster = env.cluster(tags={"a": "1", "b": "2"})
    arn = cluster["arn"]
    assert env.pcs.list_tags_for_resource(resourceArn=arn)["tags"] == {"a": "1", "b": "2"}
    env.pcs.tag_resource(resourceArn=arn, tags={"c": "3", "a": "9"})
    env.pcs.untag_resource(resourceArn=arn, tagKeys=["b", "missing"])
    assert env.pcs.list_tags_for_resource(resourceArn=arn)["tags"] == {"a": "9", "c": "3"}
    with pytest.raises(ClientError) as excinfo:
        env.pcs.tag_resource(resourceArn=arn, tags={"aws:x": "1"})
    assert error(excinfo)[0] == "ValidationException"
    with pytest.raises(ClientError) as excinfo:
        env.pcs.list_tags_for_resource(resourceArn=f"arn:aws:pcs:{REGION}:{ACCOUNT}:cluster/pcs_0000000000")
    assert error(excinfo)[:2] == ("ResourceNotFoundException", 404)
    env.pcs.delete_cluster(clusterIdentifier="demo")
    env.pcs.list_clusters()
    with pytest.raises(ClientError):
        env.pcs.list_tags_for_resource(resourceArn=arn)


# -- static nodes, capacity, faults, latency ----------


def test_static_nodes_follow_min_count(env):
    env.active_cluster()
    group = env.node_group("demo", low=2, high=4)
    env.pcs.list_clusters()
    assert len(env.instances(group["id"])) == 2
    env.pcs.update_compute_node_group(
        clusterIdentifier="demo",
        computeNodeGroupIdentifier="train",
        scalingConfiguration={"minInstanceCount": 1, "maxInstanceCount": 4},
    )
    env.pcs.list_clusters()
    assert len(env.instances(group["id"])) == 1
    env.pcs.update_compute_node_group(
        clusterIdentifier="demo",
        computeNodeGroupIdentifier="train",
        scalingConfiguration={"minInstanceCount": 3, "maxInstanceCount": 4},
    )
    env.pcs.list_clusters()
    nodes = env.instances(group["id"])
    assert len(nodes) == 3 and {n["InstanceType"] for n in nodes} == {"p5.48xlarge"}
    env.pcs.delete_compute_node_group(clusterIdentifier="demo", computeNodeGroupIdentifier="train")
    env.pcs.list_clusters()
    assert env.instances(group["id"]) == []


def test_insufficient_capacity_fails_node_group(env):
    env.faults.update({"insufficient_capacity": ["p5.48xlarge"]})
    env.active_cluster()
    group = env.node_group("demo", low=2, high=2)
    got = env.pcs.get_compute_node_group(clusterIdentifier="demo", computeNodeGroupIdentifier=group["id"])
    got = got["computeNodeGroup"]
    assert got["status"] == "CREATE_FAILED"
    assert got["errorInfo"][0]["code"] == "InsufficientInstanceCapacity"
    assert env.instances(group["id"]) == []
    env.pcs.delete_compute_node_group(clusterIdentifier="demo", computeNodeGroupIdentifier="train")
    other = env.node_group(
        "demo",
        name="other",
        low=1,
        high=1,
        instanceConfigs=[{"instanceType": "p5.48xlarge"}, {"instanceType": "p4d.24xlarge"}],
    )
    env.pcs.list_clusters()
    assert [n["InstanceType"] for n in env.instances(other["id"])] == ["p4d.24xlarge"]


def test_forced_failures(env):
    env.faults.update({"fail_status": {"cluster:demo": "CREATE_FAILED", "queue:qu1": "UPDATE_FAILED"}})
    cluster = env.cluster()
    got = env.pcs.get_cluster(clusterIdentifier=cluster["id"])["cluster"]
    assert got["status"] == "CREATE_FAILED" and got["errorInfo"][0]["code"]
    with pytest.raises(ClientError) as excinfo:
        env.pcs.update_cluster(clusterIdentifier="demo", scheduler={"version": "26.05"})
    assert error(excinfo)[0] == "ConflictException"
    env.pcs.delete_cluster(clusterIdentifier="demo")  # failed resources may be deleted
    env.pcs.list_clusters()
    assert env.pcs.list_clusters()["clusters"] == []
    env.active_cluster("okay")
    env.pcs.create_queue(clusterIdentifier="okay", queueName="qu1")
    env.pcs.update_queue(
        clusterIdentifier="okay", queueIdentifier="qu1", slurmConfiguration={"slurmCustomSettings": []}
    )
    assert (
        env.pcs.get_queue(clusterIdentifier="okay", queueIdentifier="qu1")["queue"]["status"]
        == "UPDATE_FAILED"
    )


def test_real_clock_latency(server):
    router, endpoint = server
    faults = Faults(latency={"pcs.cluster": 0.2})
    router.emulator = PcsEmulator(faults)
    env_like = Env.__new__(Env)
    env_like.endpoint = endpoint
    pcs = Env.client(env_like, "pcs")
    ec2 = Env.client(env_like, "ec2")
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    cluster = pcs.create_cluster(
        clusterName="lat",
        scheduler={"type": "SLURM", "version": "25.11"},
        size="SMALL",
        networking={"subnetIds": [subnet]},
    )["cluster"]
    assert pcs.get_cluster(clusterIdentifier=cluster["id"])["cluster"]["status"] == "CREATING"
    time.sleep(0.25)
    assert pcs.get_cluster(clusterIdentifier=cluster["id"])["cluster"]["status"] == "ACTIVE"
    pcs.delete_cluster(clusterIdentifier="lat")
    assert pcs.get_cluster(clusterIdentifier="lat")["cluster"]["status"] == "DELETING"
    time.sleep(0.25)
    assert pcs.list_clusters()["clusters"] == []


def test_call_delay_is_honoured():
    faults = Faults(latency={"call.pcs.ListClusters": 0.15})
    emulator = PcsEmulator(faults)
    start = time.monotonic()
    status, _, _ = emulator.handle("ListClusters", b"{}", REGION, ACCOUNT)
    assert status == 200 and time.monotonic() - start >= 0.15
