"""Every ParallelCluster example in ``configs/`` passes ParallelCluster's own validators
(``create_cluster(dryrun=True)`` through ``fmcluster validate``) against the sandbox, once the sandbox holds
what the example names: its capacity reservation, key pair, S3 bucket, and real subnets in place of the
example's placeholder ids (a private one for EFA queues, which cannot auto-assign public IPs).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from fixtures.lifecycle import CONFIGS, _fmcluster

EXAMPLES = sorted(p for p in CONFIGS.glob("*.yaml")
                  if yaml.safe_load(p.read_text()).get("backend") == "parallelcluster")


def _ed25519_public_key() -> str:
    # ubuntu2204 refuses RSA key pairs in ParallelCluster's KeyPairValidator.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def _default_vpc(ec2) -> dict:
    return ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]


def _zone_offering(ec2, instance_types: set[str]) -> str:
    zones = None
    for instance_type in instance_types:
        offers = ec2.describe_instance_type_offerings(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [instance_type]}])
        found = {o["Location"] for o in offers["InstanceTypeOfferings"]}
        zones = found if zones is None else zones & found
    assert zones, f"no AZ in the sandbox offers all of {sorted(instance_types)}"
    return sorted(zones)[0]


def _private_subnet(ec2, vpc: dict, zone: str) -> str:
    """A new subnet that does not give instances public IPs (EFA's multi-interface rule)."""
    network = ipaddress.ip_network(vpc["CidrBlock"])
    taken = [ipaddress.ip_network(s["CidrBlock"]) for s in
             ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc["VpcId"]]}])["Subnets"]]
    free = next(c for c in network.subnets(new_prefix=24) if not any(c.overlaps(t) for t in taken))
    subnet = ec2.create_subnet(VpcId=vpc["VpcId"], CidrBlock=str(free), AvailabilityZone=zone)["Subnet"]
    ec2.modify_subnet_attribute(SubnetId=subnet["SubnetId"], MapPublicIpOnLaunch={"Value": False})
    return subnet["SubnetId"]


def _public_subnet(ec2, vpc: dict, zone: str) -> str:
    subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc["VpcId"]]},
                                            {"Name": "availability-zone", "Values": [zone]},
                                            {"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    return subnets[0]["SubnetId"]


def _stage(sandbox, example: Path, tmp_path: Path) -> Path:
    """A copy of ``example`` whose every reference exists in the sandbox."""
    data = yaml.safe_load(example.read_text())
    data["name"] = f"{data['name']}-{uuid.uuid4().hex[:6]}"
    ec2 = sandbox.client("ec2", data["region"])
    vpc = _default_vpc(ec2)
    head = [data["head_node"]["instance_type"]] if "head_node" in data else []  # EKS has none
    zone = _zone_offering(ec2, {q["instance_type"] for q in data["queues"]} | set(head))
    network = data.setdefault("network", {})
    if "subnet_id" in network:
        efa = any(q.get("efa", True) for q in data["queues"])
        network["subnet_id"] = _private_subnet(ec2, vpc, zone) if efa else _public_subnet(ec2, vpc, zone)
    if "head_subnet_id" in network:
        network["head_subnet_id"] = _public_subnet(ec2, vpc, zone)

    key_name = (network.get("ssh") or {}).get("key_name")
    if key_name:
        try:
            ec2.import_key_pair(KeyName=key_name, PublicKeyMaterial=_ed25519_public_key().encode())
        except ec2.exceptions.ClientError as exc:
            if "Duplicate" not in str(exc):
                raise

    now = dt.datetime.now(dt.timezone.utc)
    for queue in data["queues"]:
        capacity = queue.get("capacity") or {}
        if capacity.get("reservation_id"):
            nodes = queue["nodes"] if isinstance(queue["nodes"], int) else queue["nodes"]["max"]
            block = capacity["type"] == "capacity-block"
            sandbox.control("POST", "/_fmcluster/capacity-reservations", {
                "reservation_id": capacity["reservation_id"], "instance_type": queue["instance_type"],
                "availability_zone": zone, "count": nodes, "region": data["region"],
                "type": "capacity-block" if block else "default", "state": "active",
                "start": (now - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                **({"end": (now + dt.timedelta(days=14)).strftime("%Y-%m-%dT%H:%M:%SZ")} if block else {}),
            })

    lustre = (data.get("storage") or {}).get("lustre") or {}
    s3 = sandbox.client("s3", data["region"])
    for path in (lustre.get("s3_import"), lustre.get("s3_export")):
        if path:
            bucket = path.removeprefix("s3://").split("/")[0]
            try:
                s3.create_bucket(Bucket=bucket)
            except s3.exceptions.ClientError as exc:
                if "BucketAlready" not in str(exc):
                    raise

    staged = tmp_path / example.name
    staged.write_text(yaml.safe_dump(data, sort_keys=False))
    return staged


def _create_openzfs_home(sandbox, staged: Path) -> str:
    """What ``fmcluster create`` makes before the cluster, from the rendered requests: the NFS security group
    and the OpenZFS file system, tagged for the cluster (``validate`` then judges its root volume)."""
    from fmcluster.backends.registry import render
    from fmcluster.engine.references import resolve
    from fmcluster.spec import load_spec

    spec = load_spec(staged).spec
    rendered = render(spec, str(staged))
    ec2 = sandbox.client("ec2", spec.region)
    vpc = ec2.describe_subnets(SubnetIds=[spec.network.subnet_id])["Subnets"][0]["VpcId"]
    cidr = ec2.describe_vpcs(VpcIds=[vpc])["Vpcs"][0]["CidrBlock"]
    group = rendered.one("security_group", "fsx_openzfs").body
    group_id = ec2.create_security_group(**{**group["create"], "VpcId": vpc})["GroupId"]
    values = {"security_group.fsx_openzfs.id": group_id, "network.vpc_ip_ranges": [{"CidrIp": cidr}],
              "fmcluster.cluster_id": "0123456789abcdef0123456789abcdef"}
    ec2.authorize_security_group_ingress(**resolve(group["ingress"], values))
    request = resolve(rendered.one("fsx_openzfs").body, values)
    fs = sandbox.client("fsx", spec.region).create_file_system(**request)["FileSystem"]
    return fs["OpenZFSConfiguration"]["RootVolumeId"]


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_passes_parallelclusters_validators(sandbox, tmp_path, example):
    staged = _stage(sandbox, example, tmp_path)
    _validate(sandbox, tmp_path, staged)


OPENZFS_EXAMPLES = [p for p in EXAMPLES if ((yaml.safe_load(p.read_text()).get("storage") or {}).get("home") or {})
                    .get("type") == "openzfs"]


@pytest.mark.parametrize("example", OPENZFS_EXAMPLES, ids=[p.stem for p in OPENZFS_EXAMPLES])
def test_example_with_its_openzfs_home_created_passes_the_fsx_validators(sandbox, tmp_path, example):
    """With the file system made as fmcluster makes it, ParallelCluster's validators judge the real root
    volume: DescribeVolumes, and ExistingFsxNetworkingValidator's NFS-port check of its security group."""
    staged = _stage(sandbox, example, tmp_path)
    root_volume = _create_openzfs_home(sandbox, staged)
    output = _validate(sandbox, tmp_path, staged)
    assert f"the existing root volume {root_volume}" in output.replace("\n", " "), output
    assert "not judged by ParallelCluster yet: SharedStorage" not in output, output


def _validate(sandbox, tmp_path: Path, staged: Path) -> str:
    env = {**os.environ, **sandbox.env, "FMCLUSTER_HOME": str(tmp_path / "state"), "NO_COLOR": "1",
           "COLUMNS": "250"}
    result = subprocess.run([*_fmcluster(), "validate", str(staged)], env=env, capture_output=True, text=True,
                            timeout=300, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    print(output)
    assert "Traceback" not in result.stderr, result.stderr
    validators = [line for line in result.stdout.splitlines() if "pcluster validators" in line]
    assert validators and validators[0].lstrip().startswith(("✓", "!")), output
    assert "ERROR:" not in output, output
    assert result.returncode == 0, output
    return output
