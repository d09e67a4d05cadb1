"""The sandbox endpoint over real HTTPS with real boto3: routing, faults, quotas, TLS, control routes."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError, SSLError
from botocore.retries.standard import RetryContext, ThrottledRetryableChecker

NO_RETRY = {"retries": {"max_attempts": 1, "mode": "standard"}}


def _is_throttle(err: ClientError) -> bool:
    """What botocore's retry handler decides for this error (standard and adaptive modes)."""
    ctx = RetryContext(attempt_number=1, parsed_response=err.response)
    return ThrottledRetryableChecker().is_retryable(ctx)


def test_health_lists_services(sandbox):
    health = sandbox.health()
    assert health["ok"] is True
    assert health["pid"] == sandbox.pid
    for service in ("ec2", "iam", "s3", "fsx", "cloudformation", "servicequotas", "sts"):
        assert service in health["services"]
    assert health["endpoint_url"] == sandbox.endpoint_url


@pytest.mark.parametrize("region", ["us-east-1", "us-west-2"])
def test_new_account_has_default_vpc_and_subnets(sandbox, region):
    ec2 = sandbox.client("ec2", region)
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    assert len(vpcs) == 1
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    azs = {s["AvailabilityZone"] for s in subnets}
    assert len(subnets) == len(azs) >= 3
    assert all(az.startswith(region) for az in azs)
    assert {s["VpcId"] for s in subnets} == {vpcs[0]["VpcId"]}


def test_sts_account_is_motos_default(sandbox):
    assert sandbox.client("sts").get_caller_identity()["Account"] == "123456789012"


# -- throttling in each protocol's own form ------------------------------------------------------------

THROTTLE_CASES = [
    # (signing name for faults, boto3 service, call, expected code, expected HTTP status)
    ("ec2", "ec2", lambda c: c.describe_vpcs(), "RequestLimitExceeded", 503),
    ("iam", "iam", lambda c: c.list_roles(), "Throttling", 400),
    ("sts", "sts", lambda c: c.get_caller_identity(), "Throttling", 400),
    ("cloudformation", "cloudformation", lambda c: c.list_stacks(), "Throttling", 400),
    ("s3", "s3", lambda c: c.list_buckets(), "SlowDown", 503),
    ("fsx", "fsx", lambda c: c.describe_file_systems(), "ThrottlingException", 400),
    (
        "servicequotas",
        "service-quotas",
        lambda c: c.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B"),
        "ThrottlingException",
        400,
    ),
]


@pytest.mark.parametrize(
    "signing,service,call,code,status", THROTTLE_CASES, ids=[c[0] for c in THROTTLE_CASES]
)
def test_throttling_is_recognised_by_botocore(sandbox, signing, service, call, code, status):
    client = sandbox.client(service, **NO_RETRY)
    sandbox.faults({"throttle_rate": {signing: 1.0}})
    with pytest.raises(ClientError) as exc:
        call(client)
    err = exc.value
    assert err.response["Error"]["Code"] == code
    assert err.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert _is_throttle(err)
    # only that service is throttled; it answers again once the fault is lifted
    sandbox.faults({"throttle_rate": {signing: None}})
    call(client)


def test_throttling_star_applies_to_every_service(sandbox):
    sandbox.faults({"throttle_rate": {"*": 1.0}})
    with pytest.raises(ClientError) as exc:
        sandbox.client("ec2", **NO_RETRY).describe_vpcs()
    assert exc.value.response["Error"]["Code"] == "RequestLimitExceeded"
    with pytest.raises(ClientError) as exc:
        sandbox.client("iam", **NO_RETRY).list_roles()
    assert exc.value.response["Error"]["Code"] == "Throttling"


def test_standard_retries_ride_out_partial_throttling(sandbox):
    ec2 = sandbox.client("ec2", retries={"max_attempts": 10, "mode": "standard"})
    vpcs = ec2.describe_vpcs()["Vpcs"]
    # seed 1: the RNG's first draws are 0.134, 0.847, 0.764 (random.Random(1)), so at rate 0.5 the first
    # attempt is throttled and the second answers
    sandbox.faults({"throttle_rate": {"ec2": 0.5}, "seed": 1})
    out = ec2.describe_vpcs()
    assert out["ResponseMetadata"]["RetryAttempts"] == 1  # throttled once, retried, answered
    assert out["Vpcs"] == vpcs


def _held(sandbox) -> dict:
    return sandbox.control("GET", "/_fmcluster/faults")["held"]


def test_a_call_latency_holds_that_call_only(sandbox):
    """How long the hold lasts is a timing, measured in bench/suite_timings.py (call_latency.ec2)."""
    ec2 = sandbox.client("ec2")
    vpcs = ec2.describe_vpcs()["Vpcs"]
    sandbox.faults({"latency": {"call.ec2.DescribeVpcs": 0.2}})
    assert ec2.describe_vpcs()["Vpcs"] == vpcs  # held, then answered as usual
    assert ec2.describe_subnets()["Subnets"]
    assert _held(sandbox) == {"call.ec2.DescribeVpcs": {"started": 1, "answered": 1}}


# -- InsufficientInstanceCapacity ----------------------------------------------------------------------

AMI = "ami-12c6146b"  # one of the AMIs every moto region has


def test_insufficient_capacity_on_run_instances(sandbox):
    ec2 = sandbox.client("ec2", **NO_RETRY)
    subnet = ec2.describe_subnets(
        Filters=[{"Name": "default-for-az", "Values": ["true"]}, {"Name": "availability-zone",
                                                                   "Values": ["us-east-1b"]}]
    )["Subnets"][0]
    image = ec2.describe_images(ImageIds=[AMI])["Images"][0]["ImageId"]
    sandbox.faults({"insufficient_capacity": ["p5.48xlarge"]})
    with pytest.raises(ClientError) as exc:
        ec2.run_instances(
            ImageId=image, InstanceType="p5.48xlarge", MinCount=1, MaxCount=1, SubnetId=subnet["SubnetId"]
        )
    err = exc.value.response
    assert err["Error"]["Code"] == "InsufficientInstanceCapacity"
    assert err["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert "p5.48xlarge" in err["Error"]["Message"] and "us-east-1b" in err["Error"]["Message"]
    # other instance types still launch
    out = ec2.run_instances(ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1)
    ids = [i["InstanceId"] for i in out["Instances"]]
    ec2.terminate_instances(InstanceIds=ids)


def test_insufficient_capacity_through_launch_template(sandbox):
    ec2 = sandbox.client("ec2", **NO_RETRY)
    image = AMI
    lt = ec2.create_launch_template(
        LaunchTemplateName="ice-test",
        LaunchTemplateData={"ImageId": image, "InstanceType": "p5en.48xlarge"},
    )["LaunchTemplate"]
    sandbox.faults({"insufficient_capacity": ["p5en.48xlarge"]})
    try:
        with pytest.raises(ClientError) as exc:
            ec2.run_instances(
                LaunchTemplate={"LaunchTemplateId": lt["LaunchTemplateId"], "Version": "$Latest"},
                MinCount=1,
                MaxCount=1,
            )
        assert exc.value.response["Error"]["Code"] == "InsufficientInstanceCapacity"
    finally:
        ec2.delete_launch_template(LaunchTemplateId=lt["LaunchTemplateId"])


# -- Service Quotas -----------------------------------------------------------------------------------

ACCELERATOR_QUOTAS = ["L-417A185B", "L-DB2E81BA", "L-1216C47A", "L-2C3B7624", "L-7212CCBC"]


def test_ec2_quotas_are_seeded_and_settable(sandbox):
    sq = sandbox.client("service-quotas")
    for code in ACCELERATOR_QUOTAS:
        quota = sq.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]
        assert quota["QuotaCode"] == code and quota["Value"] >= 10000
    listed = {q["QuotaCode"] for q in sq.list_service_quotas(ServiceCode="ec2")["Quotas"]}
    assert set(ACCELERATOR_QUOTAS) <= listed
    assert sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] > 0

    sandbox.quotas({"region": "us-east-1", "L-417A185B": 0})
    assert sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] == 0.0
    # per region
    west = sandbox.client("service-quotas", "us-west-2")
    assert west.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] > 0
    # moto's own vpc quotas are untouched
    assert sq.list_aws_default_service_quotas(ServiceCode="vpc")["Quotas"]


def test_quota_reset_after_test(sandbox):
    # the previous test lowered L-417A185B; the fixture restored it
    sq = sandbox.client("service-quotas")
    assert sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] > 0


# -- control routes -----------------------------------------------------------------------------------


def test_faults_route_round_trip_and_errors(sandbox):
    out = sandbox.faults({"throttle_rate": {"ec2": 0.25}, "insufficient_capacity": ["p5.48xlarge"]})
    assert out["throttle_rate"] == {"ec2": 0.25}
    assert sandbox.control("GET", "/_fmcluster/faults")["insufficient_capacity"] == ["p5.48xlarge"]
    with pytest.raises(urllib.error.HTTPError) as exc:
        sandbox.faults({"no_such_field": 1})
    assert exc.value.code == 400
    assert "no_such_field" in json.loads(exc.value.read())["error"]
    assert sandbox.faults({"reset": True})["throttle_rate"] == {}
    with pytest.raises(urllib.error.HTTPError) as exc:
        sandbox.control("GET", "/_fmcluster/nope")
    assert exc.value.code == 404


# -- HTTPS ----------------------------------------------------------------------------------------------


def test_tls_certificate_is_verified(sandbox):
    assert sandbox.endpoint_url.startswith("https://127.0.0.1:")
    ctx = ssl.create_default_context(cafile=sandbox.ca_bundle)
    port = int(sandbox.endpoint_url.rsplit(":", 1)[1])
    for host in ("127.0.0.1", "localhost"):
        with urllib.request.urlopen(f"https://{host}:{port}/_fmcluster/health", context=ctx) as resp:
            assert json.loads(resp.read())["ok"]
    # without the CA bundle botocore refuses the self-signed certificate
    import boto3

    plain = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    ).client("sts", endpoint_url=sandbox.endpoint_url, verify=True)
    with pytest.raises(SSLError):
        plain.get_caller_identity()


def test_s3_with_deny_insecure_transport_policy(sandbox):
    s3 = sandbox.client("s3")
    bucket = "fmcluster-tls-only"
    s3.create_bucket(Bucket=bucket)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    s3.put_object(Bucket=bucket, Key="configs/cluster.yaml", Body=b"Region: us-east-1\n")
    assert s3.get_object(Bucket=bucket, Key="configs/cluster.yaml")["Body"].read() == b"Region: us-east-1\n"
    # path style is what botocore uses against an IP endpoint
    urls: list[str] = []
    s3.meta.events.register("before-send.s3", lambda request, **_: urls.append(request.url))
    s3.list_objects_v2(Bucket=bucket)
    assert urls[-1].startswith(f"{sandbox.endpoint_url}/{bucket}?")


def test_s3_virtual_host_style_is_understood(sandbox):
    """moto routes ``<bucket>.localhost`` Host headers; clients only need DNS for it (not tested)."""
    import http.client

    s3 = sandbox.client("s3")
    s3.create_bucket(Bucket="fmcluster-vhost")
    s3.put_object(Bucket="fmcluster-vhost", Key="k", Body=b"v")
    port = int(sandbox.endpoint_url.rsplit(":", 1)[1])
    ctx = ssl.create_default_context(cafile=sandbox.ca_bundle)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
    scope = "testing/20260101/us-east-1/s3/aws4_request"
    conn.request(
        "GET",
        "/k",
        headers={
            "Host": f"fmcluster-vhost.localhost:{port}",
            "Authorization": f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature=0",
        },
    )
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"v")
    conn.close()


# -- PCS ------------------------------------------------------------------------------------------------

def test_pcs_is_routed_by_target_header(sandbox):
    assert "pcs" in sandbox.health()["services"]
    pcs = sandbox.client("pcs", **NO_RETRY)
    assert isinstance(pcs.list_clusters()["clusters"], list)
    sandbox.faults({"throttle_rate": {"pcs": 1.0}})
    with pytest.raises(ClientError) as exc:
        pcs.list_clusters()
    assert exc.value.response["Error"]["Code"] == "ThrottlingException"
    assert _is_throttle(exc.value)


def test_pcs_call_latency_is_applied_once(sandbox):
    """The PCS emulator holds its own calls; the server must not hold them again (timed in
    bench/suite_timings.py, call_latency.pcs)."""
    pcs = sandbox.client("pcs")
    pcs.list_clusters()
    sandbox.faults({"latency": {"call.pcs.ListClusters": 0.2}})
    pcs.list_clusters()
    assert _held(sandbox) == {"call.pcs.ListClusters": {"started": 1, "answered": 1}}


def test_concurrent_requests(sandbox):
    from concurrent.futures import ThreadPoolExecutor

    clients = [sandbox.client("ec2") for _ in range(4)] + [sandbox.client("sts") for _ in range(4)]

    def call(client):
        if client.meta.service_model.service_name == "ec2":
            return len(client.describe_vpcs()["Vpcs"])
        return client.get_caller_identity()["Account"]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, clients * 3))
    assert len(results) == 24


def test_reset_route_forgets_resources_and_reseeds(sandbox):
    """Last in this file on purpose: it wipes the session sandbox's state."""
    ec2 = sandbox.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    sandbox.quotas({"region": "us-east-1", "L-417A185B": 1})
    assert sandbox.control("POST", "/_fmcluster/reset", {}) == {"ok": True}
    ids = {v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"]}
    assert vpc not in ids
    assert [v["IsDefault"] for v in ec2.describe_vpcs()["Vpcs"]] == [True]
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    assert len(subnets) >= 3
    sq = sandbox.client("service-quotas")
    assert sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] > 1
