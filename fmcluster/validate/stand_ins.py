"""Well-formed values for what AWS issues at create time (ids, names, DNS names), so that ``validate`` can check
documents whose references (``${kind.key.attribute}``) name resources that do not exist yet.

The kinds every backend shares (network, security groups, file systems, IAM) have their stand-ins here; a backend's
own kinds (its cluster, its node groups) have theirs in its profile (``BackendProfile.stand_ins``), handed in by the
registry (:func:`register`) since validate sits below the backends and never imports them. Light: no botocore.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# By the whole reference.
_STAND_INS: dict[str, Any] = {
    "network.vpc_id": "vpc-0123456789abcdef0",
    "network.vpc_ip_ranges": [{"CidrIp": "172.31.0.0/16", "Description": "the VPC"}],
    "fmcluster.cluster_id": "0123456789abcdef0123456789abcdef",
    "network.availability_zone": "us-east-1a",
    "network.second_availability_zone": "us-east-1b",
    "network.head_availability_zone": "us-east-1a",
    "network.control_subnet_id": "subnet-0123456789abcdef2",
}
# By (kind, attribute): references name a resource by kind and key, ``${kind.key.attribute}``.
_STAND_IN_BY_KIND: dict[tuple[str, str], Any] = {
    ("security_group", "id"): "sg-0123456789abcdef0",
    ("instance_profile", "arn"): "arn:aws:iam::123456789012:instance-profile/aws-pcs/AWSPCS-example",
    ("fsx_lustre", "id"): "fs-0123456789abcdef0",
    ("fsx_lustre", "dns_name"): "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    ("fsx_lustre", "mount_name"): "abcdefgh",
    ("fsx_openzfs", "id"): "fs-0123456789abcdef1",
    ("fsx_openzfs", "root_volume_id"): "fsvol-0123456789abcdef0",
    ("fsx_openzfs", "dns_name"): "fs-0123456789abcdef1.fsx.us-east-1.amazonaws.com",
    ("launch_template", "id"): "lt-0123456789abcdef0",
    ("launch_template", "version"): "1",
    ("placement_group", "name"): "example-placement-group",
    ("vpc", "id"): "vpc-0123456789abcdef1",
    ("subnet", "id"): "subnet-0123456789abcdef1",
    ("internet_gateway", "id"): "igw-0123456789abcdef0",
    ("elastic_ip", "allocation_id"): "eipalloc-0123456789abcdef0",
    ("nat_gateway", "id"): "nat-0123456789abcdef0",
    ("route_table", "id"): "rtb-0123456789abcdef0",
    ("efs", "id"): "fs-0123456789abcdef2",
    ("efs", "dns_name"): "fs-0123456789abcdef2.efs.us-east-1.amazonaws.com",
    ("existing_efs", "dns_name"): "fs-0123456789abcdef3.efs.us-east-1.amazonaws.com",
    ("existing_fsx_lustre", "dns_name"): "fs-0123456789abcdef4.fsx.us-east-1.amazonaws.com",
    ("existing_fsx_lustre", "mount_name"): "abcdefgh",
    ("existing_fsx_volume", "dns_name"): "fs-0123456789abcdef5.fsx.us-east-1.amazonaws.com",
    ("existing_fsx_volume", "volume_path"): "/fsx/home",
    ("bucket", "name"): "fmcluster-0123456789abcdef0123456789abcdef",
    ("iam_role", "arn"): "arn:aws:iam::123456789012:role/example-us-east-1-eks-nodes",
}
# Each registered backend's own, by its name.
_BY_BACKEND: dict[str, Mapping[tuple[str, str], Any]] = {}


def register(backend: str, stand_ins: Mapping[tuple[str, str], Any]) -> None:
    """Hand in backend ``backend``'s stand-ins for its own kinds, by (kind, attribute)."""
    _BY_BACKEND[backend] = stand_ins


def unregister(backend: str) -> None:
    _BY_BACKEND.pop(backend, None)


def stand_in(reference: str) -> Any:
    """The stand-in for ``reference`` (``kind.key.attribute``); a KeyError when there is none."""
    if reference in _STAND_INS:
        return _STAND_INS[reference]
    parts = reference.split(".")
    key = (parts[0], parts[-1])
    if key in _STAND_IN_BY_KIND:
        return _STAND_IN_BY_KIND[key]
    for own in _BY_BACKEND.values():
        if key in own:
            return own[key]
    raise KeyError(f"no stand-in for reference ${{{reference}}}")
