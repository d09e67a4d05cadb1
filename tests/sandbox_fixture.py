"""Start the fmcluster sandbox for the test session, the way a user would, and talk to it over HTTP.

The sandbox runs as ``python -m fmcluster_sandbox.server --port 0 --home <tmp>`` in a subprocess (same
process group as pytest, so Ctrl-C stops it too); it picks a free loopback port and writes it to
``<home>/sandbox/sandbox.json``.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 60.0


@dataclass
class Sandbox:
    endpoint_url: str
    ca_bundle: str | None
    home: Path
    pid: int
    _touched_quota_regions: set[str] = field(default_factory=set)
    _sessions: dict[str, Any] = field(default_factory=dict, repr=False)
    _networks: int = 0

    @property
    def env(self) -> dict[str, str]:
        """Environment for a subprocess that must use the sandbox (merge into ``os.environ``)."""
        env = {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "FMCLUSTER_HOME": str(self.home),
            # never read the ~/.aws of whoever runs the tests
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
        if self.ca_bundle:
            env["AWS_CA_BUNDLE"] = self.ca_bundle
        return env

    def client(self, service: str, region: str = "us-east-1", **config: Any):
        """A boto3 client for *service* pointed at the sandbox; ``config`` goes to botocore Config."""
        import boto3
        from botocore.config import Config

        session = self._sessions.get(region)
        if session is None:  # one session per region: loading service models is the slow part
            session = self._sessions[region] = boto3.session.Session(
                aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region
            )
        return session.client(
            service,
            endpoint_url=self.endpoint_url,
            verify=self.ca_bundle or False,
            # The tests' own look-ups must see through injected throttling; a test that wants raw errors
            # passes retries={"max_attempts": 1}.
            config=Config(**{"retries": {"mode": "standard", "max_attempts": 10}, **config}),
        )

    # -- control routes --------------------------------------------------------------------------
    def control(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.endpoint_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        ctx = ssl.create_default_context(cafile=self.ca_bundle) if self.ca_bundle else None
        with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
            return json.loads(resp.read())

    def faults(self, changes: dict) -> dict:
        """Merge fault changes (``{"reset": true}`` restores defaults); return the new faults."""
        return self.control("POST", "/_fmcluster/faults", changes)

    def quotas(self, changes: dict) -> dict:
        """Set service quotas, e.g. ``{"region": "us-east-1", "L-417A185B": 0}``."""
        self._touched_quota_regions.add(changes.get("region", "us-east-1"))
        return self.control("POST", "/_fmcluster/quotas", changes)

    def held(self, call: str) -> dict[str, int]:
        """How many calls the sandbox's ``call.<service>.<Operation>`` delay has held (``started``) and how many
        of those it has answered since (``answered``)."""
        return {"started": 0, "answered": 0, **self.control("GET", "/_fmcluster/faults")["held"].get(call, {})}

    def wait_held(self, call: str, count: int = 1, timeout: float = 60) -> None:
        """Wait until *count* calls are inside (or past) the ``call`` delay: a client is now in a held call."""
        self._wait(call, lambda counts: counts["started"] >= count, f"{count} call(s) held", timeout)

    def wait_held_answered(self, call: str, timeout: float = 60) -> None:
        """Wait until every call the ``call`` delay holds has been answered (has landed, even when its client
        died meanwhile, as an in-flight request does on AWS)."""
        self._wait(call, lambda counts: counts["answered"] >= counts["started"], "every held call answered",
                   timeout)

    def _wait(self, call: str, done: Any, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done(counts := self.held(call)):
            if time.monotonic() > deadline:
                raise AssertionError(f"{call}: never saw {what}: {counts}")
            time.sleep(0.05)  # poll interval of the signal, not a guess at how long anything takes

    def health(self) -> dict:
        return self.control("GET", "/_fmcluster/health")

    def private_network(self, region: str = "us-east-1", zone: str | None = None, *, nat: bool = True,
                        pcs_endpoint: bool = False) -> dict[str, str]:
        """A VPC as a user builds one for PCS ("AWS PCS VPC and subnet requirements"): DNS resolution and
        hostnames on, a public subnet with an internet gateway and (``nat``) a NAT gateway, a private subnet
        whose default route goes to the NAT gateway, an S3 gateway endpoint, and (``pcs_endpoint``) a PCS
        interface endpoint. Returns ``{"vpc", "public_subnet", "private_subnet", "zone"}``."""
        ec2 = self.client("ec2", region)
        zone = zone or f"{region}a"
        self._networks += 1
        block = 64 + self._networks % 190
        vpc = ec2.create_vpc(CidrBlock=f"10.{block}.0.0/16")["Vpc"]["VpcId"]
        ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsSupport={"Value": True})
        ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
        public, private = (ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone)["Subnet"]["SubnetId"]
                           for cidr in (f"10.{block}.0.0/20", f"10.{block}.128.0/17"))
        # A public subnet gives its instances public addresses (how a single-interface login node reaches PCS).
        ec2.modify_subnet_attribute(SubnetId=public, MapPublicIpOnLaunch={"Value": True})
        gateway = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=vpc)
        public_routes = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
        ec2.create_route(RouteTableId=public_routes, DestinationCidrBlock="0.0.0.0/0", GatewayId=gateway)
        ec2.associate_route_table(RouteTableId=public_routes, SubnetId=public)
        private_routes = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
        ec2.associate_route_table(RouteTableId=private_routes, SubnetId=private)
        if nat:
            allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
            nat_id = ec2.create_nat_gateway(SubnetId=public, AllocationId=allocation)["NatGateway"]["NatGatewayId"]
            ec2.create_route(RouteTableId=private_routes, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat_id)
        ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{region}.s3", VpcEndpointType="Gateway",
                                RouteTableIds=[private_routes])
        if pcs_endpoint:
            ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{region}.pcs", VpcEndpointType="Interface",
                                    SubnetIds=[private], PrivateDnsEnabled=True)
        return {"vpc": vpc, "public_subnet": public, "private_subnet": private, "zone": zone}

    def reset_between_tests(self) -> None:
        self.faults({"reset": True})
        for region in sorted(self._touched_quota_regions):
            self.control("POST", "/_fmcluster/quotas", {"region": region, "reset": True})
        self._touched_quota_regions.clear()


def _health(endpoint: str, ca_bundle: str | None) -> dict | None:
    ctx = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None
    try:
        with urllib.request.urlopen(f"{endpoint}/_fmcluster/health", timeout=2, context=ctx) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


def start_sandbox(home: Path, *extra_args: str) -> tuple[subprocess.Popen, Sandbox]:
    """Run the sandbox server in a subprocess with *home* as FMCLUSTER_HOME; wait until healthy."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["FMCLUSTER_HOME"] = str(home)
    # this checkout's fmcluster and fmcluster_sandbox, whether or not they are installed
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), str(REPO_ROOT / "sandbox"),
                                                    env.get("PYTHONPATH")) if p)
    log = open(home / "sandbox-test.log", "ab")  # the child keeps its own copy
    proc = subprocess.Popen(
        [sys.executable, "-m", "fmcluster_sandbox.server", "--port", "0", "--home", str(home), "--quiet",
         *extra_args],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    log.close()
    state = home / "sandbox" / "sandbox.json"
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"sandbox exited with {proc.returncode}:\n{(home / 'sandbox-test.log').read_text()}"
            )
        try:
            info = json.loads(state.read_text())
        except (OSError, ValueError):
            info = None
        if info and info.get("pid") == proc.pid:
            answer = _health(info["endpoint_url"], info.get("ca_bundle"))
            if answer and answer.get("pid") == proc.pid:
                return proc, Sandbox(info["endpoint_url"], info.get("ca_bundle"), home, proc.pid)
        time.sleep(0.05)
    stop_sandbox(proc)
    raise RuntimeError(f"sandbox not healthy after {START_TIMEOUT} s; see {home / 'sandbox-test.log'}")


def stop_sandbox(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
