"""``fmcluster.preflight``: every bad case fails with its fix; a good spec passes.

Everything runs real boto3 against the sandbox over HTTP, reservations included: On-Demand Capacity
Reservations are made with ``ec2.create_capacity_reservation``, and Capacity Blocks (which cannot be bought
in a sandbox), expired and future ones through the control route ``POST /_fmcluster/capacity-reservations``.
Each test uses its own reservation ids, and cancels the ODCRs it made (AWS cannot cancel a Capacity
Block; a seeded one stays behind under an id no other test uses).
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from fixtures.preflight import REGION, by_name, fixes_of, preflight_spec, private_subnet, run_checks

from fmcluster.backends import registry
from fmcluster.preflight import preflight_failed, run_preflight

NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def _failed(results) -> dict:
    return {r.name: r for r in results if r.status == "failed"}


def _default_subnet(sandbox, zone: str) -> str:
    ec2 = sandbox.client("ec2", REGION)
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                            {"Name": "availability-zone", "Values": [zone]}])["Subnets"]
    return subnets[0]["SubnetId"]


# --- the good case -----------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["pcs", "parallelcluster"])
def test_good_spec_passes_every_check(sandbox, backend):
    ec2, s3 = sandbox.client("ec2", REGION), sandbox.client("s3", REGION)
    key = f"pf-key-{uuid.uuid4().hex[:6]}"
    bucket = f"pf-bucket-{uuid.uuid4().hex[:8]}"
    ec2.create_key_pair(KeyName=key)
    s3.create_bucket(Bucket=bucket)
    spec = preflight_spec(backend=backend, network={"ssh": {"key_name": key}},
                          queues=[{"name": "train", "instance_type": "p5.48xlarge", "nodes": {"min": 0, "max": 4}},
                                  {"name": "spot", "instance_type": "p5.48xlarge", "nodes": {"min": 0, "max": 1},
                                   "capacity": {"type": "spot"}}],
                          storage={"lustre": {"s3_import": f"s3://{bucket}/data"}})
    try:
        results = run_checks(sandbox, spec)
    finally:
        ec2.delete_key_pair(KeyName=key)
        s3.delete_bucket(Bucket=bucket)
    assert not preflight_failed(results), [(r.name, r.summary, r.details) for r in results if r.status != "passed"]
    # Node.js older than the maintained lines (this machine has 20) is a warning, never a failure.
    assert all(r.status == "passed" or r.name == "node.js" for r in results), \
        [(r.name, r.status, r.summary) for r in results]
    names = {r.name for r in results}
    assert {"credentials", "subnet", "offering p5.48xlarge", "offering m7i.2xlarge", "vcpu quota L-417A185B",
            "vcpu quota L-7212CCBC", "vcpu quota L-1216C47A", "key pair", f"bucket {bucket}"} <= names
    assert "123456789012" in by_name(results, "credentials").summary
    assert "fmcluster creates a new VPC" in by_name(results, "subnet").summary
    assert "need 768" in by_name(results, "vcpu quota L-417A185B").summary  # 4 × 192 vCPUs
    if backend == "pcs":
        assert {"pcs size", "pcs clusters"} <= names
    else:
        assert {"parallelcluster", "node.js"} <= names


# --- network -----------------------------------------------------------------------------------------

def test_missing_subnet_fails_with_fix(sandbox):
    results = run_checks(sandbox, preflight_spec(network={"subnet_id": "subnet-0123456789abcdef0"}))
    subnet = _failed(results)["subnet"]
    assert "InvalidSubnetID.NotFound" in subnet.summary
    assert any("network.subnet_id" in f for f in fixes_of(subnet))
    assert by_name(results, "instance types").status == "skipped"


def test_type_not_offered_in_the_subnets_zone_lists_where_it_is(sandbox):
    # moto offers p5en.48xlarge in us-east-1a and us-east-1c only.
    subnet = _default_subnet(sandbox, "us-east-1b")
    spec = preflight_spec(network={"subnet_id": subnet},
                          queues=[{"name": "train", "instance_type": "p5en.48xlarge", "nodes": 2}])
    results = run_checks(sandbox, spec)
    offering = _failed(results)["offering p5en.48xlarge"]
    assert offering.summary == "p5en.48xlarge is not offered in us-east-1b"
    assert "offered in: us-east-1a, us-east-1c" in offering.details
    assert any("us-east-1a or us-east-1c" in f for f in fixes_of(offering))
    assert by_name(results, "offering m7i.2xlarge").status == "passed"


def test_missing_key_pair_fails_with_fix(sandbox):
    results = run_checks(sandbox, preflight_spec(network={"ssh": {"key_name": "no-such-key"}}))
    key = _failed(results)["key pair"]
    assert "InvalidKeyPair.NotFound" in key.summary
    assert any("create-key-pair --key-name no-such-key" in f for f in fixes_of(key))


def test_missing_bucket_fails_with_fix(sandbox):
    results = run_checks(sandbox, preflight_spec(storage={"lustre": {"s3_import": "s3://pf-no-such-bucket/data"}}))
    bucket = _failed(results)["bucket pf-no-such-bucket"]
    assert "does not exist" in bucket.summary
    assert any("aws s3 mb s3://pf-no-such-bucket" in f for f in fixes_of(bucket))


# --- quotas ------------------------------------------------------------------------------------------

def test_low_vcpu_quota_fails_with_the_increase_to_request(sandbox):
    sandbox.quotas({"region": REGION, "L-417A185B": 0})
    results = run_checks(sandbox, preflight_spec())
    quota = _failed(results)["vcpu quota L-417A185B"]
    assert quota.summary == "Running On-Demand P instances: 0 vCPUs, need 384"
    assert any(f.startswith("request an increase to 384 vCPUs for Running On-Demand P instances")
               and "--quota-code L-417A185B --desired-value 384" in f for f in fixes_of(quota))
    assert set(_failed(results)) == {"vcpu quota L-417A185B"}


def test_reserved_queues_do_not_count_against_the_on_demand_quota(sandbox, reservations):
    sandbox.quotas({"region": REGION, "L-417A185B": 0})
    rid = reservations.block()
    subnet = private_subnet(sandbox, "us-east-1a")
    spec = preflight_spec(network={"subnet_id": subnet},
                          queues=[{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2,
                                   "capacity": {"type": "capacity-block", "reservation_id": rid}}])
    results = run_checks(sandbox, spec)
    assert not preflight_failed(results), [(r.name, r.summary) for r in results if r.status == "failed"]
    assert "vcpu quota L-417A185B" not in {r.name for r in results}
    standard = by_name(results, "vcpu quota L-1216C47A")
    assert any("does not count against the On-Demand vCPU quota" in d for d in standard.details)


# --- capacity reservations and Capacity Blocks (the sandbox's own EC2 emulation) ---------------------

class Reservations:
    """Makes ODCRs (CreateCapacityReservation) and seeds Capacity Blocks (control route) in the sandbox,
    each with a fresh id; :meth:`cancel_all` cancels the ODCRs afterwards."""

    def __init__(self, sandbox):
        self._sandbox = sandbox
        self._ec2 = sandbox.client("ec2", REGION)
        self.made: list[str] = []

    def odcr(self, *, instance_type="p5.48xlarge", zone="us-east-1a", count=2, match="targeted") -> str:
        made = self._ec2.create_capacity_reservation(
            InstanceType=instance_type, InstancePlatform="Linux/UNIX", AvailabilityZone=zone, InstanceCount=count,
            InstanceMatchCriteria=match)["CapacityReservation"]
        self.made.append(made["CapacityReservationId"])
        return made["CapacityReservationId"]

    def block(self, *, instance_type="p5.48xlarge", zone="us-east-1a", count=2, state="active", kind="capacity-block",
              start: dt.datetime | None = None, end: dt.datetime | None = None, available: int | None = None) -> str:
        start = start or NOW - dt.timedelta(hours=1)
        if end is None and kind == "capacity-block":
            end = start + dt.timedelta(days=1)
        payload = {"instance_type": instance_type, "availability_zone": zone, "count": count, "type": kind,
                   "state": state, "start": start.isoformat(), "region": REGION,
                   "reservation_id": unknown_rid()}
        if end is not None:
            payload["end"] = end.isoformat()
        if available is not None:
            payload["available"] = available
        rid = self._sandbox.control("POST", "/_fmcluster/capacity-reservations", payload)["reservation_id"]
        if kind != "capacity-block":
            self.made.append(rid)
        return rid

    def cancel_all(self) -> None:
        for rid in self.made:
            if self._ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0][
                    "State"] == "active":
                self._ec2.cancel_capacity_reservation(CapacityReservationId=rid)


def unknown_rid() -> str:
    """A reservation id no other test uses (AWS's form: cr- and 17 hex digits)."""
    return "cr-" + uuid.uuid4().hex[:17]


@pytest.fixture
def reservations(sandbox):
    made = Reservations(sandbox)
    try:
        yield made
    finally:
        made.cancel_all()


def _reserved(sandbox, rid: str, *, kind="capacity-block", nodes=2, instance_type="p5.48xlarge", zone="us-east-1a"):
    spec = preflight_spec(network={"subnet_id": private_subnet(sandbox, zone)},
                          queues=[{"name": "train", "instance_type": instance_type, "nodes": nodes,
                                   "capacity": {"type": kind, "reservation_id": rid}}])
    results = run_checks(sandbox, spec)
    return results, by_name(results, "reservation train")


def test_good_capacity_block_passes(sandbox, reservations):
    rid = reservations.block()
    results, check = _reserved(sandbox, rid)
    assert check.status == "passed", check
    assert check.summary == f"Capacity Block {rid}: 2 × p5.48xlarge in us-east-1a, active"
    assert any(d.endswith("hours left; instances stop at "
                          f"{(NOW + dt.timedelta(hours=23)).strftime('%Y-%m-%d %H:%M UTC')}") for d in check.details)
    assert not preflight_failed(results)


def test_good_odcr_passes(sandbox, reservations):
    rid = reservations.odcr(count=4)
    _, check = _reserved(sandbox, rid, kind="reservation", nodes=4)
    assert check.status == "passed", check
    assert check.summary == f"capacity reservation {rid}: 4 × p5.48xlarge in us-east-1a, active"


@pytest.mark.parametrize(("match", "said"), [
    ("targeted", "is targeted: only launches that name it (as this queue does) use it"),
    ("open", "is open: other p5.48xlarge launches in us-east-1a can take its slots as well"),
])
def test_odcr_says_whether_it_is_open_or_targeted(sandbox, reservations, match, said):
    rid = reservations.odcr(count=2, match=match)
    _, check = _reserved(sandbox, rid, kind="reservation", nodes=2)
    assert check.status == "passed", check
    assert f"{rid} {said}" in check.details


def test_unknown_reservation_fails(sandbox):
    rid = unknown_rid()
    _, check = _reserved(sandbox, rid)
    assert check.status == "failed"
    assert "InvalidCapacityReservationId.NotFound" in check.summary
    assert any("queues[0].capacity.reservation_id" in f and "describe-capacity-reservations" in f
               for f in fixes_of(check))


def test_too_small_reservation_fails(sandbox, reservations):
    rid = reservations.odcr(count=2)
    _, check = _reserved(sandbox, rid, kind="reservation", nodes=4)
    assert check.status == "failed"
    assert check.summary == f"{rid} holds 2 instances, queue train goes up to 4"
    assert "set queues[0].nodes to at most 2, or reserve 4 instances" in fixes_of(check)


def test_busy_reservation_warns(sandbox, reservations):
    rid = reservations.block(kind="default", count=4, available=1)
    _, check = _reserved(sandbox, rid, kind="reservation", nodes=4)
    assert check.status == "warning", check
    assert check.summary.startswith(f"{rid} has 1 of 4 instances free now")


def test_cancelled_reservation_fails(sandbox, reservations):
    rid = reservations.odcr(count=2)
    sandbox.client("ec2", REGION).cancel_capacity_reservation(CapacityReservationId=rid)
    _, check = _reserved(sandbox, rid, kind="reservation")
    assert check.status == "failed"
    assert check.summary == f"{rid} is cancelled"
    assert any("create-capacity-reservation" in f for f in fixes_of(check))


def test_capacity_block_queue_pointing_at_an_odcr_fails(sandbox, reservations):
    _, check = _reserved(sandbox, reservations.odcr(), kind="capacity-block")
    assert check.status == "failed"
    assert "is an On-Demand Capacity Reservation, not a Capacity Block" in check.summary
    assert any("capacity.type: reservation" in f for f in fixes_of(check))


def test_odcr_queue_pointing_at_a_capacity_block_fails(sandbox, reservations):
    _, check = _reserved(sandbox, reservations.block(), kind="reservation")
    assert check.status == "failed"
    assert "is a Capacity Block" in check.summary
    assert any("capacity.type: capacity-block" in f for f in fixes_of(check))


def test_reservation_of_another_type_or_zone_fails(sandbox, reservations):
    rid = reservations.odcr(instance_type="p5en.48xlarge", zone="us-east-1c")
    _, check = _reserved(sandbox, rid, kind="reservation")
    assert check.status == "failed"
    fixes = fixes_of(check)
    assert "set queues[0].instance_type: p5en.48xlarge, or use a reservation of p5.48xlarge" in fixes
    assert any("subnet in us-east-1c" in f for f in fixes)


def test_expired_capacity_block_fails_with_how_to_buy_a_new_one(sandbox, reservations):
    rid = reservations.block(state="expired", start=NOW - dt.timedelta(days=2), end=NOW - dt.timedelta(days=1))
    _, check = _reserved(sandbox, rid)
    assert check.status == "failed"
    assert check.summary == f"{rid} ended {(NOW - dt.timedelta(days=1)).strftime('%Y-%m-%d %H:%M UTC')}"
    assert any("buy a new Capacity Block" in f and "describe-capacity-block-offerings" in f for f in fixes_of(check))


def test_future_capacity_block_warns_with_its_start(sandbox, reservations):
    start = NOW + dt.timedelta(hours=5)
    rid = reservations.block(state="scheduled", start=start, end=start + dt.timedelta(days=1))
    results, check = _reserved(sandbox, rid)
    assert check.status == "warning"
    assert start.strftime("%Y-%m-%d %H:%M UTC") in check.summary
    assert not preflight_failed(results)


def test_unknown_reservation_through_the_real_sandbox_is_a_failed_check_not_an_exception(sandbox):
    # No subnet in the spec either: placement's own reservation lookup must fall back quietly too.
    rid = unknown_rid()
    spec = preflight_spec(queues=[{"name": "train", "instance_type": "p5.48xlarge", "nodes": 2,
                                   "capacity": {"type": "capacity-block", "reservation_id": rid}}])
    results = run_checks(sandbox, spec)
    assert by_name(results, "subnet").status == "passed"
    check = by_name(results, "reservation train")
    assert check.status == "failed"
    assert check.summary.startswith(f"Capacity Block {rid}: AWS said InvalidCapacityReservationId.NotFound: ")


# --- PCS and ParallelCluster -------------------------------------------------------------------------

def test_pcs_size_too_small_fails(sandbox):
    spec = preflight_spec(pcs={"size": "SMALL"},
                          queues=[{"name": "train", "instance_type": "p5.48xlarge", "nodes": {"min": 0, "max": 40}}])
    size = _failed(run_checks(sandbox, spec))["pcs size"]
    assert size.summary == "SMALL holds 32 nodes; the queues at their maximum and the login node reach 41"
    assert fixes_of(size) == ["set pcs.size: MEDIUM"]


def test_missing_node_fails_for_parallelcluster(sandbox, monkeypatch):
    import fmcluster.backends.parallelcluster.nodejs as nodejs

    monkeypatch.setattr(nodejs.shutil, "which", lambda name: None)
    node = _failed(run_checks(sandbox, preflight_spec(backend="parallelcluster")))["node.js"]
    assert "Node.js is not on PATH" in node.summary
    assert any(f"install Node.js {nodejs.MIN_NODE_MAJOR} or later" in f for f in fixes_of(node))


def test_unreachable_endpoint_is_a_failed_check_not_an_exception(monkeypatch):
    import boto3
    from botocore.config import Config

    from fmcluster.connection import aws

    # The hint names where this command's calls go, which is process-wide state an earlier test may have set:
    # point it here, and let monkeypatch put back both the target and the environment variable configure sets.
    monkeypatch.setattr(aws, "_target", aws.target())
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    aws.configure(None, None, "http://127.0.0.1:9")

    def client(service):
        return boto3.client(service, region_name=REGION, endpoint_url="http://127.0.0.1:9",
                            aws_access_key_id="testing", aws_secret_access_key="testing",
                            config=Config(retries={"max_attempts": 1}, connect_timeout=1))

    spec = preflight_spec()
    results = run_preflight(spec, REGION, client, registry.get(spec.backend).checks)
    assert [r.status for r in results] == ["failed", "skipped"]
    assert "EndpointConnectionError" in results[0].summary
    assert any("--endpoint-url" in f for f in fixes_of(results[0]))


def test_a_creating_pcs_cluster_is_a_warning(sandbox):
    # Its own region, so the CREATING cluster left behind blocks no other test's create.
    region = "eu-west-1"
    sandbox.faults({"latency": {"pcs.cluster": 60}})
    subnet = sandbox.client("ec2", region).describe_subnets()["Subnets"][0]["SubnetId"]
    other = f"pf-busy-{uuid.uuid4().hex[:6]}"
    sandbox.client("pcs", region).create_cluster(clusterName=other, scheduler={"type": "SLURM", "version": "25.11"},
                                                 size="SMALL", networking={"subnetIds": [subnet]})
    spec = preflight_spec(region=region)
    results = run_preflight(spec, region, lambda service: sandbox.client(service, region),
                            registry.get(spec.backend).checks)
    clusters = by_name(results, "pcs clusters")
    assert clusters.status == "warning"
    assert any(f"{other} is CREATING, so create will wait" in d for d in clusters.details)


def test_head_subnet_in_another_vpc_fails(sandbox):
    ec2 = sandbox.client("ec2", REGION)
    vpc = ec2.create_vpc(CidrBlock="10.77.0.0/16")["Vpc"]["VpcId"]
    head = ec2.create_subnet(VpcId=vpc, CidrBlock="10.77.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    spec = preflight_spec(network={"subnet_id": _default_subnet(sandbox, "us-east-1a"), "head_subnet_id": head})
    try:
        check = _failed(run_checks(sandbox, spec))["head subnet"]
    finally:
        ec2.delete_subnet(SubnetId=head)
        ec2.delete_vpc(VpcId=vpc)
    assert f"{head} is in {vpc}" in check.summary
    assert any(f.startswith("choose a head subnet in vpc-") for f in fixes_of(check))


def test_the_sandbox_serves_every_quota_preflight_reads(sandbox):
    """A code the sandbox did not serve would fail preflight there and nowhere else."""
    from fmcluster.preflight.capacity import QUOTA_NAMES

    quotas = sandbox.client("service-quotas")
    for code, name in QUOTA_NAMES.items():
        assert quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["QuotaName"] == name, code
