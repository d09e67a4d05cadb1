"""Helpers for running ParallelCluster's real code (``pcluster.lib``) against the sandbox in-process."""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

MINIMAL_CONFIG = Path(__file__).parent / "data" / "pcluster-minimal.yaml"


def reset_pcluster_clients() -> None:
    """Forget pcluster's cached boto3 clients and lookups so they pick up the current environment (nothing to
    forget while pcluster was never imported)."""
    if "pcluster.aws.aws_api" not in sys.modules:
        return
    from pcluster.aws.aws_api import AWSApi
    from pcluster.aws.common import Cache

    AWSApi._instance = None
    Cache.clear_all()
    # pcluster's clients come from boto3's default session, which keeps the credentials and endpoint of the
    # environment it was first made in (an in-process command's sandbox, say): forget it too, or a later offline
    # check calls that endpoint and waits out its retries (seen: test_render's schema check, 50 s).
    import boto3

    boto3.DEFAULT_SESSION = None


def default_subnet(ec2_client) -> str:
    """A subnet of the region's default VPC (moto creates one per region)."""
    subnets = ec2_client.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    return sorted(subnets, key=lambda s: s["AvailabilityZone"])[0]["SubnetId"]


def minimal_config(subnet_id: str, **compute_resource: Any) -> dict:
    """tests/data/pcluster-minimal.yaml with the subnet filled in and compute-resource overrides."""
    config = yaml.safe_load(MINIMAL_CONFIG.read_text().replace("SUBNET_ID", subnet_id))
    config["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0].update(compute_resource)
    return config


def with_counts(config: dict, *, min_count: int, max_count: int) -> dict:
    changed = copy.deepcopy(config)
    changed["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0].update(
        {"MinCount": min_count, "MaxCount": max_count}
    )
    return changed


def wait_for(probe: Callable[[], Any], done: Callable[[Any], bool], timeout: float = 60, every: float = 0.5):
    """Call probe() until done(result); return the last result (raises TimeoutError)."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"still {result!r} after {timeout}s")
        time.sleep(every)
